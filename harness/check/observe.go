// Package check reads what a run left — the target's tables through its
// contract queries, the broker, and the event logs where the target writes
// them — waits for the pipeline to converge, and checks the invariants of
// docs/design.md against it. Every result is data (result.Invariant,
// result.Counts), so reports can render it, and every verdict says what it
// rests on: a check with nothing to rest on is "not checked", never "ok".
package check

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// QueueInfo is what the broker says of a queue.
type QueueInfo struct {
	Messages, Ready, Unacked, Consumers int
	Redelivered                         int // the broker's redelivery counter
}

// Sources are where the checker looks.
type Sources struct {
	// DB maps each of the target's databases (by its name in the target
	// file) to a pool on the run's copy of it.
	DB       map[string]*pgxpool.Pool
	Contract target.Contract
	Topology target.Topology
	// LogPaths are the event logs of the processes that write one.
	LogPaths []string
	// LogRoles are the roles whose processes write an event log.
	LogRoles map[string]bool
	// Windows translate each process's own crash point names into the
	// protocol's windows: instance → its point name → window.
	Windows map[string]map[string]string
	// Queue asks the broker about a queue of the scenario's vhost.
	Queue func(ctx context.Context, queue string) (QueueInfo, error)
	// Instances maps the role references scenarios use ("relay-1",
	// "consumer") to the run's instance names, which its logs carry.
	Instances map[string]string
	// Audit reads the outbox's audit trail (nil: none was installed).
	Audit func(ctx context.Context) ([]AuditRow, error)
	// Tap drains the tap queue: routings per eventId (nil: none bound).
	Tap func(ctx context.Context) (map[string]int, error)
	// Down says which of the target's processes is down with no restart
	// coming (nil: none is; a nil Down: nothing to ask). Convergence
	// without it cannot come, and waiting for it would show the harness's
	// loss as the pipeline's.
	Down func() error
}

// Observation sources: what a verdict rests on.
const (
	FromContract = "contract"  // the target's tables, through its contract queries
	FromOutbox   = "outbox"    // the contract's outbox query
	FromEventLog = "event log" // the processes' event logs
	FromBroker   = "broker"    // queue counters
)

// Fact is one committed business fact: an aggregate's event, and its
// eventId where the target's tables keep it.
type Fact struct {
	AggregateID string
	Sequence    int64
	EventID     string
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

// Effect is one effect row, in the order the consumer applied them.
type Effect struct {
	ID          int64
	EventID     string
	AggregateID string
	Sequence    int64
	EventType   string
}

// Observation is everything the checker knows about a run's end state.
type Observation struct {
	Facts   []Fact
	Effects []Effect
	// Outbox is nil when the target's contract has no outbox query.
	Outbox    []OutboxRow
	HasOutbox bool
	// HeldBack is how many events wait for a predecessor (HasHeldBack: the
	// contract says how to count them).
	HeldBack    int
	HasHeldBack bool
	Queue       QueueInfo
	DeadLetters QueueInfo
	HasDLQ      bool
	Log         []eventlog.Entry // merged, in time order
	ByEvent     map[string][]eventlog.Entry
	// LogRoles are the roles whose event logs were read.
	LogRoles map[string]bool
	// Audit is the outbox's audit trail (HasAudit: it was installed).
	Audit    []AuditRow
	HasAudit bool
	// Tap counts the routings of each eventId (HasTap: the tap was bound).
	Tap       map[string]int
	HasTap    bool
	instances map[string]string
}

// Instance is the run's name of the instance a role reference ("relay-1",
// "consumer") names, as its event log lines carry it.
func (o *Observation) Instance(ref string) string {
	if name, ok := o.instances[ref]; ok {
		return name
	}
	return ref
}

// HasLog reports whether the processes of role write an event log.
func (o *Observation) HasLog(role string) bool { return o.LogRoles[role] }

// Observe loads the end state.
func Observe(ctx context.Context, src Sources) (*Observation, error) {
	o := &Observation{ByEvent: map[string][]eventlog.Entry{}, LogRoles: src.LogRoles, instances: src.Instances}
	var err error
	if o.Facts, err = readFacts(ctx, src, src.Contract.Facts); err != nil {
		return nil, err
	}
	if o.Effects, err = readEffects(ctx, src, src.Contract.Effects); err != nil {
		return nil, err
	}
	if q := src.Contract.Outbox; q != nil {
		if o.Outbox, err = readOutbox(ctx, src, *q); err != nil {
			return nil, err
		}
		o.HasOutbox = true
	}
	if q := src.Contract.HeldBack; q != nil {
		pool, err := src.pool(*q, "held_back")
		if err != nil {
			return nil, err
		}
		err = ReadOnly(ctx, pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, q.SQL).Scan(&o.HeldBack); err != nil {
				return queryError("held_back", *q, err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		o.HasHeldBack = true
	}
	if src.Queue != nil {
		if o.Queue, err = src.Queue(ctx, src.Topology.Queue); err != nil {
			return nil, err
		}
		if src.Topology.DeadLetterQueue != "" {
			if o.DeadLetters, err = src.Queue(ctx, src.Topology.DeadLetterQueue); err != nil {
				return nil, err
			}
			o.HasDLQ = true
		}
	}
	if src.Audit != nil {
		if o.Audit, err = src.Audit(ctx); err != nil {
			return nil, err
		}
		o.HasAudit = true
	}
	if src.Tap != nil {
		if o.Tap, err = src.Tap(ctx); err != nil {
			return nil, err
		}
		o.HasTap = true
	}
	o.Log, err = ReadLogs(src.LogPaths, src.Windows)
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

func (src Sources) pool(q target.Query, what string) (*pgxpool.Pool, error) {
	p, ok := src.DB[q.Database]
	if !ok {
		return nil, fmt.Errorf("contract %s: no database %q in this run", what, q.Database)
	}
	return p, nil
}

func queryError(what string, q target.Query, err error) error {
	where := "default"
	if !q.Default {
		where = fmt.Sprintf("line %d", q.Line)
	}
	return fmt.Errorf("contract %s (%s, database %s): %w", what, where, q.Database, err)
}

// columns maps the named columns of a query's answer to their positions;
// required ones must be there.
func columns(rows pgx.Rows, what string, required, optional []string) (map[string]int, error) {
	idx := map[string]int{}
	var got []string
	for i, f := range rows.FieldDescriptions() {
		idx[f.Name] = i
		got = append(got, f.Name)
	}
	for _, c := range required {
		if _, ok := idx[c]; !ok {
			return nil, fmt.Errorf("contract %s: the query returns no column %q (it returns %s; wanted %s, optional %s)",
				what, c, strings.Join(got, ", "), strings.Join(required, ", "), strings.Join(optional, ", "))
		}
	}
	return idx, nil
}

// scanAll reads every row of q, in a read-only transaction, as text-ish
// values by column.
func scanAll(ctx context.Context, pool *pgxpool.Pool, q target.Query, what string, required, optional []string, each func(get func(col string) any) error, args ...any) error {
	return ReadOnly(ctx, pool, func(tx pgx.Tx) error {
		return scanRows(ctx, tx, q, what, required, optional, each, args...)
	})
}

func scanRows(ctx context.Context, tx pgx.Tx, q target.Query, what string, required, optional []string, each func(get func(col string) any) error, args ...any) error {
	rows, err := tx.Query(ctx, q.SQL, args...)
	if err != nil {
		return queryError(what, q, err)
	}
	defer rows.Close()
	idx, err := columns(rows, what, required, optional)
	if err != nil {
		// A query PostgreSQL refused (a write in a read-only transaction)
		// has no columns either: its own error says more.
		rows.Close()
		if qerr := rows.Err(); qerr != nil {
			return queryError(what, q, qerr)
		}
		return err
	}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return queryError(what, q, err)
		}
		get := func(col string) any {
			i, ok := idx[col]
			if !ok {
				return nil
			}
			return vals[i]
		}
		if err := each(get); err != nil {
			return fmt.Errorf("contract %s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return queryError(what, q, err)
	}
	return nil
}

func asString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	default:
		return fmt.Sprint(x)
	}
}

func asInt(v any, def int64) (int64, error) {
	switch x := v.(type) {
	case nil:
		return def, nil
	case int64:
		return x, nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int:
		return int64(x), nil
	default:
		return 0, fmt.Errorf("want an integer, got %T %v", v, v)
	}
}

func asBool(v any) bool {
	b, _ := v.(bool)
	return b
}

func readFacts(ctx context.Context, src Sources, q target.Query) ([]Fact, error) {
	pool, err := src.pool(q, "facts")
	if err != nil {
		return nil, err
	}
	var out []Fact
	err = scanAll(ctx, pool, q, "facts", []string{"aggregate_id"}, []string{"sequence", "event_id"}, func(get func(string) any) error {
		seq, err := asInt(get("sequence"), 1)
		if err != nil {
			return fmt.Errorf("column sequence: %w", err)
		}
		out = append(out, Fact{AggregateID: asString(get("aggregate_id")), Sequence: seq, EventID: asString(get("event_id"))})
		return nil
	})
	return out, err
}

func readEffects(ctx context.Context, src Sources, q target.Query) ([]Effect, error) {
	pool, err := src.pool(q, "effects")
	if err != nil {
		return nil, err
	}
	var out []Effect
	err = scanAll(ctx, pool, q, "effects", []string{"event_id", "aggregate_id"}, []string{"sequence", "event_type"}, func(get func(string) any) error {
		seq, err := asInt(get("sequence"), 1)
		if err != nil {
			return fmt.Errorf("column sequence: %w", err)
		}
		out = append(out, Effect{ID: int64(len(out) + 1), EventID: asString(get("event_id")), AggregateID: asString(get("aggregate_id")), Sequence: seq, EventType: asString(get("event_type"))})
		return nil
	})
	return out, err
}

func readOutbox(ctx context.Context, src Sources, q target.Query) ([]OutboxRow, error) {
	pool, err := src.pool(q, "outbox")
	if err != nil {
		return nil, err
	}
	out := []OutboxRow{}
	statuses := target.ArticleStatuses()
	err = scanAll(ctx, pool, q, "outbox", []string{"event_id", "aggregate_id", "status"}, []string{"sequence", "published", "attempts", "last_error"}, func(get func(string) any) error {
		seq, err := asInt(get("sequence"), 1)
		if err != nil {
			return fmt.Errorf("column sequence: %w", err)
		}
		attempts, err := asInt(get("attempts"), 0)
		if err != nil {
			return fmt.Errorf("column attempts: %w", err)
		}
		r := OutboxRow{EventID: asString(get("event_id")), AggregateID: asString(get("aggregate_id")), Sequence: seq,
			Status: asString(get("status")), Attempts: int(attempts), LastError: asString(get("last_error"))}
		if v := get("published"); v != nil {
			r.Published = asBool(v)
		} else {
			r.Published = r.Status == "Published"
		}
		if !slices.Contains(statuses, r.Status) {
			return fmt.Errorf("row %s: status %q: want one of %s (map yours with CASE in the query)", r.EventID, r.Status, strings.Join(statuses, ", "))
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// ReadLogs reads and merges event logs into one timeline. A crash point
// line's point is translated from the process's own name into the
// protocol's window (windows: process → own name → window), so the
// timeline and the evidence speak of windows.
func ReadLogs(paths []string, windows map[string]map[string]string) ([]eventlog.Entry, error) {
	var all []eventlog.Entry
	for _, p := range paths {
		entries, err := eventlog.ReadFile(p)
		if err != nil {
			return nil, err
		}
		all = append(all, entries...)
	}
	for i := range all {
		e := &all[i]
		if e.Event != eventlog.CrashPoint || e.Point == "" {
			continue
		}
		if w, ok := windows[e.Process][e.Point]; ok {
			e.Point = w
		}
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
