package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/system/message"
)

// SQL of the consumer. Every value is a parameter.
const (
	// The inbox rows of a batch, in eventId order: two consumers inserting
	// overlapping eventIds wait for each other in the same order and cannot
	// deadlock. A second delivery of an eventId in the same batch conflicts
	// with the first one's row and inserts nothing.
	sqlInboxInsert = `INSERT INTO inbox_messages (consumer_name, event_id)
SELECT $1, e FROM unnest($2::varchar[]) AS e ORDER BY e
ON CONFLICT DO NOTHING
RETURNING event_id`

	// The versions of a batch's aggregates are created if missing, then
	// locked, in aggregate order (two consumers lock in the same order, so
	// they cannot deadlock). With READ COMMITTED, a concurrent transaction
	// creating the same row makes the INSERT wait for it, and the SELECT then
	// sees and locks the committed row. (A plain SELECT ... FOR UPDATE of a
	// missing row locks nothing: two consumers could both read "0".)
	sqlVersionsEnsure = `INSERT INTO aggregate_versions (consumer_name, aggregate_id, last_sequence)
SELECT $1, a, 0 FROM unnest($2::varchar[]) AS a ORDER BY a
ON CONFLICT (consumer_name, aggregate_id) DO NOTHING`
	sqlVersionsLock = `SELECT aggregate_id, last_sequence FROM aggregate_versions
WHERE consumer_name = $1 AND aggregate_id = ANY($2::varchar[]) ORDER BY aggregate_id FOR UPDATE`
	// The parked events ahead of each locked aggregate's version.
	sqlParkedAhead = `SELECT p.aggregate_id, p.sequence, p.payload FROM parked_events p
JOIN aggregate_versions v ON v.consumer_name = p.consumer_name AND v.aggregate_id = p.aggregate_id
WHERE p.consumer_name = $1 AND p.aggregate_id = ANY($2::varchar[]) AND p.sequence > v.last_sequence`
	sqlVersionSet = `UPDATE aggregate_versions AS v SET last_sequence = u.last
FROM unnest($2::varchar[], $3::bigint[]) AS u(aggregate_id, last)
WHERE v.consumer_name = $1 AND v.aggregate_id = u.aggregate_id`

	// The reservations of a batch, in application order (reservation_id
	// follows the order of the arrays).
	sqlReserve = `INSERT INTO inventory_reservations (event_id, event_type, order_id, aggregate_id, sequence, amount, currency)
SELECT e, t, o, a, q, m::numeric, c
FROM unnest($1::varchar[], $2::varchar[], $3::varchar[], $4::varchar[], $5::bigint[], $6::text[], $7::text[])
  WITH ORDINALITY AS u(e, t, o, a, q, m, c, n)
ORDER BY n`

	sqlPark = `INSERT INTO parked_events (consumer_name, aggregate_id, sequence, event_id, payload)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`
	sqlUnpark = `DELETE FROM parked_events WHERE consumer_name = $1 AND aggregate_id = $2 AND sequence = $3`

	sqlInboxCleanup = `DELETE FROM inbox_messages WHERE consumer_name = $1 AND received_at < now() - $2::interval`
)

// store runs the consumer's statements for one consumer name.
type store struct {
	pool     *pgxpool.Pool
	consumer string
}

// recordInbox claims each item's eventId in tx: an item whose row was
// inserted is fresh, one whose row already existed (an earlier delivery, or
// an earlier item of this batch) is a duplicate. One statement for the
// whole batch.
func (s *store) recordInbox(ctx context.Context, q pgx.Tx, items []*item) error {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ev.EventID
	}
	rows, err := q.Query(ctx, sqlInboxInsert, s.consumer, ids)
	if err != nil {
		return fmt.Errorf("inbox insert: %w", err)
	}
	inserted := make(map[string]bool, len(items))
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("inbox insert: %w", err)
		}
		inserted[id] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("inbox insert: %w", err)
	}
	// Of two deliveries of one eventId in the batch, the first is fresh.
	for _, it := range items {
		it.fresh = inserted[it.ev.EventID]
		delete(inserted, it.ev.EventID)
		if !it.fresh {
			it.outcome = outcomeDuplicate
		}
	}
	return nil
}

// aggregate is one locked aggregate: its applied version and the events
// parked ahead of it.
type aggregate struct {
	last    int64
	parked  map[int64]parked
	changed bool // last moved in this transaction
}

// parked is an event waiting for its predecessor: a row of parked_events,
// or an item of this transaction held back (it != nil).
type parked struct {
	ev message.Event
	it *item
}

// lockAggregates creates if missing and locks the version rows of ids
// (sorted), and reads the events parked ahead of them. One round trip.
func (s *store) lockAggregates(ctx context.Context, tx pgx.Tx, ids []string) (map[string]*aggregate, error) {
	b := &pgx.Batch{}
	b.Queue(sqlVersionsEnsure, s.consumer, ids)
	b.Queue(sqlVersionsLock, s.consumer, ids)
	b.Queue(sqlParkedAhead, s.consumer, ids)
	res := tx.SendBatch(ctx, b)
	defer res.Close()
	if _, err := res.Exec(); err != nil {
		return nil, fmt.Errorf("create aggregate versions: %w", err)
	}
	aggs := make(map[string]*aggregate, len(ids))
	rows, err := res.Query()
	if err != nil {
		return nil, fmt.Errorf("lock aggregate versions: %w", err)
	}
	for rows.Next() {
		var id string
		a := &aggregate{parked: map[int64]parked{}}
		if err := rows.Scan(&id, &a.last); err != nil {
			rows.Close()
			return nil, fmt.Errorf("lock aggregate versions: %w", err)
		}
		aggs[id] = a
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock aggregate versions: %w", err)
	}
	rows, err = res.Query()
	if err != nil {
		return nil, fmt.Errorf("read parked events: %w", err)
	}
	for rows.Next() {
		var id string
		var seq int64
		var payload []byte
		if err := rows.Scan(&id, &seq, &payload); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read parked events: %w", err)
		}
		ev, err := message.Parse(payload)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("parked event of aggregate %s sequence %d: %w", id, seq, err)
		}
		if a := aggs[id]; a != nil {
			a.parked[seq] = parked{ev: ev}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read parked events: %w", err)
	}
	for _, id := range ids {
		if aggs[id] == nil {
			return nil, fmt.Errorf("aggregate %s: version row missing after insert", id)
		}
	}
	return aggs, res.Close()
}

// effects is what one transaction writes for its fresh items, in order.
type effects struct {
	reserve  []message.Event // reservations, in application order
	unpark   []message.Event // parked events applied now
	park     []*item         // items held back
	versions []versionSet
}

type versionSet struct {
	aggregateID string
	last        int64
}

// write sends every write of e in one round trip: one statement for all
// reservations, one for all versions, one per parked or unparked event
// (rare: only events that arrive ahead of their predecessor). A held-back
// item whose sequence another event already holds in parked_events gets a
// note.
func (s *store) write(ctx context.Context, tx pgx.Tx, e *effects) error {
	b := &pgx.Batch{}
	if n := len(e.reserve); n > 0 {
		ids, types, orders, aggs, seqs, amounts, currencies := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n), make([]string, n), make([]string, n)
		for i, ev := range e.reserve {
			ids[i], types[i], orders[i], aggs[i], seqs[i], amounts[i], currencies[i] = ev.EventID, ev.EventType, ev.OrderID, ev.AggregateID, ev.Sequence, string(ev.Amount), ev.Currency
		}
		b.Queue(sqlReserve, ids, types, orders, aggs, seqs, amounts, currencies)
	}
	for _, ev := range e.unpark {
		b.Queue(sqlUnpark, s.consumer, ev.AggregateID, ev.Sequence)
	}
	for _, it := range e.park {
		payload, err := json.Marshal(it.ev)
		if err != nil {
			return fmt.Errorf("park %s: %w", it.ev.EventID, err)
		}
		b.Queue(sqlPark, s.consumer, it.ev.AggregateID, it.ev.Sequence, it.ev.EventID, payload)
	}
	if n := len(e.versions); n > 0 {
		aggs, lasts := make([]string, n), make([]int64, n)
		for i, v := range e.versions {
			aggs[i], lasts[i] = v.aggregateID, v.last
		}
		b.Queue(sqlVersionSet, s.consumer, aggs, lasts)
	}
	if b.Len() == 0 {
		return nil
	}
	res := tx.SendBatch(ctx, b)
	defer res.Close()
	if len(e.reserve) > 0 {
		if _, err := res.Exec(); err != nil {
			return fmt.Errorf("reserve %d events: %w", len(e.reserve), err)
		}
	}
	for _, ev := range e.unpark {
		if _, err := res.Exec(); err != nil {
			return fmt.Errorf("unpark %s: %w", ev.EventID, err)
		}
	}
	for _, it := range e.park {
		tag, err := res.Exec()
		if err != nil {
			return fmt.Errorf("park %s: %w", it.ev.EventID, err)
		}
		if tag.RowsAffected() == 0 {
			it.note = fmt.Sprintf("sequence %d already parked by another event; %s", it.ev.Sequence, it.note)
		}
	}
	if len(e.versions) > 0 {
		if _, err := res.Exec(); err != nil {
			return fmt.Errorf("set versions of %d aggregates: %w", len(e.versions), err)
		}
	}
	return res.Close()
}

// cleanupInbox deletes this consumer's inbox rows older than olderThan.
func (s *store) cleanupInbox(ctx context.Context, olderThan time.Duration) (int64, error) {
	tag, err := s.pool.Exec(ctx, sqlInboxCleanup, s.consumer, olderThan)
	if err != nil {
		return 0, fmt.Errorf("inbox cleanup: %w", err)
	}
	return tag.RowsAffected(), nil
}

// permanent reports whether a transaction failed because of the data of one
// of its events (a value PostgreSQL rejects), so retrying the same batch can
// never succeed. Everything else (connection loss, serialization failure,
// deadlock, shutdown) is worth retrying.
func permanent(err error) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return false
	}
	switch pg.Code[:2] {
	case "22", // data exception: value too long, numeric overflow, bad encoding
		"23": // integrity constraint violation
		return true
	}
	return false
}

// connectionError reports whether err means the database is unreachable
// (as opposed to a statement failing on a live connection).
func connectionError(err error) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return !errors.Is(err, context.Canceled)
	}
	switch pg.Code[:2] {
	case "08", // connection exception
		"57": // operator intervention: admin shutdown, cannot connect now
		return true
	}
	return false
}
