package relay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Row is one claimed outbox row.
type Row struct {
	EventID      string
	AggregateID  string
	Sequence     int64
	EventType    string
	Payload      []byte
	AttemptCount int
}

// store is the relay's SQL against outbox_messages. Every status write is
// conditional on status = 'Processing' AND locked_by = the claim id, so a
// claim that lost its rows cannot overwrite the claim that took them.
type store struct {
	db *pgxpool.Pool
	// unfenced drops the claim-id condition from status writes (the
	// no-fencing variant); noExpiry never reclaims an expired lease (no-lease).
	unfenced bool
	noExpiry bool
	// ignoreLease claims Processing rows whatever their lease
	// (lease-ignored).
	ignoreLease bool
	// unfencedRetry drops it from the retry and Failed write only
	// (unfenced-retry), unfencedRenewal from the lease renewal only
	// (unfenced-renewal).
	unfencedRetry   bool
	unfencedRenewal bool
	// byID reads rows past the last id seen instead of claiming them
	// (reads-by-id); nil for the correct relay.
	byID *cursor
}

// cursor is the reads-by-id relay's position: the last outbox id it read.
// Only the relay's loop reads and moves it.
type cursor struct{ lastID int64 }

// fence is the condition every status write carries.
const fence = "AND status = 'Processing' AND locked_by = $2"

// unfencedCondition keeps the parameter list but not the guard.
const unfencedCondition = "AND $2::text IS NOT NULL"

// sql is q as this store sends it, without the guards its variant drops.
func (s store) sql(q string) string {
	if s.unfenced || (s.unfencedRetry && q == retrySQL) || (s.unfencedRenewal && q == renewSQL) {
		q = unfence(q)
	}
	if s.noExpiry {
		q = strings.ReplaceAll(q, "\n     OR (status = 'Processing' AND locked_until < CURRENT_TIMESTAMP)", "")
	}
	if s.ignoreLease {
		q = strings.ReplaceAll(q, "(status = 'Processing' AND locked_until < CURRENT_TIMESTAMP)", "status = 'Processing'")
	}
	return q
}

// unfence removes the claim-id condition from a status write.
func unfence(q string) string {
	q = strings.ReplaceAll(q, fence, unfencedCondition)
	return strings.ReplaceAll(q, "AND outbox.status = 'Processing'\n  AND outbox.locked_by = $2", unfencedCondition)
}

// claimSQL is the article's claim: SKIP LOCKED, a lease, a claim id. It is
// one statement, so PostgreSQL runs it as its own short transaction: the
// rows are locked, leased and committed together, with no round trip
// between the claim and its commit for the lease to run out in. The lease
// starts at clock_timestamp(), when the rows are taken, not at the
// statement's start: a claim that waited (for a lock, for a slow link)
// still gets its whole lease. It is read once per statement (an
// uncorrelated sub-select, which PostgreSQL evaluates once), so every row
// of a claim has the same lease: clock_timestamp() per row gave the rows
// of one claim leases microseconds apart, and a takeover at the boundary
// took only some of them.
const claimSQL = `
WITH candidates AS (
  SELECT event_id
  FROM outbox_messages
  WHERE (status = 'Pending' AND next_attempt_at <= CURRENT_TIMESTAMP)
     OR (status = 'Processing' AND locked_until < CURRENT_TIMESTAMP)
  ORDER BY occurred_at, event_id
  FOR UPDATE SKIP LOCKED
  LIMIT $2
)
UPDATE outbox_messages AS outbox
SET status = 'Processing',
    locked_by = $1,
    locked_until = (SELECT clock_timestamp()) + $3 * INTERVAL '1 millisecond'
FROM candidates
WHERE outbox.event_id = candidates.event_id
RETURNING outbox.event_id, outbox.aggregate_id, outbox.sequence, outbox.event_type, outbox.payload, outbox.attempt_count`

// readByIDSQL is how a relay that reads the outbox by position takes its
// next rows (reads-by-id): past the last id it saw, in id order, without a
// claim. The id is drawn at the INSERT, the row is visible at its COMMIT:
// a row whose transaction commits after a later row's was not there when
// the position moved past it, and no read comes back for it.
const readByIDSQL = `
SELECT id, event_id, aggregate_id, sequence, event_type, payload, attempt_count
FROM outbox_messages
WHERE id > $1 AND status = 'Pending'
ORDER BY id
LIMIT $2`

// readByID reads up to limit rows past the cursor and moves it to the last.
func (s store) readByID(ctx context.Context, limit int) ([]Row, error) {
	rows, err := s.db.Query(ctx, readByIDSQL, s.byID.lastID, limit)
	if err != nil {
		return nil, fmt.Errorf("read by id: %w", err)
	}
	defer rows.Close()
	var out []Row
	last := s.byID.lastID
	for rows.Next() {
		var r Row
		if err := rows.Scan(&last, &r.EventID, &r.AggregateID, &r.Sequence, &r.EventType, &r.Payload, &r.AttemptCount); err != nil {
			return nil, fmt.Errorf("read by id: scan: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read by id: %w", err)
	}
	s.byID.lastID = last
	return out, nil
}

// claim takes up to limit due rows for claimID (reads-by-id: reads them).
func (s store) claim(ctx context.Context, claimID string, limit int, lease time.Duration) ([]Row, error) {
	if s.byID != nil {
		return s.readByID(ctx, limit)
	}
	rows, err := s.db.Query(ctx, s.sql(claimSQL), claimID, limit, lease.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("claim batch: %w", err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.EventID, &r.AggregateID, &r.Sequence, &r.EventType, &r.Payload, &r.AttemptCount); err != nil {
			return nil, fmt.Errorf("claim batch: scan: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim batch: %w", err)
	}
	return out, nil
}

// markPublishedSQL completes a claim: only rows still held by it change.
const markPublishedSQL = `
UPDATE outbox_messages
SET status = 'Published',
    published_at = CURRENT_TIMESTAMP,
    locked_by = NULL,
    locked_until = NULL
WHERE event_id = ANY($1)
  AND status = 'Processing' AND locked_by = $2
RETURNING event_id`

// markPublished marks ids Published and returns those it changed; the rest
// were fenced (the claim no longer held them).
func (s store) markPublished(ctx context.Context, claimID string, ids []string) (map[string]bool, error) {
	return s.returningIDs(ctx, "mark published", markPublishedSQL, ids, claimID)
}

// retry is one row's failed attempt.
type retry struct {
	EventID string
	Err     string
	Delay   time.Duration
}

// retrySQL records a failed attempt under the claim: attempt_count + 1,
// last_error, next_attempt_at by backoff, or Failed past the budget.
const retrySQL = `
UPDATE outbox_messages AS outbox
SET attempt_count = outbox.attempt_count + 1,
    last_error = u.err,
    status = CASE WHEN outbox.attempt_count + 1 >= $3 THEN 'Failed' ELSE 'Pending' END,
    next_attempt_at = CURRENT_TIMESTAMP + u.delay_ms * INTERVAL '1 millisecond',
    locked_by = NULL,
    locked_until = NULL
FROM unnest($1::text[], $4::text[], $5::bigint[]) AS u(event_id, err, delay_ms)
WHERE outbox.event_id = u.event_id
  AND outbox.status = 'Processing'
  AND outbox.locked_by = $2
RETURNING outbox.event_id, outbox.status = 'Failed', outbox.attempt_count`

// retryOutcome is what a retry write did to one row.
type retryOutcome struct {
	Failed  bool // past the budget: the row is Failed, not due again
	Attempt int
}

// scheduleRetries writes the failed attempts and returns, per changed row,
// whether it ended Failed; rows missing from the result were fenced.
func (s store) scheduleRetries(ctx context.Context, claimID string, budget int, rs []retry) (map[string]retryOutcome, error) {
	ids := make([]string, len(rs))
	errs := make([]string, len(rs))
	delays := make([]int64, len(rs))
	for i, r := range rs {
		ids[i], errs[i], delays[i] = r.EventID, r.Err, r.Delay.Milliseconds()
	}
	rows, err := s.db.Query(ctx, s.sql(retrySQL), ids, claimID, budget, errs, delays)
	if err != nil {
		return nil, fmt.Errorf("schedule retries: %w", err)
	}
	defer rows.Close()
	out := map[string]retryOutcome{}
	for rows.Next() {
		var id string
		var o retryOutcome
		if err := rows.Scan(&id, &o.Failed, &o.Attempt); err != nil {
			return nil, fmt.Errorf("schedule retries: scan: %w", err)
		}
		out[id] = o
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("schedule retries: %w", err)
	}
	return out, nil
}

// renewSQL extends the lease of rows the claim still holds, from when the
// rows are updated, the same for every row (as the claim's).
const renewSQL = `
UPDATE outbox_messages
SET locked_until = (SELECT clock_timestamp()) + $3 * INTERVAL '1 millisecond'
WHERE event_id = ANY($1)
  AND status = 'Processing' AND locked_by = $2
RETURNING event_id`

// renew extends the lease and returns the rows still held.
func (s store) renew(ctx context.Context, claimID string, ids []string, lease time.Duration) (map[string]bool, error) {
	return s.returningIDs(ctx, "renew lease", renewSQL, ids, claimID, lease.Milliseconds())
}

func (s store) returningIDs(ctx context.Context, what, sql string, ids []string, args ...any) (map[string]bool, error) {
	rows, err := s.db.Query(ctx, s.sql(sql), append([]any{ids}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	out := make(map[string]bool, len(ids))
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("%s: scan: %w", what, err)
		}
		out[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
