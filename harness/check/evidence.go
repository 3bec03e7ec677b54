package check

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// Evidence is something a scenario must see to show its window opened.
type Evidence struct {
	Name string
	// Needs are what the evidence is read from; a target that does not
	// give one of them cannot show it, and the scenario is not run there —
	// unless the evidence is Optional: then it is reported not checked on
	// such a target, and the scenario rests on its faults and invariants.
	Needs    []history.Source
	Optional bool
	Check    func(o *history.Record) (seen bool, detail string)
	// Else is what shows the same where the target does not give Needs
	// (an event log, mostly): a black-box source, read instead (Resolve).
	Else *Evidence
	// Unchecked, when set, is why the evidence is not checked at all: what
	// the run rests on instead (the fault's own result, the invariants).
	Unchecked string
	// Window is the crash point window the evidence shows was hit ("" for
	// none): where the run opens that window from outside, no crash point
	// announces it, and Else is read instead.
	Window string
}

// Optional is e where the target gives what it needs, not checked elsewhere.
func Optional(e Evidence) Evidence {
	e.Optional = true
	return e
}

// writerOf is the role that logs an event.
func writerOf(event string) history.Source {
	switch event {
	case eventlog.Committed:
		return history.SourceProducerLog
	case eventlog.Claimed, eventlog.Published, eventlog.Returned, eventlog.Confirmed, eventlog.Nacked, eventlog.Unknown,
		eventlog.Marked, eventlog.Fenced, eventlog.Retry, eventlog.FailedAlert, eventlog.Renewed, eventlog.ClaimLost:
		return history.SourceRelayLog
	default:
		return history.SourceConsumerLog
	}
}

// Evaluate runs the evidence checks.
func Evaluate(o *history.Record, evidence []Evidence) []result.Evidence {
	out := make([]result.Evidence, 0, len(evidence))
	for _, e := range evidence {
		if e.Unchecked != "" {
			out = append(out, result.Evidence{Name: e.Name, NotChecked: true, Detail: "not checked: " + e.Unchecked})
			continue
		}
		if missing := missingNeed(o, e); e.Optional && missing != "" {
			out = append(out, result.Evidence{Name: e.Name, NotChecked: true, Detail: "not checked: the target gives no " + missing})
			continue
		}
		seen, detail := e.Check(o)
		out = append(out, result.Evidence{Name: e.Name, Seen: seen, Detail: detail})
	}
	return out
}

// missingNeed names the first need of e the record does not hold.
func missingNeed(o *history.Record, e Evidence) string {
	for _, n := range e.Needs {
		if !o.Observed(n) {
			return string(n)
		}
	}
	return ""
}

// AtLeast: at least n log lines of the event.
func AtLeast(n int, event string) Evidence {
	return Evidence{
		Else:  atLeastElse(event),
		Name:  fmt.Sprintf("at least %d %q", n, event),
		Needs: []history.Source{writerOf(event)},
		Check: func(o *history.Record) (bool, string) {
			c := o.Count(event)
			return c >= n, fmt.Sprintf("%d seen", c)
		},
	}
}

// CrashPointHit: the crash point at the window was hit (its process
// announced it on its event log; the harness translated its name).
func CrashPointHit(point string) Evidence {
	role, _, _ := strings.Cut(point, ".")
	return Evidence{
		Else:   shownByFault("crash point " + point + " hit"),
		Window: point,
		Name:   "crash point " + point + " hit",
		Needs:  []history.Source{history.LogSource(role)},
		Check: func(o *history.Record) (bool, string) {
			for _, e := range o.Log {
				if e.Event == eventlog.CrashPoint && e.Point == point {
					return true, fmt.Sprintf("%s hit %d in %s (%s)", point, e.Hit, e.Process, e.Action)
				}
			}
			return false, "no crashpoint line"
		},
	}
}

// claimsOf lists the distinct claim ids of an event's lines of one kind, in order.
func claimsOf(entries []eventlog.Entry, event string) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Event == event && e.ClaimID != "" && !seen[e.ClaimID] {
			seen[e.ClaimID] = true
			out = append(out, e.ClaimID)
		}
	}
	return out
}

// firstEvent finds the first event id matching pred, in log order.
func firstEvent(o *history.Record, pred func(entries []eventlog.Entry) bool) (string, bool) {
	for _, e := range o.Log {
		if e.EventID == "" {
			continue
		}
		if pred(o.ByEvent[e.EventID]) {
			return e.EventID, true
		}
	}
	return "", false
}

// ReclaimedAfterLease: a row claimed by one claim was claimed again by
// another claim without the first having written anything to it: the lease
// ran out and another claim took the row over.
func ReclaimedAfterLease() Evidence {
	return Evidence{
		Else:  ptr(ReclaimedByAnother()),
		Name:  "a claimed row claimed again after its lease ran out",
		Needs: []history.Source{history.SourceRelayLog},
		Check: func(o *history.Record) (bool, string) {
			id, ok := firstEvent(o, func(entries []eventlog.Entry) bool {
				open := ""
				for _, e := range entries {
					switch e.Event {
					case eventlog.Claimed:
						if open != "" && open != e.ClaimID {
							return true
						}
						open = e.ClaimID
					case eventlog.Marked, eventlog.Retry, eventlog.FailedAlert:
						if e.ClaimID == open {
							open = ""
						}
					}
				}
				return false
			})
			if !ok {
				return false, "no row was claimed twice"
			}
			return true, fmt.Sprintf("%s claimed by %d claims", id, len(claimsOf(o.ByEvent[id], eventlog.Claimed)))
		},
	}
}

// Republished: the same eventId was published by two different claims.
func Republished() Evidence {
	return Evidence{
		Else:  ptr(RoutedTwice()),
		Name:  "the same eventId published again by another claim",
		Needs: []history.Source{history.SourceRelayLog},
		Check: func(o *history.Record) (bool, string) {
			id, ok := firstEvent(o, func(entries []eventlog.Entry) bool {
				return len(claimsOf(entries, eventlog.Published)) >= 2
			})
			if !ok {
				return false, "every eventId was published by one claim"
			}
			return true, id
		},
	}
}

// UnknownRepublished: a claim published an event and never learnt its
// outcome (unknown-outcome), never marked it, and another claim published
// the same eventId (before or after the first gave up waiting).
func UnknownRepublished() Evidence {
	return Evidence{
		Else:  ptr(RoutedTwice()),
		Name:  "an unknown outcome republished with the same eventId",
		Needs: []history.Source{history.SourceRelayLog},
		Check: func(o *history.Record) (bool, string) {
			id, ok := firstEvent(o, func(entries []eventlog.Entry) bool {
				unknown := map[string]bool{}
				marked := map[string]bool{}
				for _, e := range entries {
					switch e.Event {
					case eventlog.Unknown:
						unknown[e.ClaimID] = true
					case eventlog.Marked:
						marked[e.ClaimID] = true
					}
				}
				for claim := range unknown {
					if marked[claim] {
						continue
					}
					for _, other := range claimsOf(entries, eventlog.Published) {
						if other != claim {
							return true
						}
					}
				}
				return false
			})
			if !ok {
				return false, fmt.Sprintf("%d unknown outcomes, none republished", o.Count(eventlog.Unknown))
			}
			return true, id
		},
	}
}

// DuplicateAbsorbed: the inbox recognised at least one duplicate delivery.
func DuplicateAbsorbed() Evidence {
	return Evidence{
		Else:  ptr(duplicateRouted()),
		Name:  "a duplicate delivery absorbed by the inbox",
		Needs: []history.Source{history.SourceConsumerLog},
		Check: func(o *history.Record) (bool, string) {
			n := o.Count(eventlog.Duplicate)
			return n > 0, fmt.Sprintf("%d duplicates absorbed", n)
		},
	}
}

// TwoCopiesInOneBatch: the consumer logged two deliveries of one eventId
// with nothing of that event between them (no outcome: the first was not
// yet reserved, held back or found a duplicate) and no start or
// reconnection of its own: both were in the batch it took.
func TwoCopiesInOneBatch() Evidence {
	return Optional(Evidence{
		Name:  "two copies of one eventId in one consumer batch",
		Needs: []history.Source{history.SourceConsumerLog},
		Check: func(o *history.Record) (bool, string) {
			ids := InBatchCopies(o)
			if len(ids) == 0 {
				return false, "no consumer batch held two copies of one eventId"
			}
			return true, fmt.Sprintf("%d eventIds twice in one batch: %v", len(ids), capList(ids))
		},
	})
}

// InBatchCopies are the eventIds the consumer logged delivered twice in
// one batch (TwoCopiesInOneBatch), in the order seen.
func InBatchCopies(o *history.Record) []string {
	open := map[string]bool{} // delivered, no outcome yet, since the process last (re)connected
	var out []string
	seen := map[string]bool{}
	for _, e := range o.Log {
		if e.Process != o.Instance("consumer") {
			continue
		}
		switch e.Event {
		case eventlog.Started, eventlog.Connected, eventlog.Disconnected:
			clear(open)
		case eventlog.Delivered:
			if open[e.EventID] && e.EventID != "" && !seen[e.EventID] {
				seen[e.EventID] = true
				out = append(out, e.EventID)
			}
			open[e.EventID] = true
		default:
			delete(open, e.EventID)
		}
	}
	return out
}

// RedeliveryAbsorbed: a delivery flagged redelivered (broker-side) whose
// eventId the inbox already had.
func RedeliveryAbsorbed() Evidence {
	return Evidence{
		Else:  ptr(redeliveryAbsorbedElse()),
		Name:  "a redelivered message absorbed by the inbox",
		Needs: []history.Source{history.SourceConsumerLog},
		Check: func(o *history.Record) (bool, string) {
			id, ok := firstEvent(o, func(entries []eventlog.Entry) bool {
				redelivered := false
				for _, e := range entries {
					if e.Event == eventlog.Delivered && e.Redelivered {
						redelivered = true
					}
					if e.Event == eventlog.Duplicate && redelivered {
						return true
					}
				}
				return false
			})
			if !ok {
				return false, fmt.Sprintf("%d redeliveries, none absorbed", o.Count(eventlog.Delivered))
			}
			return true, id
		},
	}
}

// Redelivered: at least one delivery flagged redelivered.
func Redelivered() Evidence {
	return Evidence{
		Else:  ptr(redeliveredElse()),
		Name:  "a message redelivered by the broker",
		Needs: []history.Source{history.SourceConsumerLog},
		Check: func(o *history.Record) (bool, string) {
			n := 0
			for _, e := range o.Log {
				if e.Event == eventlog.Delivered && e.Redelivered {
					n++
				}
			}
			return n > 0, fmt.Sprintf("%d redeliveries", n)
		},
	}
}

// DeadLettered: exactly n messages in the dead-letter queue, each logged.
func DeadLettered(n int) Evidence {
	return Evidence{
		Else:  ptr(DeadLetterQueueHolds(n)),
		Name:  fmt.Sprintf("%d poison messages dead-lettered", n),
		Needs: []history.Source{history.SourceConsumerLog, history.SourceDLQ},
		Check: func(o *history.Record) (bool, string) {
			logged := o.Count(eventlog.DeadLettered)
			return logged >= n && o.DeadLetter.Queue.Messages == n, fmt.Sprintf("%d logged, %d in the dead-letter queue", logged, o.DeadLetter.Queue.Messages)
		},
	}
}

// PoisonBehindValid: the consumer dead-lettered a message while a delivery
// of another event it took before that message was still without an
// outcome (delivered, not yet reserved, absorbed, acked or dead-lettered;
// no start or reconnection between): a reject with multiple set would have
// taken that delivery with it. It reads one process's log, so it speaks of
// one channel only where the consumer has one. Where the consumer logs no
// delivery of the message it dead-letters (a poison it could not read an
// eventId from), any delivery open at the time counts: the log does not
// say which was taken first.
func PoisonBehindValid() Evidence {
	return Optional(Evidence{
		Name:  "a message dead-lettered behind an earlier delivery still open",
		Needs: []history.Source{history.SourceConsumerLog},
		Check: func(o *history.Record) (bool, string) {
			ids := DeadLetteredBehindOpen(o)
			if len(ids) == 0 {
				return false, "every message dead-lettered was the oldest delivery without an outcome"
			}
			return true, fmt.Sprintf("%d dead-lettered behind an open delivery: %v", len(ids), capList(ids))
		},
	})
}

// DeadLetteredBehindOpen are the ids the consumer logged dead-lettered
// while a delivery of another event taken before theirs had no outcome yet
// (PoisonBehindValid), in the order seen.
func DeadLetteredBehindOpen(o *history.Record) []string {
	type delivery struct {
		id string
		at int
	}
	var open []delivery // delivered, no outcome yet, in delivery order
	var out []string
	drop := func(id string) (at int, ok bool) {
		if id == "" {
			return 0, false
		}
		for i, d := range open {
			if d.id == id {
				open = append(open[:i], open[i+1:]...)
				return d.at, true
			}
		}
		return 0, false
	}
	for i, e := range o.Log {
		if e.Process != o.Instance("consumer") {
			continue
		}
		switch e.Event {
		case eventlog.Started, eventlog.Connected, eventlog.Disconnected:
			open = open[:0]
		case eventlog.Delivered:
			drop(e.EventID) // a redelivery is the newer delivery
			open = append(open, delivery{id: e.EventID, at: i})
		case eventlog.DeadLettered:
			at, ok := drop(e.EventID)
			if len(open) > 0 && (!ok || open[0].at < at) {
				out = append(out, cmp.Or(e.EventID, "(no eventId)"))
			}
		default:
			if e.EventID != "" {
				drop(e.EventID)
			}
		}
	}
	return out
}

// FailedFlagged: n or more rows Failed, each with an alert line.
func FailedFlagged(n int) Evidence {
	return Evidence{
		Else:  ptr(failedInOutbox(n)),
		Name:  fmt.Sprintf("at least %d rows Failed with an alert", n),
		Needs: []history.Source{history.SourceRelayLog, history.SourceOutbox},
		Check: func(o *history.Record) (bool, string) {
			alerted := map[string]bool{}
			for _, e := range o.Log {
				if e.Event == eventlog.FailedAlert {
					alerted[e.EventID] = true
				}
			}
			failed, withAlert := 0, 0
			for _, r := range o.Outbox {
				if r.Status == "Failed" {
					failed++
					if alerted[r.EventID] {
						withAlert++
					}
				}
			}
			return failed >= n && withAlert == failed, fmt.Sprintf("%d Failed, %d with an alert", failed, withAlert)
		},
	}
}

// Custom wraps a predicate that reads what needs name.
func Custom(name string, fn func(o *history.Record) (bool, string), needs ...history.Source) Evidence {
	return Evidence{Name: name, Needs: needs, Check: fn}
}
