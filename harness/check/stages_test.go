package check

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// lostOne is a run whose one committed event, E1 of aggregate A, has no
// effect; its outbox row has the given status ("" for no row), the logs of
// roles are read, and the queue was read empty.
func lostOne(status string, roles []string, log ...eventlog.Entry) *history.Record {
	var outbox []history.OutboxRow
	if status != "" {
		outbox = []history.OutboxRow{{EventID: "E1", AggregateID: "A", Sequence: 1, Status: status, Published: status == "Published"}}
	}
	o := obs(map[string]int64{"A": 1}, outbox, nil, log...)
	o.Facts[0].EventID = "E1"
	o.LogRoles = map[string]bool{}
	for _, r := range roles {
		o.LogRoles[r] = true
	}
	o.Queued = map[string]int{}
	return o
}

// logRelay makes o a log relay's run seen from outside: no outbox query,
// a tap that saw nothing, the slot confirmed up to slot, and E1 inserted
// at WAL position insert.
func logRelay(o *history.Record, slot, insert int64) {
	o.Outbox, o.Model = nil, "log"
	o.Tap = map[string]int{}
	o.Slot = &history.LogSlot{Confirmed: slot}
	o.Audit = &history.AuditTrail{Rows: []history.AuditRow{{At: at(10), Op: "INSERT", EventID: "E1", LSN: insert}}}
}

func with(o *history.Record, change func(*history.Record)) *history.Record {
	change(o)
	return o
}

// TestStageOfALostEvent: each rule of the placer, from the evidence it
// rests on, and "unknown" where that evidence is missing.
func TestStageOfALostEvent(t *testing.T) {
	logs := []string{"relay", "consumer"}
	published := ev(100, "relay-1", eventlog.Published, "E1", "c1")
	unbound := []history.Interval{{Start: at(50), End: at(200)}}
	audit := func(claimMS, markMS int) []history.AuditRow {
		return []history.AuditRow{
			{At: at(claimMS), Op: "UPDATE", EventID: "E1", OldStatus: "Pending", NewStatus: "Processing", NewClaim: "c1"},
			{At: at(markMS), Op: "UPDATE", EventID: "E1", OldStatus: "Processing", NewStatus: "Published", OldClaim: "c1", NewClaim: "c1"},
		}
	}
	for _, tc := range []struct {
		name string
		o    *history.Record
		want result.Stage
	}{
		{"in the queue at the end", with(lostOne("Published", logs, published), func(o *history.Record) { o.Queued["E1"] = 1 }), result.StageQueued},
		{"in the queue beats a pending row (it was published once already)",
			with(lostOne("Processing", logs, published), func(o *history.Record) { o.Queued["E1"] = 1 }), result.StageQueued},
		{"queue not read, the broker says it holds messages", with(lostOne("Published", logs, published), func(o *history.Record) {
			o.Queued, o.Queue = nil, history.QueueInfo{Messages: 3, Ready: 3}
		}), result.StageUnknown},
		{"queue not read, the broker says it is empty: on to the next rule", with(lostOne("Published", logs, published), func(o *history.Record) {
			o.Queued = nil
		}), result.StageSkipped},
		{"pending in the outbox", lostOne("Pending", logs), result.StageInOutbox},
		{"claimed and never settled (a relay died holding it)", lostOne("Processing", logs), result.StageInOutbox},
		{"pending, and a row after it was published: the relay moved past it", with(lostOne("Pending", logs), func(o *history.Record) {
			o.Outbox = append(o.Outbox, history.OutboxRow{EventID: "E2", AggregateID: "B", Sequence: 1, Status: "Published", Published: true})
		}), result.StageSkipped},
		{"pending after a published row: not reached yet", with(lostOne("Pending", logs), func(o *history.Record) {
			o.Outbox = append([]history.OutboxRow{{EventID: "E0", AggregateID: "B", Sequence: 1, Status: "Published", Published: true}}, o.Outbox...)
		}), result.StageInOutbox},
		{"claimed, and a row after it was published: a claim, not a skip", with(lostOne("Processing", logs), func(o *history.Record) {
			o.Outbox = append(o.Outbox, history.OutboxRow{EventID: "E2", AggregateID: "B", Sequence: 1, Status: "Published", Published: true})
		}), result.StageInOutbox},
		{"delivered to the consumer, no effect", lostOne("Published", logs, published, ev(150, "inventory", eventlog.Delivered, "E1", "")),
			result.StageConsumedNoEffect},
		{"delivered, then in the dead-letter queue at the end", with(lostOne("Published", logs, published, ev(150, "inventory", eventlog.Delivered, "E1", "")),
			func(o *history.Record) { o.DeadLetter = &history.DeadLetterQueue{ByEvent: map[string]int{"E1": 1}} }), result.StageDeadLettered},
		{"another event in the dead-letter queue: consumed without effect", with(lostOne("Published", logs, published, ev(150, "inventory", eventlog.Delivered, "E1", "")),
			func(o *history.Record) { o.DeadLetter = &history.DeadLetterQueue{ByEvent: map[string]int{"E2": 1}} }), result.StageConsumedNoEffect},
		{"delivered as often as the delivery limit of a queue without a dead-letter exchange: dropped",
			with(lostOne("Published", logs, published, ev(150, "inventory", eventlog.Delivered, "E1", ""), ev(160, "inventory", eventlog.Delivered, "E1", "")),
				func(o *history.Record) { o.Queue.DeliveryLimit = 2 }), result.StageDroppedAtLimit},
		{"at the delivery limit, but dead-lettered: consumed without effect",
			with(lostOne("Published", logs, published, ev(150, "inventory", eventlog.Delivered, "E1", ""), ev(160, "inventory", eventlog.Delivered, "E1", "")),
				func(o *history.Record) { o.Queue.DeliveryLimit, o.Queue.DeadLetterExchange = 2, "dlx" }), result.StageConsumedNoEffect},
		{"below the delivery limit: consumed without effect",
			with(lostOne("Published", logs, published, ev(150, "inventory", eventlog.Delivered, "E1", "")),
				func(o *history.Record) { o.Queue.DeliveryLimit = 2 }), result.StageConsumedNoEffect},
		{"confirmed, no return, the queue bound all along, never logged delivered: consumed without effect",
			lostOne("Published", logs, published, ev(101, "relay-1", eventlog.Confirmed, "E1", "c1")), result.StageConsumedNoEffect},
		{"confirmed, held by a consumer that died before logging it, on a queue that drops past its limit: dropped",
			with(lostOne("Published", logs, published, ev(101, "relay-1", eventlog.Confirmed, "E1", "c1"), ev(150, "inventory", eventlog.Acked, "E9", "")),
				func(o *history.Record) { o.Queue.DeliveryLimit = 2 }), result.StageDroppedAtLimit},
		{"delivered once and never acked by a consumer that logs its acks, on a queue that drops past its limit: dropped",
			with(lostOne("Published", logs, published, ev(150, "inventory", eventlog.Delivered, "E1", ""), ev(160, "inventory", eventlog.Acked, "E9", "")),
				func(o *history.Record) { o.Queue.DeliveryLimit = 2 }), result.StageDroppedAtLimit},
		{"acked without effect on a queue that drops past its limit (ack before commit): consumed without effect",
			with(lostOne("Published", logs, published, ev(150, "inventory", eventlog.Delivered, "E1", ""), ev(151, "inventory", eventlog.Acked, "E1", "")),
				func(o *history.Record) { o.Queue.DeliveryLimit = 2 }), result.StageConsumedNoEffect},
		{"confirmed while the queue was unbound: the confirm says nothing of the queue",
			with(lostOne("Published", logs, published, ev(101, "relay-1", eventlog.Confirmed, "E1", "c1")), func(o *history.Record) { o.Unbound = unbound }), result.StageRoutedNowhere},
		{"on the tap, no consumer log", with(lostOne("Published", []string{"relay"}, published), func(o *history.Record) {
			o.Tap = map[string]int{"E1": 1}
		}), result.StageConsumedNoEffect},
		{"no consumer log and no tap: whether it reached the queue is unknown", lostOne("Published", []string{"relay"}, published), result.StageUnknown},
		{"returned by the broker as unroutable, marked anyway (ignore-return)",
			lostOne("Published", logs, published, ev(101, "relay-1", eventlog.Returned, "E1", "c1")), result.StageRoutedNowhere},
		{"published while the queue was unbound (no mandatory: no return)",
			with(lostOne("Published", logs, published), func(o *history.Record) { o.Unbound = unbound }), result.StageRoutedNowhere},
		{"published after an unbind that was never restored",
			with(lostOne("Published", logs, published), func(o *history.Record) { o.Unbound = []history.Interval{{Start: at(90)}} }), result.StageRoutedNowhere},
		{"published before the queue was unbound: skipped",
			with(lostOne("Published", logs, published), func(o *history.Record) { o.Unbound = []history.Interval{{Start: at(300), End: at(400)}} }), result.StageSkipped},
		{"no relay log: claimed and marked while unbound, from the audit trail", with(lostOne("Published", []string{"consumer"}), func(o *history.Record) {
			o.Unbound, o.Audit = unbound, &history.AuditTrail{Rows: audit(40, 60)}
		}), result.StageRoutedNowhere},
		{"no relay log: claimed and marked after the binding came back", with(lostOne("Published", []string{"consumer"}), func(o *history.Record) {
			o.Unbound, o.Audit = unbound, &history.AuditTrail{Rows: audit(250, 260)}
		}), result.StageSkipped},
		{"no relay log, an audit trail by the outbox's own ids: routed inside the unbound span", with(lostOne("Published", []string{"consumer"}), func(o *history.Record) {
			o.Unbound, o.Audit = unbound, &history.AuditTrail{Rows: []history.AuditRow{{At: at(60), Op: "INSERT", EventID: "row-7"}}}
			o.Routed = map[string][]time.Time{"E1": {at(100)}}
		}), result.StageRoutedNowhere},
		{"routed after the binding came back, never on the tap: routed while the tap had no binding", with(lostOne("Published", []string{"consumer"}), func(o *history.Record) {
			o.Unbound, o.Tap, o.Routed = unbound, map[string]int{}, map[string][]time.Time{"E1": {at(201)}}
		}), result.StageRoutedNowhere},
		{"routed after the binding came back, no tap: skipped", with(lostOne("Published", []string{"consumer"}), func(o *history.Record) {
			o.Unbound, o.Routed = unbound, map[string][]time.Time{"E1": {at(250)}}
		}), result.StageSkipped},
		{"routings watched, never routed: skipped", with(lostOne("Published", []string{"consumer"}), func(o *history.Record) {
			o.Unbound, o.Routed = unbound, map[string][]time.Time{"E2": {at(100)}}
		}), result.StageSkipped},
		{"no relay log, no audit trail, the queue unbound: unknown", with(lostOne("Published", []string{"consumer"}), func(o *history.Record) {
			o.Unbound = unbound
		}), result.StageUnknown},
		{"the relay moved past it, never published (reads by id)", lostOne("Published", logs), result.StageSkipped},
		{"published, never reached the queue, the binding always there (published-before-confirm)", lostOne("Published", logs, published), result.StageSkipped},
		{"no outbox row at all (published by the producer, who died first)", lostOne("", logs), result.StageSkipped},
		{"no outbox query: it may still be pending", with(lostOne("", logs), func(o *history.Record) { o.Outbox = nil }), result.StageUnknown},
		{"delivered, acked, stored in the inbox and not applied yet: the consumer still has it",
			with(lostOne("Published", logs, published, ev(150, "inventory", eventlog.Delivered, "E1", ""), ev(151, "inventory", eventlog.Acked, "E1", "")),
				func(o *history.Record) { o.InboxPending = []string{"E1"} }), result.StageInInbox},
		{"delivered, acked, not in the inbox's pending list: consumed without effect",
			with(lostOne("Published", logs, published, ev(150, "inventory", eventlog.Delivered, "E1", ""), ev(151, "inventory", eventlog.Acked, "E1", "")),
				func(o *history.Record) { o.InboxPending = []string{"E2"} }), result.StageConsumedNoEffect},
		{"a log relay's slot passed its insert, never on the tap: skipped", with(lostOne("", []string{}), func(o *history.Record) {
			logRelay(o, 500, 400)
		}), result.StageSkipped},
		{"a log relay's slot not past its insert: it still has it to stream", with(lostOne("", []string{}), func(o *history.Record) {
			logRelay(o, 500, 500)
		}), result.StageInOutbox},
		{"a log relay's slot passed it, and the tap saw it: consumed without effect", with(lostOne("", []string{}), func(o *history.Record) {
			logRelay(o, 500, 400)
			o.Tap["E1"] = 1
		}), result.StageConsumedNoEffect},
		{"a log relay whose slot was not read: unknown", with(lostOne("", []string{}), func(o *history.Record) {
			logRelay(o, 500, 400)
			o.Slot = nil
		}), result.StageUnknown},
		{"in the inbox's pending list and redelivered into the queue: the inbox is further along",
			with(lostOne("Published", logs, published), func(o *history.Record) {
				o.Queued["E1"] = 1
				o.InboxPending = []string{"E1"}
			}), result.StageInInbox},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Len(t, missingEffects(tc.o), 1, "the run has one committed event without effect")
			pl := findingsOf(tc.o).placed
			assert.Equal(t, placed{tc.want: {"E1"}}, pl)
		})
	}
}

// TestNoLostByStage: events only still queued or still in the outbox make
// the run not converged, never lost; any other stage is lost, every
// eventId listed by stage even past the report's cap.
func TestNoLostByStage(t *testing.T) {
	many := func(n int, status string, queued int) *history.Record {
		o := obs(nil, nil, nil)
		o.LogRoles = map[string]bool{"consumer": true} // a relay log would want each Published row confirmed
		o.Queued = map[string]int{}
		for i := range n {
			id := fmt.Sprintf("E%02d", i)
			o.Facts = append(o.Facts, history.Fact{AggregateID: "A" + id, Sequence: 1, EventID: id})
			st := status
			if i < queued {
				o.Queued[id] = 1
				st = "Published"
			}
			o.Outbox = append(o.Outbox, history.OutboxRow{EventID: id, AggregateID: "A" + id, Sequence: 1, Status: st, Published: st == "Published"})
		}
		return o
	}

	t.Run("only not converged", func(t *testing.T) {
		o := many(3, "Pending", 2)
		inv := find(Invariants(o, nil), NoLost)
		assert.False(t, inv.OK)
		assert.True(t, inv.Unconverged)
		require.Len(t, inv.Violations, 1)
		v := inv.Violations[0]
		assert.Equal(t, "not-converged", v.Kind)
		assert.Equal(t, map[result.Stage][]string{result.StageQueued: {"E00", "E01"}, result.StageInOutbox: {"E02"}}, v.Stages)
		assert.Equal(t, 0, Counts(o).Lost, "not converged is not lost")
		s := result.Scenario{Invariants: Invariants(o, nil)}
		verdict, reason := s.Judge(result.Ending{})
		// The stuck row still fails the run (outbox-truth); without it the
		// run would be indeterminate.
		assert.Equal(t, result.Fail, verdict)
		assert.NotContains(t, reason, "no-lost-event")
		assert.False(t, s.HasViolation("lost"))
	})

	t.Run("only queued: indeterminate", func(t *testing.T) {
		o := many(2, "Published", 2)
		s := result.Scenario{Invariants: Invariants(o, nil)}
		verdict, reason := s.Judge(result.Ending{})
		assert.Equal(t, result.Indeterminate, verdict)
		assert.Contains(t, reason, "did not converge: 2 still-queued (")
	})

	// A consumer that stores first and applies later, judged from what one
	// run recorded: E00 delivered and acked, its effect not applied yet.
	// Listed by the contract's inbox_pending query it is still the
	// consumer's work (the run indeterminate); not listed, it is lost.
	applyLater := func(listed bool) *history.Record {
		o := many(1, "Published", 0)
		o.Log = append(o.Log, ev(150, "inventory", eventlog.Delivered, "E00", ""), ev(151, "inventory", eventlog.Acked, "E00", ""))
		o.InboxPending = []string{}
		if listed {
			o.InboxPending = []string{"E00"}
		}
		return o
	}
	t.Run("pending in the inbox: indeterminate, not lost", func(t *testing.T) {
		o := applyLater(true)
		inv := find(Invariants(o, nil), NoLost)
		assert.True(t, inv.Unconverged)
		require.Len(t, inv.Violations, 1)
		assert.Equal(t, "not-converged", inv.Violations[0].Kind)
		assert.Equal(t, map[result.Stage][]string{result.StageInInbox: {"E00"}}, inv.Violations[0].Stages)
		assert.Contains(t, inv.Detail, "1 still-in-inbox")
		assert.Equal(t, 0, Counts(o).Lost)
		s := result.Scenario{Invariants: Invariants(o, nil)}
		verdict, _ := s.Judge(result.Ending{})
		assert.Equal(t, result.Indeterminate, verdict)
		assert.False(t, s.HasViolation("lost"))
	})
	t.Run("not in the inbox's pending list: lost", func(t *testing.T) {
		o := applyLater(false)
		inv := find(Invariants(o, nil), NoLost)
		assert.False(t, inv.Unconverged)
		require.Len(t, inv.Violations, 1)
		assert.Equal(t, map[result.Stage][]string{result.StageConsumedNoEffect: {"E00"}}, inv.Violations[0].Stages)
		assert.Equal(t, 1, Counts(o).Lost)
		s := result.Scenario{Invariants: Invariants(o, nil)}
		verdict, _ := s.Judge(result.Ending{})
		assert.Equal(t, result.Fail, verdict)
		assert.True(t, s.HasViolation("lost"))
	})

	t.Run("lost beside not converged", func(t *testing.T) {
		o := many(30, "Published", 1) // E00 queued, E01..E29 skipped
		inv := find(Invariants(o, nil), NoLost)
		assert.False(t, inv.OK)
		assert.False(t, inv.Unconverged, "a lost event fails the run")
		require.Len(t, inv.Violations, 2)
		lost, pending := inv.Violations[0], inv.Violations[1]
		assert.Equal(t, "lost", lost.Kind)
		assert.Len(t, lost.EventIDs, maxNamedInReport, "the message names a few")
		require.Len(t, lost.Stages, 1)
		assert.Len(t, lost.Stages[result.StageSkipped], 29, "the stages name them all")
		assert.Contains(t, lost.Message, "29 committed events never took effect (29 skipped)")
		assert.Equal(t, "not-converged", pending.Kind)
		assert.Equal(t, map[result.Stage][]string{result.StageQueued: {"E00"}}, pending.Stages)
		assert.Equal(t, 29, Counts(o).Lost)
	})
}
