// The relay's SQL over the outbox table: the article's claim (a short
// transaction, FOR UPDATE SKIP LOCKED, a lease, a claim id unique per
// claim) and the status writes, each conditional on the claim still
// holding the row: status = 'Processing' AND locked_by = the claim id.
import { withTransaction } from './db.js';

const claimSQL = `
WITH candidates AS (
  SELECT event_id
  FROM outbox
  WHERE (status = 'Pending' AND next_attempt_at <= CURRENT_TIMESTAMP)
     OR (status = 'Processing' AND locked_until < CURRENT_TIMESTAMP)
  ORDER BY occurred_at, event_id
  FOR UPDATE SKIP LOCKED
  LIMIT $2
)
UPDATE outbox AS o
SET status = 'Processing',
    locked_by = $1,
    locked_until = CURRENT_TIMESTAMP + $3 * INTERVAL '1 millisecond'
FROM candidates
WHERE o.event_id = candidates.event_id
RETURNING o.event_id, o.aggregate_id, o.sequence, o.event_type, o.payload::text AS payload, o.attempt_count`;

const leaseRunOut = `(status = 'Processing' AND locked_until < CURRENT_TIMESTAMP)`;

// claim takes up to limit due rows (Pending and due, or Processing with an
// expired lease) for claimId, for leaseMs. ignoreLease takes Processing
// rows whatever their lease: the lease-ignored variant.
export async function claim(pool, claimId, limit, leaseMs, { ignoreLease = false } = {}) {
  const sql = ignoreLease ? claimSQL.replace(leaseRunOut, `status = 'Processing'`) : claimSQL;
  const { rows } = await withTransaction(pool, (db) => db.query(sql, [claimId, limit, leaseMs]));
  return rows.map((r) => ({
    eventId: r.event_id,
    aggregateId: r.aggregate_id,
    sequence: r.sequence,
    eventType: r.event_type,
    payload: r.payload,
    attempt: r.attempt_count + 1, // the attempt this claim starts
  }));
}

const fenced = `AND status = 'Processing' AND locked_by = $2`;

const markSQL = `
UPDATE outbox
SET status = 'Published',
    published_at = CURRENT_TIMESTAMP,
    locked_by = NULL,
    locked_until = NULL
WHERE event_id = ANY($1)
  ${fenced}
RETURNING event_id`;

// markPublished marks the rows Published and returns the set it changed;
// a row missing from it was fenced (its claim had expired and been taken).
// unfenced drops the claim-id condition: the unfenced-published variant.
export async function markPublished(pool, claimId, eventIds, { unfenced = false } = {}) {
  const sql = unfenced ? markSQL.replace(fenced, 'AND $2::text IS NOT NULL') : markSQL;
  const { rows } = await pool.query(sql, [eventIds, claimId]);
  return new Set(rows.map((r) => r.event_id));
}

const retrySQL = `
UPDATE outbox AS o
SET attempt_count = o.attempt_count + 1,
    last_error = u.error,
    status = CASE WHEN o.attempt_count + 1 >= $3 THEN 'Failed' ELSE 'Pending' END,
    next_attempt_at = CURRENT_TIMESTAMP + u.delay_ms * INTERVAL '1 millisecond',
    locked_by = NULL,
    locked_until = NULL
FROM unnest($1::text[], $4::text[], $5::bigint[]) AS u(event_id, error, delay_ms)
WHERE o.event_id = u.event_id
  AND o.status = 'Processing' AND o.locked_by = $2
RETURNING o.event_id, o.status, o.attempt_count`;

// scheduleRetries records failed attempts [{eventId, error, delayMs}]: one
// more attempt, the error, the next attempt after the delay, or Failed once
// the budget is spent. Returns eventId → {status, attempt} of the rows it
// changed; a row missing from it was fenced.
export async function scheduleRetries(pool, claimId, budget, retries) {
  const { rows } = await pool.query(retrySQL, [
    retries.map((r) => r.eventId),
    claimId,
    budget,
    retries.map((r) => r.error),
    retries.map((r) => r.delayMs),
  ]);
  return new Map(rows.map((r) => [r.event_id, { status: r.status, attempt: r.attempt_count }]));
}
