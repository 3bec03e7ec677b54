// The order service (the producer): an HTTP API that writes an order and
// its event into the outbox in ONE transaction. Publishing is the relay's
// job (relay.js), so a crash right after the commit loses nothing.
//
//   POST /orders             {customerId, amount, currency, items} → 201 {orderId, eventId}
//   POST /orders/:id/pay     → 201 {orderId, eventId, sequence}; 409 unless Created
//   POST /orders/:id/cancel  → 201 {orderId, eventId, sequence}; 409 if already Cancelled
//   GET  /orders/:id         → 200 the order
//   GET  /healthz, GET/PUT/DELETE /crashpoints[/{name}] (the faultline protocol)
import { fatal, loadConfig } from './lib/config.js';
import { send, readBody, serveControl } from './lib/control.js';
import { crashPoints } from './lib/crashpoints.js';
import { openPool, ping, withTransaction } from './lib/db.js';
import { openEventLog } from './lib/eventlog.js';
import { uuidv7 } from './lib/ids.js';
import { variantFor } from './lib/variant.js';
import { directPublisher } from './lib/direct-publish.js';
import { brokerUrls } from './lib/nodes.js';

let config, variant, brokers;
try {
  config = loadConfig({
    instance: 'order',
    'db-url': '',
    'amqp-url': '',
    'amqp-urls': '',
    'amqp-heartbeat': { duration: '2s' },
    listen: '127.0.0.1:8080',
    'event-log': '',
  });
  variant = variantFor('order');
  if (!config.dbUrl) throw new Error('--db-url (or DB_URL) is required');
  // --amqp-urls (a cluster's nodes, the preferred first) replaces --amqp-url;
  // only the publish-after-commit variant talks to the broker.
  brokers = config.amqpUrls || config.amqpUrl ? brokerUrls(config.amqpUrls, config.amqpUrl) : [];
} catch (err) {
  fatal(err);
}

const log = openEventLog(config.eventLog, config.instance);
const points = crashPoints(log, ['order:committed']);
try {
  points.armFromEnv();
} catch (err) {
  fatal(err);
}
const pool = openPool(config.dbUrl, log, { max: 8 });

// The publish-after-commit variant has no outbox: it publishes the event
// itself once the order is committed — and loses it when it dies between.
const direct = variant === 'publish-after-commit' ? await directPublisher(brokers, log, { heartbeatMs: config.amqpHeartbeat }) : null;

function newEvent(eventType, orderId, sequence, data = {}) {
  const eventId = uuidv7();
  const occurredAt = new Date().toISOString();
  return { eventId, eventType, occurredAt, orderId, sequence, ...data };
}

// The outbox row of an event: the article's columns; status Pending, due now.
async function insertOutbox(db, event) {
  await db.query(
    `INSERT INTO outbox (event_id, aggregate_id, sequence, event_type, payload, occurred_at)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [event.eventId, event.orderId, event.sequence, event.eventType, JSON.stringify(event), event.occurredAt],
  );
}

// afterCommit: the transaction is committed; the event is in the outbox
// (or, in the variant, about to be published by hand).
async function afterCommit(event) {
  log.log('committed', { eventId: event.eventId, aggregateId: event.orderId, sequence: event.sequence });
  await points.hit('order:committed');
  if (direct) await direct.publish(event);
}

function validOrder(body) {
  const problems = [];
  if (typeof body?.customerId !== 'string' || body.customerId === '') problems.push('customerId: a non-empty string');
  if (typeof body?.amount !== 'number' || !(body.amount >= 0)) problems.push('amount: a number >= 0');
  if (typeof body?.currency !== 'string' || !/^[A-Z]{3}$/.test(body.currency)) problems.push('currency: three capital letters');
  const itemsOk =
    Array.isArray(body?.items) &&
    body.items.length > 0 &&
    body.items.every((i) => typeof i?.sku === 'string' && Number.isInteger(i?.quantity) && i.quantity > 0);
  if (!itemsOk) problems.push('items: a non-empty list of {sku, quantity}');
  return problems;
}

async function placeOrder(body) {
  const orderId = `ORD-${uuidv7()}`;
  const { customerId, amount, currency, items } = body;
  const event = newEvent('order.created', orderId, 1, { customerId, amount, currency, items });
  await withTransaction(pool, async (db) => {
    await db.query(
      `INSERT INTO orders (order_id, customer_id, amount, currency, items, status, version)
       VALUES ($1, $2, $3, $4, $5, 'Created', 1)`,
      [orderId, customerId, amount, currency, JSON.stringify(items)],
    );
    if (!direct) await insertOutbox(db, event);
  });
  await afterCommit(event);
  return { orderId, eventId: event.eventId };
}

const transitions = {
  pay: { from: ['Created'], to: 'Paid', eventType: 'order.paid' },
  cancel: { from: ['Created', 'Paid'], to: 'Cancelled', eventType: 'order.cancelled' },
};

// transition moves an order on and adds its next event (sequence = the new
// version) in one transaction. null: no such order; a string: the state
// that does not allow it.
async function transition(orderId, action) {
  const t = transitions[action];
  const event = await withTransaction(pool, async (db) => {
    const { rows } = await db.query(
      `UPDATE orders SET status = $2, version = version + 1, updated_at = now()
       WHERE order_id = $1 AND status = ANY($3) RETURNING version`,
      [orderId, t.to, t.from],
    );
    if (rows.length === 0) {
      const cur = await db.query('SELECT status FROM orders WHERE order_id = $1', [orderId]);
      return cur.rows[0]?.status ?? null;
    }
    const e = newEvent(t.eventType, orderId, rows[0].version);
    if (!direct) await insertOutbox(db, e);
    return e;
  });
  if (event === null || typeof event === 'string') return event;
  await afterCommit(event);
  return { orderId, eventId: event.eventId, sequence: event.sequence };
}

async function app(req, res, url) {
  if (req.method === 'POST' && url.pathname === '/orders') {
    let body;
    try {
      body = JSON.parse(await readBody(req));
    } catch {
      return send(res, 400, { error: 'body: want JSON' });
    }
    const problems = validOrder(body);
    if (problems.length > 0) return send(res, 400, { error: problems.join('; ') });
    return send(res, 201, await placeOrder(body));
  }
  const m = /^\/orders\/([^/]+)(?:\/(pay|cancel))?$/.exec(url.pathname);
  if (m && req.method === 'POST' && m[2]) {
    const orderId = decodeURIComponent(m[1]);
    const out = await transition(orderId, m[2]);
    if (out === null) return send(res, 404, { error: `no order ${orderId}` });
    if (typeof out === 'string') return send(res, 409, { error: `order ${orderId} is ${out}: cannot ${m[2]}` });
    return send(res, 201, out);
  }
  if (m && req.method === 'GET' && !m[2]) {
    const { rows } = await pool.query('SELECT * FROM orders WHERE order_id = $1', [decodeURIComponent(m[1])]);
    return rows.length ? send(res, 200, rows[0]) : send(res, 404, { error: 'no such order' });
  }
  return false;
}

const server = await serveControl(config.listen, { points, healthy: () => ping(pool), app });
log.log('started', { detail: `order service on ${config.listen}, variant ${variant}` });

async function shutdown() {
  server.close();
  server.closeAllConnections?.();
  await direct?.close();
  await pool.end().catch(() => {});
  process.exit(0);
}
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
