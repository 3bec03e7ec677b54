package check

import (
	"fmt"
	"sort"
	"testing"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// benchEvents is the size of the run the checker benchmarks look at.
const benchEvents = 10_000

// bigRecord is the end state of a run of n events (n/4 orders of four
// events each) as Observe leaves it: every event committed, claimed,
// published, confirmed and marked by a relay, delivered, reserved and acked
// by the inventory. Every 50th event's first claim never learnt its outcome
// and another relay took it over after the lease (republished, delivered
// twice, the duplicate absorbed), and every 100th of those stale claims
// tried a late write that was fenced. lost drops every lost-th reservation
// (0: none), so that no-lost-event fails.
func bigRecord(n, lost int) *history.Record {
	orders := map[string]int64{}
	var outbox []history.OutboxRow
	var res []history.Effect
	var log []eventlog.Entry
	const perOrder = 4
	for i := range n {
		id := fmt.Sprintf("01J9ZQ4N8W3K5V7X2Y%06d", i)
		agg := fmt.Sprintf("ORD-%06d", i/perOrder)
		seq := int64(i%perOrder + 1)
		orders[agg] = seq
		outbox = append(outbox, history.OutboxRow{EventID: id, AggregateID: agg, Sequence: seq, Status: "Published", Published: true, Attempts: 1})
		ms := i * 3 // an event every 3 ms, its lines a few ms apart
		claim := fmt.Sprintf("relay-%d:c%d", 1+i/100%2, i/100)
		relay := claim[:7]
		line := func(at int, process, event, claim string) {
			e := ev(at, process, event, id, claim)
			e.AggregateID, e.Sequence = agg, seq
			log = append(log, e)
		}
		line(ms, "order", eventlog.Committed, "")
		line(ms+1, relay, eventlog.Claimed, claim)
		line(ms+2, relay, eventlog.Published, claim)
		delivered := 1
		if i%50 == 0 {
			line(ms+3, relay, eventlog.Unknown, claim)
			stale := claim
			claim = fmt.Sprintf("relay-3:r%d", i)
			relay = "relay-3"
			ms += 2000 // the lease ran out
			line(ms+1, relay, eventlog.Claimed, claim)
			line(ms+2, relay, eventlog.Published, claim)
			if i%100 == 0 {
				line(ms+3, stale[:7], eventlog.Fenced, stale)
			}
			delivered = 2
		}
		line(ms+4, relay, eventlog.Confirmed, claim)
		line(ms+5, relay, eventlog.Marked, claim)
		line(ms+6, "inventory", eventlog.Delivered, "")
		if lost == 0 || i%lost != 0 {
			line(ms+7, "inventory", eventlog.Reserved, "")
			res = append(res, history.Effect{ID: int64(len(res) + 1), EventID: id, AggregateID: agg, Sequence: seq, EventType: "order.created"})
		}
		line(ms+8, "inventory", eventlog.Acked, "")
		if delivered == 2 {
			line(ms+9, "inventory", eventlog.Delivered, "")
			line(ms+10, "inventory", eventlog.Duplicate, "")
			line(ms+11, "inventory", eventlog.Acked, "")
		}
	}
	sort.SliceStable(log, func(i, j int) bool { return log[i].Time.Before(log[j].Time) }) // merged as observe.ReadLogs does
	return obs(orders, outbox, res, log...)
}

func reportEvents(b *testing.B) {
	b.ReportMetric(float64(b.N*benchEvents)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkInvariants: every invariant (per-aggregate order included) over
// a run of 10,000 events (about 82,000 log lines). clean passes them all;
// lost-1pct fails no-lost-event with 100 events and renders its timeline;
// scan-log is the floor, one pass over the merged log (Record.Count).
func BenchmarkInvariants(b *testing.B) {
	clean := bigRecord(benchEvents, 0)
	b.Run("clean", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, inv := range Invariants(clean, []string{AggregateOrder}) {
				if !inv.OK {
					b.Fatalf("%s: %s", inv.Name, inv.Detail)
				}
			}
		}
		reportEvents(b)
	})
	b.Run("lost-1pct", func(b *testing.B) {
		o := bigRecord(benchEvents, 100)
		b.ReportAllocs()
		for b.Loop() {
			if inv := find(Invariants(o, []string{AggregateOrder}), NoLost); inv.OK {
				b.Fatal("no-lost-event passed with events lost")
			}
		}
		reportEvents(b)
	})
	b.Run("scan-log", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if clean.Count(eventlog.Marked) != benchEvents {
				b.Fatal("marked lines miscounted")
			}
		}
		reportEvents(b)
	})
}

// BenchmarkCounts: the run's figures over the same 10,000 events.
func BenchmarkCounts(b *testing.B) {
	o := bigRecord(benchEvents, 0)
	b.ReportAllocs()
	for b.Loop() {
		if c := Counts(o); c.DuplicatesAbsorbed != benchEvents/50 {
			b.Fatalf("duplicates absorbed: %d", c.DuplicatesAbsorbed)
		}
	}
	reportEvents(b)
}

// BenchmarkBuildTimeline: the report's timeline of the same run, with one
// fault span.
func BenchmarkBuildTimeline(b *testing.B) {
	o := bigRecord(benchEvents, 0)
	end := o.Log[len(o.Log)-1].Time
	faults := []result.Fault{{Kind: "crash", Target: "relay-1", Start: at(10_000), End: at(12_000)}}
	invs := Invariants(o, nil)
	b.ReportAllocs()
	for b.Loop() {
		if tl := BuildTimeline(o, t0, end, faults, invs); len(tl.Traces) == 0 {
			b.Fatal("no traces")
		}
	}
	reportEvents(b)
}
