package runner

import (
	"strings"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/observe"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
)

// observeNeeds are what a run needs watched from outside: what its faults
// are timed by and its evidence read from.
func observeNeeds(evidence []check.Evidence, faults []fault.Fault) map[history.Source]bool {
	need := map[history.Source]bool{}
	for _, e := range evidence {
		for _, n := range e.Needs {
			if observe.WhenRead(n) == observe.Live {
				need[n] = true
			}
		}
	}
	for s := range fault.ObservedBy(faults) {
		need[s] = true
	}
	return need
}

// watches says whether the run installs the observers: when it needs them,
// or when the target's relays write no event log (then fencing rests on the
// audit trail, and the publishes are counted by the tap). A run of a target
// that speaks the protocol and needs none of it installs nothing: no
// trigger slows the target's writes, no tap doubles its routing.
func (r *run) watches(need map[history.Source]bool) bool {
	return len(need) > 0 || !r.logRoles()[protocol.Relay]
}

// unopenedOutage says why an outage of the run judged by the relays'
// retries ended without opening its window ("" if none did), from the
// faults' results.
func unopenedOutage(results []result.Fault) string {
	for _, r := range results {
		if r.ByRetries && !r.Hit && strings.HasPrefix(r.Error, "window not opened: ") {
			return strings.TrimPrefix(r.Error, "window not opened: ")
		}
	}
	return ""
}

// poisoned counts the malformed messages the run's faults published and
// the broker confirmed, from their results.
func poisoned(results []result.Fault) int {
	n := 0
	for _, r := range results {
		n += r.Poisoned
	}
	return n
}

// unboundSpans are the spans in which a fault of the run held the queue
// without its bindings, from the faults' results: from its start to its
// end, or to the end of the run if it never bound it again.
func unboundSpans(results []result.Fault) []history.Interval {
	var out []history.Interval
	for _, r := range results {
		if !r.Unbound {
			continue
		}
		iv := history.Interval{Start: r.Start}
		if r.Rebound {
			iv.End = r.End
		}
		out = append(out, iv)
	}
	return out
}
