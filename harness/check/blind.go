package check

import (
	"fmt"
	"slices"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// Evidence without an event log: each piece of evidence read from a
// process's event log names, in Else, what shows the same from outside —
// the broker's counters, the tap queue, the audit trail of the outbox, the
// outbox itself — or, where nothing outside shows it, why it is not
// checked and what the run rests on instead. Resolve picks, per target,
// the first of them whose needs the target gives.

// Resolve is the evidence as the target can show it: each piece whose
// needs gives does not give, or that shows a crash point hit at a window
// the run opens from outside (no crash point there to announce it), is
// replaced by its Else, as many times as it takes; one with no Else stays
// as it is (and the run is not run there, unless it is Optional, saying
// which need is missing).
func Resolve(evidence []Evidence, gives func(history.Source) bool, fromOutside []string) []Evidence {
	out := make([]Evidence, 0, len(evidence))
	seen := map[string]bool{}
	for _, e := range evidence {
		fallback := false
		for e.Else != nil && (!givesAll(e, gives) || slices.Contains(fromOutside, e.Window) && e.Window != "") {
			e, fallback = *e.Else, true
		}
		if need := missingGiven(e, gives); fallback && need != "" {
			// The source outside that stands in for a log this target
			// lacks is one it lacks too (an audit trail without a status
			// column: an offset or log relay's outbox): nothing shows it.
			e = Evidence{Name: e.Name, Unchecked: "the target gives no " + string(need) + "; the run rests on the fault's result and the invariants"}
		}
		if !seen[e.Name] { // two log lines shown by one source: checked once
			seen[e.Name] = true
			out = append(out, e)
		}
	}
	return out
}

func givesAll(e Evidence, gives func(history.Source) bool) bool { return missingGiven(e, gives) == "" }

// missingGiven is the first of e's needs the target does not give ("" if
// it gives them all).
func missingGiven(e Evidence, gives func(history.Source) bool) history.Source {
	for _, n := range e.Needs {
		if !gives(n) {
			return n
		}
	}
	return ""
}

// ShownByFault is evidence that only the fault's own result can give: the
// window was opened from outside (no crash point announced it), and that
// result — the commit seen, the transaction held, the deliveries held
// unacked — says what was seen; a fault that saw nothing makes the run
// indeterminate.
func ShownByFault(name string) Evidence {
	return Evidence{Name: name, Unchecked: "no crash point announces it: the window was opened from outside, and the fault's result shows what faultline saw"}
}

// RestsOnFaultAndInvariants is evidence no source outside the processes
// shows (a process noticing an error, reconnecting): not checked, the run
// rests on its fault, which happened, and on the invariants.
func RestsOnFaultAndInvariants(name string) Evidence {
	return Evidence{Name: name, Unchecked: "only the process's event log shows it, and the target writes none; the run rests on the fault's result and the invariants"}
}

func ptr(e Evidence) *Evidence { return &e }

func shownByFault(name string) *Evidence { return ptr(ShownByFault(name)) }

// atLeastElse is what shows from outside that the relays logged event:
// a publish that came back, was nacked or retried is a row the audit
// trail shows sent back to Pending; an unknown outcome is an eventId the
// tap saw routed twice; a mark is a write to Published; a renewal is a
// Processing row written again under its own claim; a fenced write or a
// renewal that found its claim gone leaves no trace, but the takeover
// that makes one necessary does.
func atLeastElse(event string) *Evidence {
	switch event {
	case eventlog.Returned, eventlog.Retry, eventlog.Nacked:
		return ptr(RetriedInAudit())
	case eventlog.Unknown:
		return ptr(RoutedTwice())
	case eventlog.Fenced, eventlog.ClaimLost:
		return ptr(ReclaimedByAnother())
	case eventlog.Renewed:
		return ptr(RenewedInAudit())
	case eventlog.Marked:
		return ptr(MarkedInAudit())
	case eventlog.HeldBack:
		return ptr(PublishedAheadOfPredecessor())
	}
	return nil
}

// duplicateRouted (black-box): an eventId reached the exchange twice (the
// tap queue); that it took effect once is the no-duplicate invariant's.
func duplicateRouted() Evidence {
	e := RoutedTwice()
	e.Name = "a duplicate routed to the consumer (tap queue), its effect taken once (no-duplicate invariant)"
	return e
}

// redeliveryAbsorbedElse (black-box): the broker redelivered; that the
// redelivery took effect once is the no-duplicate invariant's.
func redeliveryAbsorbedElse() Evidence {
	e := BrokerRedelivered()
	e.Name = "the broker redelivered to the consumer (its redelivery counter), each effect taken once (no-duplicate invariant)"
	return e
}

func redeliveredElse() Evidence { return BrokerRedelivered() }

// DeadLetterQueueHolds (black-box): the broker counts exactly n messages
// in the target's dead-letter queue.
func DeadLetterQueueHolds(n int) Evidence {
	return Evidence{
		Name:  fmt.Sprintf("%d messages in the dead-letter queue (the broker's count)", n),
		Needs: []history.Source{history.SourceDLQ},
		Check: func(o *history.Record) (bool, string) {
			return o.DeadLetter != nil && o.DeadLetter.Queue.Messages == n, fmt.Sprintf("%d in the dead-letter queue", o.DeadLetter.Queue.Messages)
		},
	}
}

// failedInOutbox (black-box): n or more rows end Failed in the outbox, the
// flag an operator sees (no alert line without an event log).
func failedInOutbox(n int) Evidence {
	return Evidence{
		Name:  fmt.Sprintf("at least %d rows Failed in the outbox", n),
		Needs: []history.Source{history.SourceOutbox},
		Check: func(o *history.Record) (bool, string) {
			failed := 0
			for _, r := range o.Outbox {
				if r.Status == "Failed" {
					failed++
				}
			}
			return failed >= n, fmt.Sprintf("%d Failed", failed)
		},
	}
}

// MarkedInAudit (black-box): the audit trail shows rows written Published.
func MarkedInAudit() Evidence {
	return Evidence{
		Name:  "rows marked Published (audit trail)",
		Needs: []history.Source{history.SourceAudit, history.SourceAuditStatus},
		Check: func(o *history.Record) (bool, string) {
			n := 0
			for _, a := range o.Audit.Writes() {
				if a.Op == "UPDATE" && a.NewStatus == "Published" && a.OldStatus != "Published" {
					n++
				}
			}
			return n > 0, fmt.Sprintf("%d Published writes", n)
		},
	}
}

// PublishedAheadOfPredecessor (black-box): the audit trail shows an
// aggregate's event written Published before an earlier event of the same
// aggregate (its sequence, from the outbox) was: the successor went out
// first, so the consumer met it ahead of its predecessor. That it applied
// them in order is the ordering invariant's.
func PublishedAheadOfPredecessor() Evidence {
	return Evidence{
		Name:  "an event published before its predecessor (audit trail and outbox)",
		Needs: []history.Source{history.SourceAudit, history.SourceOutbox},
		Check: func(o *history.Record) (bool, string) {
			first := map[string]int{} // eventId → index of its first Published write
			for i, a := range o.Audit.Writes() {
				if _, ok := first[a.EventID]; !ok && a.Op == "UPDATE" && a.NewStatus == "Published" {
					first[a.EventID] = i
				}
			}
			type step struct {
				seq int64
				id  string
			}
			byAggregate := map[string][]step{}
			for _, r := range o.Outbox {
				byAggregate[r.AggregateID] = append(byAggregate[r.AggregateID], step{r.Sequence, r.EventID})
			}
			for agg, steps := range byAggregate {
				for _, a := range steps {
					for _, b := range steps {
						ia, okA := first[a.id]
						ib, okB := first[b.id]
						if okA && okB && a.seq < b.seq && ib < ia {
							return true, fmt.Sprintf("%s: event %d (%s) published before event %d (%s)", agg, b.seq, b.id, a.seq, a.id)
						}
					}
				}
			}
			return false, fmt.Sprintf("%d events published, each after its predecessors", len(first))
		},
	}
}

// RenewedInAudit (black-box): the audit trail shows a row written again
// while Processing under the same claim — its holder extended its lease
// (the one write a relay makes to a row it holds without changing its
// status or claim).
func RenewedInAudit() Evidence {
	return Evidence{
		Name:  "a lease renewed: a Processing row written again under its own claim (audit trail)",
		Needs: []history.Source{history.SourceAudit, history.SourceAuditStatus},
		Check: func(o *history.Record) (bool, string) {
			for _, a := range o.Audit.Writes() {
				if a.Op == "UPDATE" && a.OldStatus == "Processing" && a.NewStatus == "Processing" && a.NewClaim != "" && a.NewClaim == a.OldClaim {
					return true, fmt.Sprintf("%s renewed under claim %s by %s", a.EventID, a.NewClaim, a.Writer)
				}
			}
			return false, fmt.Sprintf("%d outbox writes audited, no renewal", len(o.Audit.Writes()))
		},
	}
}
