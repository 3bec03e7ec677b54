package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// obs builds an observation from a log; entries are in time order.
func obs(orders map[string]int64, outbox []history.OutboxRow, res []history.Effect, log ...eventlog.Entry) *history.Record {
	if outbox == nil {
		outbox = []history.OutboxRow{} // read, and empty
	}
	o := &history.Record{Outbox: outbox, Effects: res, Log: log, ByEvent: map[string][]eventlog.Entry{},
		LogRoles: map[string]bool{"producer": true, "relay": true, "consumer": true}, HeldBack: new(int)}
	// The producer acknowledged every fact, each aggregate by its id.
	o.AcknowledgedByID = map[string]int64{}
	for id, v := range orders {
		for seq := int64(1); seq <= v; seq++ {
			o.Facts = append(o.Facts, history.Fact{AggregateID: id, Sequence: seq})
		}
		o.AcknowledgedByID[id] = v
		o.Acknowledged += v
	}
	for _, e := range log {
		if e.EventID != "" {
			o.ByEvent[e.EventID] = append(o.ByEvent[e.EventID], e)
		}
	}
	return o
}

func ev(ms int, process, event, id, claim string) eventlog.Entry {
	return eventlog.Entry{Time: at(ms), Process: process, Event: event, EventID: id, ClaimID: claim}
}

func find(invs []result.Invariant, name string) result.Invariant {
	for _, inv := range invs {
		if inv.Name == name {
			return inv
		}
	}
	return result.Invariant{}
}

func TestInvariants(t *testing.T) {
	published := func(id, agg string, seq int64) history.OutboxRow {
		return history.OutboxRow{EventID: id, AggregateID: agg, Sequence: seq, Status: "Published", Published: true}
	}
	cleanLog := []eventlog.Entry{
		ev(1, "relay-1", eventlog.Claimed, "E1", "c1"), ev(2, "relay-1", eventlog.Confirmed, "E1", "c1"), ev(3, "relay-1", eventlog.Marked, "E1", "c1"),
	}
	for _, tc := range []struct {
		name      string
		o         *history.Record
		broken    string // the invariant that must fail ("" = none)
		violation string
	}{
		{"all good", obs(map[string]int64{"A": 1}, []history.OutboxRow{published("E1", "A", 1)}, []history.Effect{{ID: 1, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: "order.created"}}, cleanLog...), "", ""},
		{"lost", obs(map[string]int64{"A": 1, "B": 1}, []history.OutboxRow{published("E1", "A", 1), published("E2", "B", 1)}, []history.Effect{{ID: 1, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: "order.created"}},
			append(append([]eventlog.Entry{}, cleanLog...), ev(4, "relay-1", eventlog.Confirmed, "E2", "c1"), ev(5, "relay-1", eventlog.Marked, "E2", "c1"))...), NoLost, "lost"},
		{"failed with alert is not lost", obs(map[string]int64{"A": 1}, []history.OutboxRow{{EventID: "E1", AggregateID: "A", Sequence: 1, Status: "Failed"}}, nil), "", ""},
		{"phantom", obs(map[string]int64{}, nil, []history.Effect{{ID: 1, EventID: "E9", AggregateID: "Z", Sequence: 1, EventType: "order.created"}}), NoPhantom, "phantom"},
		{"duplicate effect", obs(map[string]int64{"A": 1}, []history.OutboxRow{published("E1", "A", 1)}, []history.Effect{{ID: 1, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: "order.created"}, {ID: 2, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: "order.created"}}, cleanLog...), NoDuplicate, "duplicate-effect"},
		{"stuck row", obs(map[string]int64{"A": 1}, []history.OutboxRow{{EventID: "E1", AggregateID: "A", Sequence: 1, Status: "Processing"}}, []history.Effect{{ID: 1, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: "order.created"}}), OutboxTruth, "stuck-row"},
		{"published without confirm", obs(map[string]int64{"A": 1}, []history.OutboxRow{published("E1", "A", 1)}, []history.Effect{{ID: 1, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: "order.created"}},
			ev(1, "relay-1", eventlog.Claimed, "E1", "c1"), ev(3, "relay-1", eventlog.Marked, "E1", "c1")), OutboxTruth, "published-unconfirmed"},
		{"returned but marked", obs(map[string]int64{"A": 1}, []history.OutboxRow{published("E1", "A", 1)}, []history.Effect{{ID: 1, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: "order.created"}},
			ev(1, "relay-1", eventlog.Claimed, "E1", "c1"), ev(2, "relay-1", eventlog.Returned, "E1", "c1"), ev(2, "relay-1", eventlog.Confirmed, "E1", "c1"), ev(3, "relay-1", eventlog.Marked, "E1", "c1")), OutboxTruth, "published-unconfirmed"},
		{"stale write accepted", obs(map[string]int64{"A": 1}, []history.OutboxRow{published("E1", "A", 1)}, []history.Effect{{ID: 1, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: "order.created"}},
			ev(1, "relay-1", eventlog.Claimed, "E1", "c1"), ev(2, "relay-1", eventlog.Confirmed, "E1", "c1"),
			ev(3, "relay-2", eventlog.Claimed, "E1", "c2"), ev(4, "relay-2", eventlog.Confirmed, "E1", "c2"), ev(5, "relay-2", eventlog.Marked, "E1", "c2"),
			ev(6, "relay-1", eventlog.Marked, "E1", "c1")), Fencing, "stale-write"},
		{"fenced is fine", obs(map[string]int64{"A": 1}, []history.OutboxRow{published("E1", "A", 1)}, []history.Effect{{ID: 1, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: "order.created"}},
			ev(1, "relay-1", eventlog.Claimed, "E1", "c1"), ev(2, "relay-1", eventlog.Confirmed, "E1", "c1"),
			ev(3, "relay-2", eventlog.Claimed, "E1", "c2"), ev(4, "relay-2", eventlog.Confirmed, "E1", "c2"), ev(5, "relay-2", eventlog.Marked, "E1", "c2"),
			ev(6, "relay-1", eventlog.Fenced, "E1", "c1")), "", ""},
		{"queue not drained", func() *history.Record {
			o := obs(map[string]int64{}, nil, nil)
			o.Queue = history.QueueInfo{Messages: 2, Ready: 2}
			return o
		}(), QueueDrained, "queue-not-drained"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			invs := Invariants(tc.o, nil)
			for _, inv := range invs {
				if inv.Name == tc.broken {
					require.False(t, inv.OK, "%s should be broken", inv.Name)
					require.NotEmpty(t, inv.Violations)
					assert.Equal(t, tc.violation, inv.Violations[0].Kind)
				} else if (inv.Name == FactsKept && tc.o.Acknowledged == 0) || (inv.Name == LeaseKept && tc.o.Audit == nil) {
					assert.True(t, inv.NotChecked, "%s: %s", inv.Name, inv.Detail)
				} else {
					assert.True(t, inv.OK, "%s: %s", inv.Name, inv.Detail)
				}
			}
		})
	}
}

// lease-kept breaks where a row was claimed at or before the end of the
// lease its holding claim last wrote, and holds where the lease had run
// out, the row was let go, or the claim renewed its own lease.
func TestLeaseKept(t *testing.T) {
	insert := history.AuditRow{Op: "INSERT", EventID: "E1", NewStatus: "Pending", At: at(0)}
	claim := func(ms int, writer, from, to string, leaseMS int) history.AuditRow {
		return history.AuditRow{Op: "UPDATE", EventID: "E1", Writer: writer, OldStatus: "Processing", NewStatus: "Processing", OldClaim: from, NewClaim: to, At: at(ms), Lease: at(leaseMS)}
	}
	first := claim(10, "relay-1", "", "c1", 2010)
	first.OldStatus = "Pending"
	published := history.AuditRow{Op: "UPDATE", EventID: "E1", Writer: "relay-1", OldStatus: "Processing", NewStatus: "Published", OldClaim: "c1", NewClaim: "c1", At: at(50), Lease: at(2010)}
	renewed := history.AuditRow{Op: "UPDATE", EventID: "E1", Writer: "relay-1", OldStatus: "Processing", NewStatus: "Processing", OldClaim: "c1", NewClaim: "c1", At: at(1500), Lease: at(3500)}
	for _, tc := range []struct {
		name     string
		audit    []history.AuditRow
		hasLease bool
		model    string
		taken    bool
		detail   string
	}{
		{name: "taken after the lease ran out", audit: []history.AuditRow{insert, first, claim(2011, "relay-2", "c1", "c2", 4011)}, hasLease: true},
		{name: "taken while the lease was live", audit: []history.AuditRow{insert, first, claim(600, "relay-2", "c1", "c2", 2600)}, hasLease: true, taken: true,
			detail: "1 rows claimed while another claim's lease on them was live"},
		{name: "taken at the lease's last instant", audit: []history.AuditRow{insert, first, claim(2010, "relay-2", "c1", "c2", 4010)}, hasLease: true, taken: true},
		{name: "renewed, then taken inside the renewal", audit: []history.AuditRow{insert, first, renewed, claim(2500, "relay-2", "c1", "c2", 4500)}, hasLease: true, taken: true},
		{name: "renewed, then taken after it", audit: []history.AuditRow{insert, first, renewed, claim(3600, "relay-2", "c1", "c2", 5600)}, hasLease: true},
		{name: "let go, then taken", audit: []history.AuditRow{insert, first, published, claim(600, "relay-2", "c1", "c2", 2600)}, hasLease: true},
		{name: "no lease column", audit: []history.AuditRow{insert, first, claim(600, "relay-2", "c1", "c2", 2600)},
			detail: "not checked: the outbox has no lease column faultline can watch (observe.outbox.lease, a timestamp)"},
		{name: "an offset relay claims nothing", audit: []history.AuditRow{insert}, hasLease: true, model: "offset",
			detail: "not checked: a relay of model offset holds no claim on the outbox rows: there is nothing to fence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &history.Record{Audit: &history.AuditTrail{Rows: tc.audit, Lease: tc.hasLease}, Model: tc.model}
			inv := leaseKept(o)
			if tc.detail != "" {
				assert.Equal(t, tc.detail, inv.Detail)
			}
			if !tc.hasLease || tc.model != "" {
				assert.True(t, inv.NotChecked)
				return
			}
			assert.Equal(t, !tc.taken, inv.OK, inv.Detail)
			if tc.taken {
				require.Len(t, inv.Violations, 1)
				assert.Equal(t, "live-claim-taken", inv.Violations[0].Kind)
				assert.Equal(t, []string{"E1"}, inv.Violations[0].EventIDs)
				assert.NotEmpty(t, inv.Violations[0].Timeline)
			}
		})
	}
}

// Two deliveries of one eventId count as one batch's only with nothing of
// that event and no (re)connection of the consumer between them.
func TestInBatchCopies(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  []eventlog.Entry
		want []string
	}{
		{name: "both delivered, then the outcomes", log: []eventlog.Entry{
			ev(1, "inventory", eventlog.Delivered, "E1", ""), ev(1, "inventory", eventlog.Delivered, "E1", ""),
			ev(2, "inventory", eventlog.Reserved, "E1", ""), ev(2, "inventory", eventlog.Duplicate, "E1", "")}, want: []string{"E1"}},
		{name: "the first settled before the second came", log: []eventlog.Entry{
			ev(1, "inventory", eventlog.Delivered, "E1", ""), ev(2, "inventory", eventlog.Reserved, "E1", ""),
			ev(3, "inventory", eventlog.Delivered, "E1", ""), ev(4, "inventory", eventlog.Duplicate, "E1", "")}},
		{name: "redelivered after a reconnection", log: []eventlog.Entry{
			ev(1, "inventory", eventlog.Delivered, "E1", ""), ev(2, "inventory", eventlog.Connected, "", ""),
			ev(3, "inventory", eventlog.Delivered, "E1", "")}},
		{name: "another process's lines do not count", log: []eventlog.Entry{
			ev(1, "inventory", eventlog.Delivered, "E1", ""), ev(2, "relay-1", eventlog.Published, "E1", "c1"),
			ev(3, "inventory", eventlog.Delivered, "E1", "")}, want: []string{"E1"}},
		{name: "two events, one batch each", log: []eventlog.Entry{
			ev(1, "inventory", eventlog.Delivered, "E1", ""), ev(1, "inventory", eventlog.Delivered, "E2", "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &history.Record{Log: tc.log, Instances: map[history.Ref]string{"consumer": "inventory"}}
			assert.Equal(t, tc.want, InBatchCopies(o))
		})
	}
}

// A message dead-lettered counts as behind an open delivery only when a
// delivery of another event taken before it had no outcome yet.
func TestDeadLetteredBehindOpen(t *testing.T) {
	const inv = "inventory"
	for _, tc := range []struct {
		name string
		log  []eventlog.Entry
		want []string
	}{
		{name: "poison behind a valid delivery of its batch", log: []eventlog.Entry{
			ev(1, inv, eventlog.Delivered, "E1", ""), ev(1, inv, eventlog.Delivered, "poison-0", ""), ev(1, inv, eventlog.Delivered, "E2", ""),
			ev(2, inv, eventlog.DeadLettered, "poison-0", ""), ev(3, inv, eventlog.Reserved, "E1", ""), ev(3, inv, eventlog.Reserved, "E2", "")},
			want: []string{"poison-0"}},
		{name: "poison first in its batch, valid ones behind it", log: []eventlog.Entry{
			ev(1, inv, eventlog.Delivered, "poison-0", ""), ev(1, inv, eventlog.Delivered, "E1", ""),
			ev(2, inv, eventlog.DeadLettered, "poison-0", ""), ev(3, inv, eventlog.Reserved, "E1", "")}},
		{name: "the valid delivery settled before the poison came", log: []eventlog.Entry{
			ev(1, inv, eventlog.Delivered, "E1", ""), ev(2, inv, eventlog.Reserved, "E1", ""), ev(2, inv, eventlog.Acked, "E1", ""),
			ev(3, inv, eventlog.Delivered, "poison-0", ""), ev(4, inv, eventlog.DeadLettered, "poison-0", "")}},
		{name: "a second poison behind the first, both dead-lettered in turn", log: []eventlog.Entry{
			ev(1, inv, eventlog.Delivered, "poison-0", ""), ev(1, inv, eventlog.Delivered, "poison-1", ""),
			ev(2, inv, eventlog.DeadLettered, "poison-0", ""), ev(2, inv, eventlog.DeadLettered, "poison-1", "")}},
		{name: "a reconnection between", log: []eventlog.Entry{
			ev(1, inv, eventlog.Delivered, "E1", ""), ev(2, inv, eventlog.Connected, "", ""),
			ev(3, inv, eventlog.Delivered, "poison-0", ""), ev(4, inv, eventlog.DeadLettered, "poison-0", "")}},
		{name: "poison whose delivery the consumer did not log, a delivery open", log: []eventlog.Entry{
			ev(1, inv, eventlog.Delivered, "E1", ""), ev(2, inv, eventlog.DeadLettered, "", ""), ev(3, inv, eventlog.Reserved, "E1", "")},
			want: []string{"(no eventId)"}},
		{name: "poison whose delivery the consumer did not log, none open", log: []eventlog.Entry{
			ev(1, inv, eventlog.Delivered, "E1", ""), ev(2, inv, eventlog.Acked, "E1", ""), ev(3, inv, eventlog.DeadLettered, "", "")}},
		{name: "another process's deliveries do not count", log: []eventlog.Entry{
			ev(1, "inventory-2", eventlog.Delivered, "E1", ""),
			ev(3, inv, eventlog.Delivered, "poison-0", ""), ev(4, inv, eventlog.DeadLettered, "poison-0", "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &history.Record{Log: tc.log, Instances: map[history.Ref]string{"consumer": inv}}
			assert.Equal(t, tc.want, DeadLetteredBehindOpen(o))
		})
	}
}

// facts-kept holds when each aggregate the producer acknowledged has as
// many facts as requests answered ok, whatever the other aggregates hold.
func TestFactsKept(t *testing.T) {
	facts := func(ids ...string) []history.Fact {
		var out []history.Fact
		for _, id := range ids {
			out = append(out, history.Fact{AggregateID: id})
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		o          history.Record
		ok         bool
		notChecked bool
		detail     string
	}{
		{name: "every aggregate whole", o: history.Record{Acknowledged: 3, AcknowledgedByID: map[string]int64{"1": 2, "2": 1}, Facts: facts("1", "1", "2")}, ok: true},
		{name: "a retried create's second aggregate is no excuse", o: history.Record{Acknowledged: 3, AcknowledgedByID: map[string]int64{"1": 2, "2": 1}, Facts: facts("1", "2", "3", "3")},
			detail: "1 facts the producer acknowledged are gone, from 1 aggregates"},
		{name: "an aggregate gone", o: history.Record{Acknowledged: 2, AcknowledgedByID: map[string]int64{"1": 1, "2": 1}, Facts: facts("1")},
			detail: "aggregates: 2"},
		{name: "more facts than acknowledged (a step answered done)", o: history.Record{Acknowledged: 1, AcknowledgedByID: map[string]int64{"1": 1}, Facts: facts("1", "1")}, ok: true},
		{name: "nothing acknowledged", o: history.Record{Facts: facts("1")}, notChecked: true, detail: "acknowledged nothing"},
		{name: "ids that are not the facts' aggregates", o: history.Record{Acknowledged: 2, AcknowledgedByID: map[string]int64{"a": 1, "b": 1}, Facts: facts("1", "2")},
			notChecked: true, detail: "none of the 2 aggregate ids"},
		{name: "every fact gone", o: history.Record{Acknowledged: 2, AcknowledgedByID: map[string]int64{"a": 1, "b": 1}}, detail: "2 facts the producer acknowledged are gone"},
		{name: "by count without ids", o: history.Record{Acknowledged: 3, Facts: facts("1", "2")}, detail: "1 facts the producer acknowledged are gone (3 acknowledged, 2 in the database)"},
		{name: "by count, enough", o: history.Record{Acknowledged: 2, Facts: facts("1", "2")}, ok: true, detail: "counted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := factsKept(&tc.o)
			assert.Equal(t, tc.ok, inv.OK, inv.Detail)
			assert.Equal(t, tc.notChecked, inv.NotChecked, inv.Detail)
			if !tc.ok && !tc.notChecked {
				require.Len(t, inv.Violations, 1)
				assert.Equal(t, "fact-lost", inv.Violations[0].Kind)
				assert.Contains(t, inv.Violations[0].Message, tc.detail)
			} else {
				assert.Contains(t, inv.Detail, tc.detail)
			}
		})
	}
}

// poison-accounted: every malformed message faultline published is in the
// dead-letter queue, or still queued; the rest were dropped.
func TestPoisonAccounted(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		poisoned, dlq, queued int
		noDLQ                 bool
		ok, notChecked        bool
		detail                string
	}{
		{name: "all dead-lettered", poisoned: 5, dlq: 5, ok: true, detail: "5 malformed messages published, 5 in the dead-letter queue"},
		{name: "three dropped", poisoned: 5, dlq: 2, detail: "3 of 5 malformed messages dropped without a trace"},
		{name: "some still queued", poisoned: 5, dlq: 3, queued: 2, ok: true, detail: "2 still queued"},
		{name: "valid events dead-lettered too", poisoned: 5, dlq: 7, ok: true},
		{name: "no poison", notChecked: true, detail: "published no malformed message"},
		{name: "no dead-letter queue", poisoned: 5, noDLQ: true, notChecked: true, detail: "no dead-letter queue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &history.Record{Poisoned: tc.poisoned, Queue: history.QueueInfo{Messages: tc.queued}}
			if !tc.noDLQ {
				o.DeadLetter = &history.DeadLetterQueue{Queue: history.QueueInfo{Messages: tc.dlq}}
			}
			inv := find(Invariants(o, []string{PoisonAccounted}), PoisonAccounted)
			assert.Equal(t, tc.ok, inv.OK, inv.Detail)
			assert.Equal(t, tc.notChecked, inv.NotChecked, inv.Detail)
			assert.Contains(t, inv.Detail, tc.detail)
			if !tc.ok && !tc.notChecked {
				require.Len(t, inv.Violations, 1)
				assert.Equal(t, "poison-dropped", inv.Violations[0].Kind)
			}
		})
	}
	assert.Empty(t, find(Invariants(&history.Record{Poisoned: 5}, nil), PoisonAccounted).Name, "only checked when asked")
}

// only-poison-dead-lettered: a valid event (the outbox's, or an effect's)
// in the dead-letter queue is a violation; poison there is what it is for.
func TestOnlyPoisonDeadLettered(t *testing.T) {
	outbox := []history.OutboxRow{{EventID: "E1"}, {EventID: "E2"}}
	for _, tc := range []struct {
		name       string
		o          history.Record
		ok, nc     bool
		violations []string
	}{
		{name: "poison only", o: history.Record{DeadLetter: &history.DeadLetterQueue{ByEvent: map[string]int{"poison-1": 1, "": 2}}, Outbox: outbox}, ok: true},
		{name: "an outbox event", o: history.Record{DeadLetter: &history.DeadLetterQueue{ByEvent: map[string]int{"poison-1": 1, "E2": 1}}, Outbox: outbox}, violations: []string{"E2"}},
		{name: "an effect's event, no outbox read", o: history.Record{DeadLetter: &history.DeadLetterQueue{ByEvent: map[string]int{"E3": 1, "E1": 1}}, Effects: []history.Effect{{EventID: "E3"}}}, violations: []string{"E3"}},
		{name: "empty", o: history.Record{DeadLetter: &history.DeadLetterQueue{}, Outbox: outbox}, ok: true},
		{name: "no dead-letter queue", o: history.Record{Outbox: outbox}, nc: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := find(Invariants(&tc.o, []string{OnlyPoisonDead}), OnlyPoisonDead)
			assert.Equal(t, tc.ok, inv.OK, inv.Detail)
			assert.Equal(t, tc.nc, inv.NotChecked, inv.Detail)
			if tc.violations != nil {
				require.Len(t, inv.Violations, 1)
				assert.Equal(t, "valid-dead-lettered", inv.Violations[0].Kind)
				assert.Equal(t, tc.violations, inv.Violations[0].EventIDs)
			}
		})
	}
	assert.Empty(t, find(Invariants(&history.Record{DeadLetter: &history.DeadLetterQueue{}}, nil), OnlyPoisonDead).Name, "only checked when asked")
}

func TestAggregateOrder(t *testing.T) {
	inOrder := obs(map[string]int64{"A": 3}, nil, []history.Effect{{ID: 1, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: ""}, {ID: 2, EventID: "E2", AggregateID: "A", Sequence: 2, EventType: ""}, {ID: 3, EventID: "E3", AggregateID: "A", Sequence: 3, EventType: ""}})
	assert.True(t, find(Invariants(inOrder, []string{AggregateOrder}), AggregateOrder).OK)
	outOfOrder := obs(map[string]int64{"A": 3}, nil, []history.Effect{{ID: 1, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: ""}, {ID: 2, EventID: "E3", AggregateID: "A", Sequence: 3, EventType: ""}, {ID: 3, EventID: "E2", AggregateID: "A", Sequence: 2, EventType: ""}})
	inv := find(Invariants(outOfOrder, []string{AggregateOrder}), AggregateOrder)
	assert.False(t, inv.OK)
	assert.Contains(t, inv.Violations[0].EventIDs, "E3")
	assert.Empty(t, find(Invariants(outOfOrder, nil), AggregateOrder).Name, "only checked when asked")
}

func TestCountsAndEvidence(t *testing.T) {
	o := obs(map[string]int64{"A": 1}, []history.OutboxRow{{EventID: "E1", AggregateID: "A", Sequence: 1, Status: "Published", Published: true}},
		[]history.Effect{{ID: 1, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: ""}},
		ev(1, "relay-1", eventlog.Claimed, "E1", "c1"), ev(2, "relay-1", eventlog.Published, "E1", "c1"), ev(3, "relay-1", eventlog.Unknown, "E1", "c1"),
		ev(2500, "relay-2", eventlog.Claimed, "E1", "c2"), ev(2501, "relay-2", eventlog.Published, "E1", "c2"), ev(2502, "relay-2", eventlog.Confirmed, "E1", "c2"),
		ev(2503, "relay-2", eventlog.Marked, "E1", "c2"),
		ev(2600, "inventory", eventlog.Delivered, "E1", ""), ev(2601, "inventory", eventlog.Reserved, "E1", ""),
		ev(2700, "inventory", eventlog.Delivered, "E1", ""), ev(2701, "inventory", eventlog.Duplicate, "E1", ""))
	c := Counts(o)
	assert.Equal(t, 2, c.Published)
	assert.Equal(t, 1, c.DuplicatesPublished)
	assert.Equal(t, 1, c.DuplicatesDelivered)
	assert.Equal(t, 1, c.DuplicatesAbsorbed)
	assert.Equal(t, 1, c.Unknown)
	for _, e := range []Evidence{ReclaimedAfterLease(), Republished(), UnknownRepublished(), DuplicateAbsorbed()} {
		seen, detail := e.Check(o)
		assert.True(t, seen, "%s: %s", e.Name, detail)
	}
	seen, _ := RedeliveryAbsorbed().Check(o)
	assert.False(t, seen, "a republish is not a broker redelivery")
	none := obs(nil, nil, nil)
	for _, e := range []Evidence{ReclaimedAfterLease(), Republished(), UnknownRepublished(), DuplicateAbsorbed(), AtLeast(1, eventlog.Fenced), CrashPointHit("relay.after-claim")} {
		seen, _ := e.Check(none)
		assert.False(t, seen, "%s seen in an empty run", e.Name)
	}

	tl := BuildTimeline(o, t0, at(3000), []result.Fault{{Kind: "crash", Target: "relay-1", Start: at(1000), End: at(2000)}}, nil)
	assert.Len(t, tl.Lanes, 3)
	assert.Len(t, tl.Faults, 1)
	assert.Equal(t, int64(1000), tl.Faults[0].StartMS)
	require.NotEmpty(t, tl.Traces)
	assert.Equal(t, "E1", tl.Traces[0].EventID)
	assert.Greater(t, tl.RateAfter, 0.0)
	total := 0
	for _, b := range tl.Rate {
		total += b.Reserved
	}
	assert.Equal(t, 1, total)
}

// A retry write logged after another relay's claim is stale only if that
// claim did not see it: a claim starting a later attempt came after the
// write, however late the write was logged.
func TestStaleRetryWrites(t *testing.T) {
	attempt := func(e eventlog.Entry, n int) eventlog.Entry { e.Attempt = n; return e }
	lateClaimThenMark := []eventlog.Entry{
		attempt(ev(1, "relay-2", eventlog.Claimed, "E1", "c2"), 1),
		attempt(ev(2, "relay-1", eventlog.Claimed, "E1", "c1"), 1),
		ev(3, "relay-2", eventlog.Marked, "E1", "c2"),
	}
	claim := func(i int64, writer, oldClaim, newClaim string) history.AuditRow {
		return history.AuditRow{ID: i, Writer: writer, Op: "UPDATE", EventID: "E1", OldStatus: "Processing", NewStatus: "Processing", OldClaim: oldClaim, NewClaim: newClaim}
	}
	for _, tc := range []struct {
		name  string
		log   []eventlog.Entry
		stale bool
		audit []history.AuditRow // the outbox's audit trail, when there is one
	}{
		// relay-1 frozen by a black-box fault right at its claim's commit:
		// its claimed line comes after relay-2's later claim (same attempt:
		// a lease running out does not count one), relay-2 marks.
		{"a claim logged late, committed first by the audit trail", append(lateClaimThenMark,
			ev(4, "relay-1", eventlog.Fenced, "E1", "c1"),
		), false, []history.AuditRow{claim(1, "relay-1", "", "c1"), claim(2, "relay-2", "c1", "c2")}},
		{"the same lines, committed in their order by the audit trail", lateClaimThenMark,
			true, []history.AuditRow{claim(1, "relay-2", "", "c2"), claim(2, "relay-1", "c2", "c1")}},
		{"the same lines, no audit trail", lateClaimThenMark, true, nil},
		{"retry logged late, the next claim saw it", []eventlog.Entry{
			attempt(ev(1, "relay-1", eventlog.Claimed, "E1", "c1"), 1),
			attempt(ev(3, "relay-2", eventlog.Claimed, "E1", "c2"), 2),
			attempt(ev(4, "relay-1", eventlog.Retry, "E1", "c1"), 1),
		}, false, nil},
		{"retry accepted after a claim that did not see it", []eventlog.Entry{
			attempt(ev(1, "relay-1", eventlog.Claimed, "E1", "c1"), 1),
			attempt(ev(3, "relay-2", eventlog.Claimed, "E1", "c2"), 1),
			attempt(ev(4, "relay-1", eventlog.Retry, "E1", "c1"), 1),
		}, true, nil},
		{"failure accepted after a claim that did not see it", []eventlog.Entry{
			attempt(ev(1, "relay-1", eventlog.Claimed, "E1", "c1"), 8),
			attempt(ev(3, "relay-2", eventlog.Claimed, "E1", "c2"), 8),
			attempt(ev(4, "relay-1", eventlog.FailedAlert, "E1", "c1"), 8),
		}, true, nil},
		{"a claim logged late by a frozen relay, made before the writer's claim", []eventlog.Entry{
			attempt(ev(1, "relay-1", eventlog.Claimed, "E1", "c1"), 7),
			attempt(ev(3, "relay-2", eventlog.Claimed, "E1", "c2"), 3),
			attempt(ev(4, "relay-1", eventlog.Retry, "E1", "c1"), 7),
			ev(5, "relay-2", eventlog.Fenced, "E1", "c2"),
		}, false, nil},
		{"a mark after a claim logged late, made before the writer's claim", []eventlog.Entry{
			attempt(ev(1, "relay-1", eventlog.Claimed, "E1", "c1"), 4),
			attempt(ev(3, "relay-2", eventlog.Claimed, "E1", "c2"), 2),
			ev(4, "relay-1", eventlog.Marked, "E1", "c1"),
		}, false, nil},
		{"a mark after another claim is stale whatever the attempts", []eventlog.Entry{
			attempt(ev(1, "relay-1", eventlog.Claimed, "E1", "c1"), 1),
			attempt(ev(3, "relay-2", eventlog.Claimed, "E1", "c2"), 2),
			ev(4, "relay-1", eventlog.Marked, "E1", "c1"),
		}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := obs(map[string]int64{"A": 1}, nil, nil, tc.log...)
			if tc.audit != nil {
				o.Audit = &history.AuditTrail{Rows: tc.audit}
			}
			if tc.stale {
				assert.Equal(t, []string{"E1"}, StaleWrites(o))
			} else {
				assert.Empty(t, StaleWrites(o))
			}
		})
	}
}

// Check computes the shared findings once; it must say exactly what
// Invariants and Counts say separately, on a run with every kind of finding.
func TestCheckIsInvariantsAndCounts(t *testing.T) {
	o := bigRecord(2000, 20)
	o.Effects = append(o.Effects, o.Effects[0], history.Effect{ID: 1, EventID: "E-phantom", AggregateID: "Z", Sequence: 1, EventType: "order.created"})
	invs, c := Check(o, []string{AggregateOrder})
	assert.Equal(t, Invariants(o, []string{AggregateOrder}), invs)
	assert.Equal(t, Counts(o), c)
	assert.Positive(t, c.Lost)
	assert.Positive(t, c.Phantom)
	assert.Positive(t, c.DuplicateEffects)
}

// From the audit trail alone: a write from a writer whose claim another
// writer took over is a stale write; the holder's own writes are not; a
// takeover is seen whoever takes over.
func TestAuditStaleWritesAndTakeovers(t *testing.T) {
	row := func(writer, old, new, oldClaim, newClaim string) history.AuditRow {
		return history.AuditRow{Writer: writer, Op: "UPDATE", EventID: "E1", OldStatus: old, NewStatus: new, OldClaim: oldClaim, NewClaim: newClaim}
	}
	for _, tc := range []struct {
		name      string
		audit     []history.AuditRow
		stale     []string
		takenOver bool
	}{
		{"claim and mark by the holder", []history.AuditRow{row("relay-1", "Pending", "Processing", "", "c1"), row("relay-1", "Processing", "Published", "c1", "")}, nil, false},
		{"takeover, then the new holder marks", []history.AuditRow{row("relay-1", "Pending", "Processing", "", "c1"), row("relay-2", "Processing", "Processing", "c1", "c2"), row("relay-2", "Processing", "Published", "c2", "")}, nil, true},
		{"takeover, then the old holder writes", []history.AuditRow{row("relay-1", "Pending", "Processing", "", "c1"), row("relay-2", "Processing", "Processing", "c1", "c2"), row("relay-2", "Processing", "Published", "c2", ""), row("relay-1", "Published", "Published", "", "")}, []string{"E1"}, true},
		{"the same relay, restarted, takes its rows over", []history.AuditRow{row("relay-1", "Pending", "Processing", "", "c1"), row("relay-1", "Processing", "Processing", "c1", "c3")}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &history.Record{Audit: &history.AuditTrail{Rows: tc.audit}}
			assert.ElementsMatch(t, tc.stale, AuditStaleWrites(o))
			seen, _ := ReclaimedByAnother().Check(o)
			assert.Equal(t, tc.takenOver, seen)
		})
	}
}

// Optional evidence is not checked where the target does not give what it
// reads, and checked — and can fail — where it does.
func TestOptionalEvidence(t *testing.T) {
	ev := Optional(AtLeast(1, eventlog.Fenced))
	blind := &history.Record{LogRoles: map[string]bool{}}
	got := Evaluate(blind, []Evidence{ev})
	require.Len(t, got, 1)
	assert.True(t, got[0].NotChecked)
	assert.False(t, got[0].Seen)
	assert.Contains(t, got[0].Detail, string(history.SourceRelayLog))
	logged := &history.Record{LogRoles: map[string]bool{"relay": true}}
	got = Evaluate(logged, []Evidence{ev})
	assert.False(t, got[0].NotChecked)
	assert.False(t, got[0].Seen, "checked, and not seen: no fenced line")
}

// A row given up on breaks none-gave-up only where the outage showed the
// relays' retries: one that ended before they showed their shape (a row
// within a retry of its budget, the retries neither backing off nor flat)
// says nothing of whether the row was given up early.
func TestNoneGaveUpRestsOnAnOpenedOutage(t *testing.T) {
	o := &history.Record{Outbox: []history.OutboxRow{{EventID: "E1", Status: "Failed"}, {EventID: "E2", Status: "Published"}}}
	inv := noneGaveUp(o)
	assert.False(t, inv.OK)
	assert.False(t, inv.NotChecked)
	o.OutageUnopened = "a row came within a retry of its budget of 8 with their retries neither shown backing off nor shown flat"
	inv = noneGaveUp(o)
	assert.True(t, inv.NotChecked, inv.Detail)
	assert.Contains(t, inv.Detail, "within a retry of its budget")
}
