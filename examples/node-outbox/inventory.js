// The inventory consumer: applies each order event once. Per delivery ONE
// transaction: the inbox row (ON CONFLICT DO NOTHING) and, only if it was
// new, the stock reservation; commit, then ack. A redelivery or a republish
// of the same eventId finds its inbox row and is acked without effect.
// With --apply=later it stores first and applies later, as inbox libraries
// do: per delivery one transaction stores the event in its inbox row (ON
// CONFLICT DO NOTHING); commit, then ack. A poller, every --apply-every,
// takes the rows not applied yet (FOR UPDATE SKIP LOCKED) and applies each
// in the same transaction as the write that marks it applied; one that
// fails is rolled back to its savepoint and tried again at next_attempt_at,
// after a backoff up to --apply-retry-max. Its schema is
// schema/inventory-apply-later.sql.
// A message that cannot be parsed, or has no eventId, is dead-lettered at
// once (nack, requeue=false). A database error acks nothing: the message
// goes back to the queue (nack, requeue=true) after a pause.
import { connect, drop } from './lib/amqp.js';
import { backoff, sleep } from './lib/backoff.js';
import { fatal, loadConfig } from './lib/config.js';
import { serveControl } from './lib/control.js';
import { crashPoints } from './lib/crashpoints.js';
import { openPool, ping, withTransaction } from './lib/db.js';
import { openEventLog } from './lib/eventlog.js';
import { declareConsumer, QUEUE } from './lib/topology.js';
import { brokerUrls, ring } from './lib/nodes.js';
import { variantFor } from './lib/variant.js';

let config, variant, brokers;
try {
  config = loadConfig({
    instance: 'inventory',
    'db-url': '',
    'amqp-url': '',
    'amqp-urls': '',
    'amqp-heartbeat': { duration: '2s' },
    'control-addr': '127.0.0.1:8082',
    'event-log': '',
    'consumer-name': 'inventory',
    prefetch: 32,
    'db-connections': 4,
    'reconnect-max': { duration: '2s' },
    apply: 'now',
    'apply-every': { duration: '1s' },
    'apply-batch': 32,
    'apply-retry-max': { duration: '10s' },
  });
  variant = variantFor('inventory');
  if (!config.dbUrl) throw new Error('--db-url (or DB_URL) is required');
  // --amqp-urls (a cluster's nodes, the preferred first) replaces --amqp-url.
  brokers = ring(brokerUrls(config.amqpUrls, config.amqpUrl));
  if (config.amqpHeartbeat <= 0) throw new Error('--amqp-heartbeat must be positive');
  if (config.prefetch < 2) throw new Error('--prefetch must be at least 2');
  if (config.apply !== 'now' && config.apply !== 'later') throw new Error(`--apply must be now or later, got ${JSON.stringify(config.apply)}`);
  if (config.applyEvery <= 0) throw new Error('--apply-every must be positive');
  if (config.applyBatch < 1) throw new Error('--apply-batch must be at least 1');
} catch (err) {
  fatal(err);
}

const log = openEventLog(config.eventLog, config.instance);
const points = crashPoints(log, ['inventory:committed']);
try {
  points.armFromEnv();
} catch (err) {
  fatal(err);
}
const pool = openPool(config.dbUrl, log, { max: config.dbConnections });
let link = null;
let stopping = false;
let dbFailures = 0;
let consumerTag = null;
const inFlight = new Set();

const actions = { 'order.created': 'reserve', 'order.paid': 'confirm', 'order.cancelled': 'release' };

// parseEvent returns [event, null] or [null, why it is poison].
function parseEvent(msg) {
  let body;
  try {
    body = JSON.parse(msg.content.toString('utf8'));
  } catch {
    return [null, 'not JSON'];
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return [null, 'not a JSON object'];
  if (typeof body.eventId !== 'string' || body.eventId === '') return [null, 'no eventId'];
  const eventType = body.eventType ?? msg.fields.routingKey;
  if (!actions[eventType] || typeof body.orderId !== 'string' || !Number.isInteger(body.sequence)) {
    return [null, 'not an order event (eventType, orderId, sequence)'];
  }
  return [{ ...body, eventType }, null];
}

// reserve writes the effect of one event.
function reserve(db, event) {
  return db.query('INSERT INTO stock_reservations (event_id, order_id, sequence, action, items) VALUES ($1, $2, $3, $4, $5)', [
    event.eventId,
    event.orderId,
    event.sequence,
    actions[event.eventType],
    event.items ? JSON.stringify(event.items) : null,
  ]);
}

// apply is the consumer's transaction; true if the effect was applied,
// false if the inbox already had the eventId.
function apply(event) {
  return withTransaction(pool, async (db) => {
    if (variant !== 'no-inbox') {
      const inbox = await db.query('INSERT INTO inbox (consumer, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', [
        config.consumerName,
        event.eventId,
      ]);
      if (inbox.rowCount === 0) return false;
    }
    await reserve(db, event);
    return true;
  });
}

// store is the transaction of a consumer that applies later: the event in
// its inbox row; true if it was new, false if the inbox already had it.
function store(event) {
  return withTransaction(pool, async (db) => {
    const inbox = await db.query('INSERT INTO inbox (consumer, event_id, event) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [
      config.consumerName,
      event.eventId,
      JSON.stringify(event),
    ]);
    return inbox.rowCount > 0;
  });
}

// applyDue is one round of the poller: the inbox rows due and not applied,
// locked (SKIP LOCKED: another poller takes others), each applied with the
// write that marks it applied, in one transaction. A row whose effect
// fails is rolled back to its savepoint and given its next attempt. It
// returns how many rows it took; the reserved lines follow the commit.
async function applyDue() {
  const done = [];
  const taken = await withTransaction(pool, async (db) => {
    const { rows } = await db.query(
      `SELECT event_id, event, attempts FROM inbox
       WHERE consumer = $1 AND applied_at IS NULL AND next_attempt_at <= clock_timestamp()
       ORDER BY received_at, event_id LIMIT $2 FOR UPDATE SKIP LOCKED`,
      [config.consumerName, config.applyBatch],
    );
    for (const row of rows) {
      const event = row.event;
      await db.query('SAVEPOINT apply_one');
      try {
        await reserve(db, event);
        await db.query('UPDATE inbox SET applied_at = clock_timestamp() WHERE consumer = $1 AND event_id = $2', [config.consumerName, row.event_id]);
        await db.query('RELEASE SAVEPOINT apply_one');
        done.push({ eventId: event.eventId, aggregateId: event.orderId, sequence: event.sequence });
      } catch (err) {
        await db.query('ROLLBACK TO SAVEPOINT apply_one');
        const wait = backoff(row.attempts + 1, config.applyEvery, config.applyRetryMax);
        await db.query(
          `UPDATE inbox SET attempts = attempts + 1, last_error = $3,
             next_attempt_at = clock_timestamp() + $4 * interval '1 millisecond'
           WHERE consumer = $1 AND event_id = $2`,
          [config.consumerName, row.event_id, String(err.message ?? err), wait],
        );
        log.error(err, `apply of ${row.event_id}: tried again in ${wait}ms`);
      }
    }
    return rows.length;
  });
  for (const fields of done) log.log('reserved', fields);
  return taken;
}

// applyLoop runs the poller until the consumer stops: a full batch is
// followed at once by the next, anything less by a wait of --apply-every.
let wakePoller = () => {};
async function applyLoop() {
  let failures = 0;
  while (!stopping) {
    let taken = 0;
    try {
      taken = await applyDue();
      failures = 0;
    } catch (err) {
      failures++;
      log.error(err, 'inbox poller');
    }
    if (stopping || taken === config.applyBatch) continue;
    const wait = failures > 0 ? backoff(failures, 100, config.applyRetryMax) : config.applyEvery;
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, wait);
      wakePoller = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

// settle acks or nacks on the channel the message came on; if that channel
// is gone the broker redelivers the message anyway.
function settle(ch, msg, how, fields) {
  try {
    if (how === 'ack') ch.ack(msg);
    // A poison message is rejected alone: with multiple set (the variant)
    // the nack takes every earlier unacked delivery of the channel with it.
    else ch.nack(msg, how === 'dead-letter' && variant === 'dead-letter-multiple', how === 'requeue');
    if (how === 'ack') log.log('acked', fields);
  } catch (err) {
    log.error(err, `${how} of ${fields.eventId ?? msg.properties.messageId}: channel gone, the broker redelivers`);
  }
}

async function handle(ch, msg) {
  const [event, poison] = parseEvent(msg);
  if (!event) {
    settle(ch, msg, 'dead-letter', {});
    log.log('dead-lettered', { error: poison, detail: `messageId ${msg.properties.messageId ?? '-'}, routing key ${msg.fields.routingKey}` });
    return;
  }
  const fields = { eventId: event.eventId, aggregateId: event.orderId, sequence: event.sequence };
  log.log('delivered', { ...fields, redelivered: msg.fields.redelivered });
  if (variant === 'ack-before-commit') settle(ch, msg, 'ack', fields);

  let applied;
  try {
    applied = config.apply === 'later' ? await store(event) : await apply(event);
    dbFailures = 0;
  } catch (err) {
    dbFailures++;
    log.error(err, `transaction of ${event.eventId}`);
    if (variant === 'ack-before-commit') return; // acked already: the effect is lost
    await sleep(backoff(dbFailures, 100, config.reconnectMax));
    settle(ch, msg, 'requeue', fields);
    return;
  }
  // applying later: the poller logs reserved once it has applied it
  if (!applied) log.log('duplicate', fields);
  else if (config.apply === 'now') log.log('reserved', fields);
  await points.hit('inventory:committed');
  if (variant !== 'ack-before-commit') settle(ch, msg, 'ack', fields);
}

function onMessage(ch, msg) {
  if (msg === null) {
    // The broker cancelled our consumer (the queue went away): start over.
    log.log('disconnected', { error: 'consumer cancelled by the broker' });
    drop(link?.conn);
    return;
  }
  const job = handle(ch, msg).catch((err) => log.error(err, 'handler'));
  inFlight.add(job);
  job.finally(() => inFlight.delete(job));
}

async function run() {
  while (!stopping) {
    let lost;
    const gone = new Promise((resolve) => {
      lost = resolve;
    });
    link = await connect(brokers, {
      log,
      reconnectMaxMs: config.reconnectMax,
      heartbeatMs: config.amqpHeartbeat,
      stopping: () => stopping,
      onLost: () => {
        link = null;
        lost();
      },
      setup: async (ch) => {
        await declareConsumer(ch);
        await ch.prefetch(config.prefetch);
        ({ consumerTag } = await ch.consume(QUEUE, (msg) => onMessage(ch, msg), { noAck: false }));
      },
    });
    if (!link) return;
    await gone;
  }
}

await serveControl(config.controlAddr, { points, healthy: async () => link !== null && (await ping(pool)) });
log.log('started', { detail: `inventory consumer, prefetch ${config.prefetch}, apply ${config.apply}, variant ${variant}` });

const done = run();
const poller = config.apply === 'later' ? applyLoop() : Promise.resolve();
async function shutdown() {
  stopping = true;
  setTimeout(() => process.exit(0), 2500).unref();
  const current = link;
  if (current && consumerTag) await current.ch.cancel(consumerTag).catch(() => {});
  wakePoller();
  await Promise.allSettled([...inFlight, poller]);
  drop(current?.conn);
  await done.catch(() => {});
  await pool.end().catch(() => {});
  process.exit(0);
}
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
