// The outbox relay: run two or more. Each loop claims a batch in a short
// transaction (FOR UPDATE SKIP LOCKED, Processing, a lease, a claim id
// unique per claim), publishes it outside any transaction on a
// ConfirmChannel, and only then writes each row's outcome, every write
// conditional on the claim id:
//
//   confirmed, no return          → Published      (0 rows: fenced, logged)
//   returned, nacked, not sent    → attempt_count+1, last_error, next_attempt_at
//                                   by backoff; past the budget Failed + ALERT
//   unknown (no confirm)          → nothing: the lease expires, the row is
//                                   claimed again and republished, same eventId
//
// Broker or database gone: log it, back off, reconnect; never exit.
import { randomUUID } from 'node:crypto';
import { connect, drop } from './lib/amqp.js';
import { backoff, sleep } from './lib/backoff.js';
import { fatal, loadConfig } from './lib/config.js';
import { serveControl } from './lib/control.js';
import { crashPoints } from './lib/crashpoints.js';
import { openPool, ping } from './lib/db.js';
import { openEventLog } from './lib/eventlog.js';
import { claim, markPublished, scheduleRetries } from './lib/outbox.js';
import { publishBatch } from './lib/publisher.js';
import { declareExchange } from './lib/topology.js';
import { brokerUrls, ring } from './lib/nodes.js';
import { variantFor } from './lib/variant.js';

let config, variant, brokers;
try {
  config = loadConfig({
    instance: 'relay',
    'db-url': '',
    'amqp-url': '',
    'amqp-urls': '',
    'amqp-heartbeat': { duration: '2s' },
    'control-addr': '127.0.0.1:8081',
    'event-log': '',
    lease: { duration: '30s' },
    'poll-interval': { duration: '200ms' },
    'batch-size': 50,
    'backoff-base': { duration: '500ms' },
    'backoff-max': { duration: '30s' },
    'retry-budget': 10,
    'confirm-timeout': { duration: '5s' },
    'reconnect-max': { duration: '2s' },
  });
  variant = variantFor('relay');
  if (!config.dbUrl) throw new Error('--db-url (or DB_URL) is required');
  // --amqp-urls (a cluster's nodes, the preferred first) replaces --amqp-url.
  brokers = ring(brokerUrls(config.amqpUrls, config.amqpUrl));
  if (config.amqpHeartbeat <= 0) throw new Error('--amqp-heartbeat must be positive');
  if (config.confirmTimeout >= config.lease) throw new Error('--confirm-timeout must be shorter than --lease');
} catch (err) {
  fatal(err);
}

const log = openEventLog(config.eventLog, config.instance);
const points = crashPoints(log, ['relay:confirmed']);
try {
  points.armFromEnv();
} catch (err) {
  fatal(err);
}
const pool = openPool(config.dbUrl, log, { max: 2 });
let link = null; // {conn, ch} while the broker is reachable
let stopping = false;

const eventFields = (row, claimId) => ({ eventId: row.eventId, claimId, aggregateId: row.aggregateId, sequence: row.sequence, attempt: row.attempt });

// settle writes the outcomes of one claim: Published for the confirmed
// rows, a retry (or Failed) for the refused ones; the rest wait for the lease.
async function settle(claimId, rows, outcomes) {
  const confirmed = rows.filter((_, i) => outcomes[i].kind === 'confirmed');
  if (confirmed.length > 0) {
    const ids = confirmed.map((r) => r.eventId);
    const marked = await markPublished(pool, claimId, ids, { unfenced: variant === 'unfenced-published' });
    log.batch(
      confirmed.map((r) =>
        marked.has(r.eventId)
          ? ['marked', eventFields(r, claimId)]
          : ['fenced', { ...eventFields(r, claimId), detail: 'Published write refused: the claim no longer holds the row' }],
      ),
    );
  }

  const retries = [];
  rows.forEach((r, i) => {
    const { kind, error } = outcomes[i];
    if (kind === 'returned' || kind === 'nacked' || kind === 'not-sent') {
      retries.push({ row: r, eventId: r.eventId, error, delayMs: backoff(r.attempt, config.backoffBase, config.backoffMax) });
    }
  });
  if (retries.length === 0) return;
  const written = await scheduleRetries(pool, claimId, config.retryBudget, retries);
  log.batch(
    retries.map(({ row, error, delayMs }) => {
      const w = written.get(row.eventId);
      const fields = { ...eventFields(row, claimId), error };
      if (!w) return ['fenced', { ...fields, detail: 'retry write refused: the claim no longer holds the row' }];
      if (w.status === 'Failed') {
        const alert = `ALERT: outbox event ${row.eventId} Failed after ${w.attempt} attempts: ${error}`;
        process.stderr.write(`${alert}\n`);
        return ['failed', { ...fields, attempt: w.attempt, detail: alert }];
      }
      return ['retry-scheduled', { ...fields, attempt: w.attempt, detail: `next attempt in ${delayMs}ms` }];
    }),
  );
}

// relayOnce claims and relays one batch; false when there was nothing to do.
async function relayOnce() {
  const { ch, conn } = link; // if it dies from here on, publishes fail: not-sent
  const claimId = `${config.instance}:${randomUUID()}`;
  const rows = await claim(pool, claimId, config.batchSize, config.lease, { ignoreLease: variant === 'lease-ignored' });
  if (rows.length === 0) return false;
  log.batch(rows.map((r) => ['claimed', eventFields(r, claimId)]));

  const outcomes = await publishBatch(ch, rows, {
    confirmTimeoutMs: config.confirmTimeout,
    correlateReturns: variant !== 'ignore-return',
    onPublished: (sent) => log.batch(sent.map((r) => ['published', eventFields(r, claimId)])),
  });
  const names = { confirmed: 'confirmed', returned: 'returned', nacked: 'nacked', unknown: 'unknown-outcome', 'not-sent': 'error' };
  log.batch(rows.map((r, i) => [names[outcomes[i].kind], { ...eventFields(r, claimId), error: outcomes[i].error }]));
  if (outcomes.some((o) => o.kind === 'unknown')) {
    // Confirms went missing: this connection cannot be trusted any more.
    if (link?.conn === conn) link = null;
    drop(conn);
  }

  if (outcomes.some((o) => o.kind === 'confirmed')) await points.hit('relay:confirmed');
  await settle(claimId, rows, outcomes);
  return true;
}

async function run() {
  let failures = 0;
  while (!stopping) {
    if (!link) {
      link = await connect(brokers, {
        log,
        confirm: true,
        setup: declareExchange,
        reconnectMaxMs: config.reconnectMax,
        heartbeatMs: config.amqpHeartbeat,
        stopping: () => stopping,
        onLost: () => {
          link = null;
        },
      });
      continue;
    }
    try {
      const busy = await relayOnce();
      failures = 0;
      if (!busy) await sleep(config.pollInterval);
    } catch (err) {
      // The database went away mid-claim or mid-write: rows we hold wait
      // for their lease; try again after a pause.
      failures++;
      log.error(err, 'relay batch');
      await sleep(backoff(failures, 100, config.reconnectMax));
    }
  }
}

await serveControl(config.controlAddr, { points, healthy: async () => link !== null && (await ping(pool)) });
log.log('started', { detail: `relay, lease ${config.lease}ms, batch ${config.batchSize}, budget ${config.retryBudget}, variant ${variant}` });

const done = run();
async function shutdown() {
  stopping = true;
  setTimeout(() => process.exit(0), 2000).unref();
  await done.catch(() => {});
  drop(link?.conn);
  await pool.end().catch(() => {});
  process.exit(0);
}
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
