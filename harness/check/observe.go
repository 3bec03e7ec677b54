// Package check reads what a run left — the two databases, the broker and
// the merged event logs — waits for the pipeline to converge, and checks
// the invariants of DESIGN.md against it. Every result is data
// (result.Invariant, result.Counts), so reports can render it.
package check

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"faultline/system/topology"
)

// QueueInfo is what the broker says of a queue.
type QueueInfo struct {
	Messages, Ready, Unacked, Consumers int
}

// Sources are where the checker looks.
type Sources struct {
	OrdersDB    *pgxpool.Pool
	InventoryDB *pgxpool.Pool
	LogPaths    []string
	// Queue asks the broker about a queue of the scenario's vhost.
	Queue func(ctx context.Context, queue string) (QueueInfo, error)
}

// Order is a committed order and how many events it has (its version).
type Order struct {
	ID      string
	Version int64
	Status  string
}

// OutboxRow is one outbox row at the end of the run.
type OutboxRow struct {
	EventID     string
	AggregateID string
	Sequence    int64
	Status      string
	Published   bool
	Attempts    int
	LastError   string
}

// Reservation is one effect row.
type Reservation struct {
	ID          int64
	EventID     string
	AggregateID string
	Sequence    int64
	EventType   string
}

// Observation is everything the checker knows about a run's end state.
type Observation struct {
	Orders       map[string]Order
	Outbox       []OutboxRow
	Reservations []Reservation
	Parked       int
	Queue        QueueInfo
	DeadLetters  QueueInfo
	Log          []eventlog.Entry // merged, in time order
	ByEvent      map[string][]eventlog.Entry
}

// Observe loads the end state.
func Observe(ctx context.Context, src Sources) (*Observation, error) {
	o := &Observation{Orders: map[string]Order{}, ByEvent: map[string][]eventlog.Entry{}}
	rows, err := src.OrdersDB.Query(ctx, `SELECT order_id, version, status FROM orders`)
	if err != nil {
		return nil, fmt.Errorf("read orders: %w", err)
	}
	for rows.Next() {
		var ord Order
		if err := rows.Scan(&ord.ID, &ord.Version, &ord.Status); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read orders: %w", err)
		}
		o.Orders[ord.ID] = ord
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read orders: %w", err)
	}
	rows, err = src.OrdersDB.Query(ctx, `SELECT event_id, aggregate_id, sequence, status, published_at IS NOT NULL, attempt_count, coalesce(last_error, '') FROM outbox_messages ORDER BY occurred_at, event_id`)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	for rows.Next() {
		var r OutboxRow
		if err := rows.Scan(&r.EventID, &r.AggregateID, &r.Sequence, &r.Status, &r.Published, &r.Attempts, &r.LastError); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read outbox: %w", err)
		}
		o.Outbox = append(o.Outbox, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	rows, err = src.InventoryDB.Query(ctx, `SELECT reservation_id, event_id, aggregate_id, sequence, event_type FROM inventory_reservations ORDER BY reservation_id`)
	if err != nil {
		return nil, fmt.Errorf("read reservations: %w", err)
	}
	for rows.Next() {
		var r Reservation
		if err := rows.Scan(&r.ID, &r.EventID, &r.AggregateID, &r.Sequence, &r.EventType); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read reservations: %w", err)
		}
		o.Reservations = append(o.Reservations, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read reservations: %w", err)
	}
	if err := src.InventoryDB.QueryRow(ctx, `SELECT count(*) FROM parked_events`).Scan(&o.Parked); err != nil {
		return nil, fmt.Errorf("read parked events: %w", err)
	}
	if src.Queue != nil {
		if o.Queue, err = src.Queue(ctx, topology.Queue); err != nil {
			return nil, err
		}
		if o.DeadLetters, err = src.Queue(ctx, topology.DeadLetterQueue); err != nil {
			return nil, err
		}
	}
	o.Log, err = ReadLogs(src.LogPaths)
	if err != nil {
		return nil, err
	}
	for _, e := range o.Log {
		if e.EventID != "" {
			o.ByEvent[e.EventID] = append(o.ByEvent[e.EventID], e)
		}
	}
	return o, nil
}

// ReadLogs reads and merges event logs into one timeline.
func ReadLogs(paths []string) ([]eventlog.Entry, error) {
	var all []eventlog.Entry
	for _, p := range paths {
		entries, err := eventlog.ReadFile(p)
		if err != nil {
			return nil, err
		}
		all = append(all, entries...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Time.Before(all[j].Time) })
	return all, nil
}

// Count returns how many log entries have the event name.
func (o *Observation) Count(event string) int {
	n := 0
	for _, e := range o.Log {
		if e.Event == event {
			n++
		}
	}
	return n
}

// Timeline renders the merged log lines of the given events.
func (o *Observation) Timeline(ids ...string) []string {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var out []string
	for _, e := range o.Log {
		if e.EventID == "" || !want[e.EventID] {
			continue
		}
		out = append(out, FormatEntry(e))
	}
	return out
}

// FormatEntry is one timeline line.
func FormatEntry(e eventlog.Entry) string {
	s := fmt.Sprintf("%s %-10s %-16s %s", e.Time.Format("15:04:05.000"), e.Process, e.Event, e.EventID)
	if e.ClaimID != "" {
		s += " claim=" + e.ClaimID
	}
	if e.Redelivered {
		s += " redelivered"
	}
	if e.Point != "" {
		s += fmt.Sprintf(" point=%s hit=%d action=%s", e.Point, e.Hit, e.Action)
	}
	if e.Error != "" {
		s += " error=" + e.Error
	}
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}
