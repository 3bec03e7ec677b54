// Package check judges what a run left, as harness/observe recorded it:
// it checks the invariants of docs/design.md against a run's record
// (harness/history), judges convergence from progress samples, and weighs
// a scenario's evidence. It reads nothing itself. Every result is data
// (result.Invariant, result.Counts), so reports can render it, and every
// verdict says what it rests on: a check with nothing to rest on is "not
// checked", never "ok".
package check

import (
	"time"

	"github.com/faultline-dev/faultline/harness/history"
)

// What a verdict rests on, as result.Invariant.RestsOn names it.
const (
	FromContract = "contract"  // the target's tables, through its contract queries
	FromOutbox   = "outbox"    // the contract's outbox query
	FromEventLog = "event log" // the processes' event logs
	FromBroker   = "broker"    // queue counters
	FromWorkload = "workload"  // the producer's answers to faultline's requests
)

// overlaps reports whether [from, to] meets the interval.
func overlaps(iv history.Interval, from, to time.Time) bool {
	return !to.Before(iv.Start) && (iv.End.IsZero() || !from.After(iv.End))
}
