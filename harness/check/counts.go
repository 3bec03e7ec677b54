package check

import (
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// Counts measures the run from its record.
func Counts(o *history.Record) result.Counts { return counts(o, findingsOf(o)) }

func counts(o *history.Record, f findings) result.Counts {
	c := result.Counts{Events: len(o.Facts), Reservations: len(o.Effects)}
	aggregates := make(map[string]bool, len(o.Facts))
	for _, f := range o.Facts {
		aggregates[f.AggregateID] = true
	}
	c.Orders = len(aggregates)
	// One entry per eventId: sized for them up front, not grown line by line.
	published := make(map[string]int, len(o.ByEvent))
	delivered := make(map[string]int, len(o.ByEvent))
	for _, e := range o.Log {
		switch e.Event {
		case eventlog.Published:
			c.Published++
			published[e.EventID]++
		case eventlog.Confirmed:
			c.Confirmed++
		case eventlog.Returned:
			c.Returned++
		case eventlog.Nacked:
			c.Nacked++
		case eventlog.Unknown:
			c.Unknown++
		case eventlog.Retry:
			c.Retries++
		case eventlog.Delivered:
			c.Delivered++
			delivered[e.EventID]++
			if e.Redelivered {
				c.Redelivered++
			}
		case eventlog.DeadLettered:
			c.DeadLettered++
		case eventlog.Duplicate:
			c.DuplicatesAbsorbed++
		case eventlog.Fenced:
			c.FencedWrites++
		case eventlog.HeldBack:
			c.HeldBack++
		case eventlog.CrashPoint:
			c.CrashPointHits++
		}
	}
	for _, n := range published {
		c.DuplicatesPublished += n - 1
	}
	if len(published) == 0 && o.Tap != nil {
		// no relay event log: what the tap saw routed
		c.DuplicatesPublished, _ = TapDuplicates(o)
		for _, n := range o.Tap {
			c.Published += n
		}
	}
	if c.Redelivered == 0 {
		c.Redelivered = o.Queue.Redelivered
	}
	for id, n := range delivered {
		if id != "" {
			c.DuplicatesDelivered += n - 1
		}
	}
	for _, r := range o.Outbox {
		switch r.Status {
		case "Failed":
			c.Failed++
		case "Pending", "Processing":
			c.StuckRows++
		}
	}
	c.DuplicateEffects = f.extraEffects
	c.StaleWrites = len(f.staleWrites)
	lost, _ := f.placed.split()
	c.Lost = len(lost.ids()) // not those still queued or in the outbox: the run did not converge
	c.Phantom = len(f.phantoms)
	return c
}
