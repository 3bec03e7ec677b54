package check

import (
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// maxTraces bounds the eventIds a timeline follows.
const maxTraces = 6

// BuildTimeline turns the merged logs and the faults into the data of a
// scenario's timeline picture: a lane per process with its crash points and
// restarts, the faults as spans, the event rate, and the eventIds involved.
func BuildTimeline(o *history.Record, start, end time.Time, faults []result.Fault, invs []result.Invariant) *result.Timeline {
	ms := func(t time.Time) int64 { return t.Sub(start).Milliseconds() }
	tl := &result.Timeline{StartedAt: start, EndMS: ms(end)}

	lanes := map[string]*result.Lane{}
	var order []string
	lane := func(p string) *result.Lane {
		if l, ok := lanes[p]; ok {
			return l
		}
		lanes[p] = &result.Lane{Process: p}
		order = append(order, p)
		return lanes[p]
	}
	started := map[string]int{}
	for _, e := range o.Log {
		switch e.Event {
		case eventlog.Started:
			started[e.Process]++
			kind := "started"
			if started[e.Process] > 1 {
				kind = "restarted"
			}
			lane(e.Process).Marks = append(lane(e.Process).Marks, result.Mark{AtMS: ms(e.Time), Kind: kind, Label: e.Detail})
		case eventlog.CrashPoint:
			lane(e.Process).Marks = append(lane(e.Process).Marks, result.Mark{AtMS: ms(e.Time), Kind: e.Action, Label: fmt.Sprintf("%s hit %d: %s", e.Point, e.Hit, e.Action)})
		case eventlog.Disconnected:
			lane(e.Process).Marks = append(lane(e.Process).Marks, result.Mark{AtMS: ms(e.Time), Kind: "disconnected", Label: e.Detail + " " + e.Error})
		default:
			lane(e.Process)
		}
	}
	// The infrastructure's state, as the faults read it, in lanes of their
	// own after the processes'.
	for _, f := range faults {
		for _, s := range f.States {
			l := lane(s.Lane)
			l.Marks = append(l.Marks, result.Mark{AtMS: ms(s.At), Kind: s.Kind, Label: s.Label})
		}
	}
	for _, p := range order {
		tl.Lanes = append(tl.Lanes, *lanes[p])
	}

	var first, last time.Time
	for _, f := range faults {
		if f.Start.IsZero() {
			continue
		}
		tl.Faults = append(tl.Faults, result.Span{Kind: f.Kind, Target: f.Target, Label: f.Detail, StartMS: ms(f.Start), EndMS: ms(f.End)})
		if first.IsZero() || f.Start.Before(first) {
			first = f.Start
		}
		if f.End.After(last) {
			last = f.End
		}
	}

	// Rate: at most ~120 buckets of at least 250 ms.
	span := max(tl.EndMS, 1)
	tl.BucketMS = max(250, (span+119)/120)
	buckets := map[int64]*result.Bucket{}
	var before, during, after int
	for _, e := range o.Log {
		if e.Event != eventlog.Committed && e.Event != eventlog.Published && e.Event != eventlog.Reserved {
			continue
		}
		at := ms(e.Time)
		if at < 0 {
			continue
		}
		k := at / tl.BucketMS
		b, ok := buckets[k]
		if !ok {
			b = &result.Bucket{AtMS: k * tl.BucketMS}
			buckets[k] = b
		}
		switch e.Event {
		case eventlog.Committed:
			b.Committed++
		case eventlog.Published:
			b.Published++
		case eventlog.Reserved:
			b.Reserved++
			switch {
			case first.IsZero() || e.Time.Before(first):
				before++
			case e.Time.After(last):
				after++
			default:
				during++
			}
		}
	}
	for k := int64(0); k*tl.BucketMS <= span; k++ {
		if b, ok := buckets[k]; ok {
			tl.Rate = append(tl.Rate, *b)
		} else {
			tl.Rate = append(tl.Rate, result.Bucket{AtMS: k * tl.BucketMS})
		}
	}
	perSecond := func(n int, from, to time.Time) float64 {
		d := to.Sub(from).Seconds()
		if d <= 0 {
			return 0
		}
		return float64(n) / d
	}
	if first.IsZero() {
		tl.RateBefore = perSecond(before, start, end)
	} else {
		tl.RateBefore = perSecond(before, start, first)
		tl.RateDuring = perSecond(during, first, last)
		tl.RateAfter = perSecond(after, last, end)
	}
	tl.Traces = traces(o, start, invs)
	return tl
}

// traces picks the eventIds worth following: violations first, then the
// events that show a window opening.
func traces(o *history.Record, start time.Time, invs []result.Invariant) []result.Trace {
	var out []result.Trace
	picked := map[string]bool{}
	add := func(id, why string) {
		if id == "" || picked[id] || len(out) >= maxTraces {
			return
		}
		picked[id] = true
		t := result.Trace{EventID: id, Why: why}
		for _, e := range o.ByEvent[id] {
			t.Steps = append(t.Steps, result.Step{AtMS: e.Time.Sub(start).Milliseconds(), Process: e.Process, Event: e.Event, ClaimID: e.ClaimID, Detail: stepDetail(e)})
		}
		out = append(out, t)
	}
	for _, inv := range invs {
		if inv.OK {
			continue
		}
		for _, v := range inv.Violations {
			for _, id := range v.EventIDs {
				add(id, v.Kind)
			}
		}
	}
	interesting := []struct{ event, why string }{
		{eventlog.Fenced, "fenced write"},
		{eventlog.Duplicate, "duplicate absorbed"},
		{eventlog.Unknown, "unknown outcome"},
		{eventlog.ClaimLost, "claim lost"},
		{eventlog.HeldBack, "held back"},
		{eventlog.Returned, "returned"},
		{eventlog.Nacked, "nacked"},
		{eventlog.FailedAlert, "failed with alert"},
	}
	// One pass for the first line of each of these events: most of them
	// never happen in a run, and a pass each would read the whole log.
	first := make(map[string]string, len(interesting))
	for i := range o.Log {
		e := &o.Log[i]
		for _, want := range interesting {
			if e.Event == want.event {
				if _, ok := first[e.Event]; !ok {
					first[e.Event] = e.EventID
				}
				break
			}
		}
	}
	for _, want := range interesting {
		if id, ok := first[want.event]; ok {
			add(id, want.why)
		}
	}
	return out
}

func stepDetail(e eventlog.Entry) string {
	switch {
	case e.Redelivered:
		return "redelivered"
	case e.Error != "":
		return e.Error
	default:
		return e.Detail
	}
}
