package inventory

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"faultline/system/message"
)

// SQL of the consumer. Every value is a parameter.
const (
	sqlInboxInsert = `INSERT INTO inbox_messages (consumer_name, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`

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
	sqlVersionSet = `UPDATE aggregate_versions SET last_sequence = $3 WHERE consumer_name = $1 AND aggregate_id = $2`

	sqlReserve = `INSERT INTO inventory_reservations (event_id, event_type, order_id, aggregate_id, sequence, amount, currency)
VALUES ($1, $2, $3, $4, $5, $6, $7)`

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
// an earlier item of this batch) is a duplicate. One round trip.
func (s *store) recordInbox(ctx context.Context, q pgx.Tx, items []*item) error {
	// In eventId order, so two consumers inserting overlapping eventIds
	// wait for each other in the same order and cannot deadlock. The sort
	// is stable: of two deliveries of one eventId, the first is fresh.
	items = slices.Clone(items)
	slices.SortStableFunc(items, func(a, b *item) int { return cmp.Compare(a.ev.EventID, b.ev.EventID) })
	b := &pgx.Batch{}
	for _, it := range items {
		b.Queue(sqlInboxInsert, s.consumer, it.ev.EventID)
	}
	res := q.SendBatch(ctx, b)
	for _, it := range items {
		tag, err := res.Exec()
		if err != nil {
			_ = res.Close()
			return fmt.Errorf("inbox insert %s: %w", it.ev.EventID, err)
		}
		it.fresh = tag.RowsAffected() == 1
		if !it.fresh {
			it.outcome = outcomeDuplicate
		}
	}
	if err := res.Close(); err != nil {
		return fmt.Errorf("inbox insert: %w", err)
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

// write sends every write of e in one round trip. A held-back item whose
// sequence another event already holds in parked_events gets a note.
func (s *store) write(ctx context.Context, tx pgx.Tx, e *effects) error {
	b := &pgx.Batch{}
	for _, ev := range e.reserve {
		b.Queue(sqlReserve, ev.EventID, ev.EventType, ev.OrderID, ev.AggregateID, ev.Sequence, string(ev.Amount), ev.Currency)
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
	for _, v := range e.versions {
		b.Queue(sqlVersionSet, s.consumer, v.aggregateID, v.last)
	}
	if b.Len() == 0 {
		return nil
	}
	res := tx.SendBatch(ctx, b)
	defer res.Close()
	for _, ev := range e.reserve {
		if _, err := res.Exec(); err != nil {
			return fmt.Errorf("reserve %s: %w", ev.EventID, err)
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
	for _, v := range e.versions {
		if _, err := res.Exec(); err != nil {
			return fmt.Errorf("set version of aggregate %s to %d: %w", v.aggregateID, v.last, err)
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
