package check

import (
	"fmt"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// LargestClaim is the most rows one claim took, from the audit trail: the
// rows a write moved to Processing under each new claim id, counted per
// claim id.
func LargestClaim(rows []history.AuditRow) int {
	per := map[string]int{}
	largest := 0
	for _, r := range rows {
		if !r.Claims() {
			continue
		}
		per[r.NewClaim]++
		largest = max(largest, per[r.NewClaim])
	}
	return largest
}

// BacklogReleased is the evidence that the held role was released to the
// backlog its profile asked for.
func BacklogReleased() Evidence {
	return Evidence{Name: "backlog piled up while held", Check: func(o *history.Record) (bool, string) {
		t := o.Traffic
		if t.Held == "" {
			return false, "the run held no role back"
		}
		what := "facts acknowledged while every relay was frozen"
		if t.Held == protocol.Consumer {
			what = "messages waiting for the consumer (ready in its queue, or delivered to it and unacked)"
		}
		if t.Backlog == 0 {
			return false, fmt.Sprintf("the %s was never released to a backlog (%s: none seen)", t.Held, what)
		}
		detail := fmt.Sprintf("%d %s seen while it was held (wanted %d)", t.Backlog, what, t.Want)
		if froze, thawed := t.ConsumersAtFreeze, t.ConsumersAtThaw; froze != nil && thawed != nil && *thawed < *froze {
			detail += fmt.Sprintf("; the queue had %d consumers at the freeze and %d at the thaw: the broker dropped a frozen consumer meanwhile (a fault over the backlog, or heartbeats it missed while frozen), so released it reconnected, and what it held came back redelivered", *froze, *thawed)
		}
		return t.Backlog >= t.Want, detail
	}}
}

// FullPrefetch is the evidence that the held consumer was thawed holding
// its prefetch: just before the thaw the broker had deliveries out to its
// consumers, unacked (as many as their prefetch allows, the rest of the
// backlog ready behind them, or the whole backlog where the prefetch is
// larger). A consumer the broker dropped while frozen holds nothing at
// the thaw: released, it reconnects and is handed its prefetch anew, but
// not at the moment the scenario's fault was armed for.
func FullPrefetch() Evidence {
	return Evidence{Name: "a full prefetch held at the thaw", Check: func(o *history.Record) (bool, string) {
		t := o.Traffic
		if t.Held != protocol.Consumer {
			return false, "the run held no consumer back"
		}
		if t.ReadyAtThaw == nil || t.UnackedAtThaw == nil {
			return false, "the consumer's queue was not read at the thaw"
		}
		ready, unacked := *t.ReadyAtThaw, *t.UnackedAtThaw
		detail := fmt.Sprintf("%d deliveries unacked and %d messages ready behind them at the thaw", unacked, ready)
		if t.ConsumersAtThaw != nil {
			detail += fmt.Sprintf(", %d consumers", *t.ConsumersAtThaw)
		}
		return unacked > 0, detail
	}}
}

// FullClaim is the evidence that a relay claimed a full batch (relay.batch
// rows under one claim id), from the audit trail; optional, as a target
// whose file names no batch, or whose outbox faultline cannot watch, shows
// the backlog only.
func FullClaim() Evidence {
	return Optional(Evidence{Name: "a full claim", Needs: []history.Source{history.SourceAudit, history.SourceAuditStatus}, Check: func(o *history.Record) (bool, string) {
		largest := LargestClaim(o.Audit.Writes())
		if o.Traffic.Batch == 0 {
			return largest > 1, fmt.Sprintf("largest claim %d rows (the target file names no relay.batch to call one full)", largest)
		}
		return largest >= o.Traffic.Batch, fmt.Sprintf("largest claim %d rows of a batch of %d", largest, o.Traffic.Batch)
	}})
}

// ManyInFlight is the evidence of a burst: the clients had at least n
// requests open at once.
func ManyInFlight(n int64) Evidence {
	return Evidence{Name: "a burst of requests", Check: func(o *history.Record) (bool, string) {
		return o.Traffic.MaxInFlight >= n, fmt.Sprintf("%d requests in flight at once (wanted %d)", o.Traffic.MaxInFlight, n)
	}}
}

// SustainedLoad is the evidence of a sustained profile: after its probe
// the clients held at least share of the rate the pipeline carried in it.
func SustainedLoad(share float64) Evidence {
	return Evidence{Name: "load held near what the pipeline carried", Check: func(o *history.Record) (bool, string) {
		t := o.Traffic
		if t.Carried <= 0 {
			return false, "the probe measured no rate the pipeline carried"
		}
		return t.Sent >= share*t.Carried, fmt.Sprintf("%.0f events/s sent after a probe the pipeline carried at %.0f/s (%.0f%%, wanted %.0f%%)", t.Sent, t.Carried, 100*t.Sent/t.Carried, 100*share)
	}}
}

// ClaimsInFlight is the most claims one writer (the session's
// application_name: a relay instance) had made and not yet settled at
// once, from the audit trail: a claim is made by its first claim write
// and settled by the first write under it that takes a row out of
// Processing (Published, a retry, Failed). Two mean a relay published a
// batch while the one before it awaited its confirms.
func ClaimsInFlight(rows []history.AuditRow) int {
	owner := map[string]string{}         // claim id → its writer
	open := map[string]map[string]bool{} // writer → its claims not yet settled
	most := 0
	for _, r := range rows {
		switch {
		case r.Claims():
			if _, seen := owner[r.NewClaim]; seen {
				continue
			}
			owner[r.NewClaim] = r.Writer
			if open[r.Writer] == nil {
				open[r.Writer] = map[string]bool{}
			}
			open[r.Writer][r.NewClaim] = true
			most = max(most, len(open[r.Writer]))
		case r.Settles():
			if w, ok := owner[r.OldClaim]; ok {
				delete(open[w], r.OldClaim)
			}
		}
	}
	return most
}

// TwoClaimsInFlight is the evidence that one relay claimed (and so
// published) a batch while its previous claim was not yet settled, from
// the audit trail's writers.
func TwoClaimsInFlight() Evidence {
	return Evidence{Name: "two claims of one relay in flight", Needs: []history.Source{history.SourceAudit, history.SourceAuditStatus}, Check: func(o *history.Record) (bool, string) {
		n := ClaimsInFlight(o.Audit.Writes())
		return n >= 2, fmt.Sprintf("at most %d claims of one relay unsettled at once", n)
	}}
}

// NackBeforeAck finds a claim whose publishes the broker answered with a
// nack and then, up to the claim's last publish, a positive confirm, from
// the relay's event log: the publish order is the order of the claim's
// published lines. It returns the claim and how many of its nacked
// publishes went out before its confirmed last.
func NackBeforeAck(log []eventlog.Entry) (claim string, nacked int) {
	place := map[string]map[string]int{} // claim → eventId → its place among the claim's publishes
	var claims []string
	for _, e := range log {
		if e.Event != eventlog.Published || e.ClaimID == "" {
			continue
		}
		if place[e.ClaimID] == nil {
			place[e.ClaimID] = map[string]int{}
			claims = append(claims, e.ClaimID)
		}
		if _, again := place[e.ClaimID][e.EventID]; !again {
			place[e.ClaimID][e.EventID] = len(place[e.ClaimID])
		}
	}
	lastAck := map[string]int{}
	nacks := map[string][]int{}
	for _, e := range log {
		at, ok := place[e.ClaimID][e.EventID]
		switch {
		case !ok:
		case e.Event == eventlog.Confirmed:
			lastAck[e.ClaimID] = max(lastAck[e.ClaimID], at+1)
		case e.Event == eventlog.Nacked:
			nacks[e.ClaimID] = append(nacks[e.ClaimID], at)
		}
	}
	for _, c := range claims {
		if lastAck[c] != len(place[c]) {
			// Its last publish was not confirmed (nacked, or never
			// answered within the relay's wait): the relay did not decide
			// the batch with a nack ahead of a confirmed last.
			continue
		}
		n := 0
		for _, at := range nacks[c] {
			if at+1 < lastAck[c] {
				n++
			}
		}
		if n > nacked {
			claim, nacked = c, n
		}
	}
	return claim, nacked
}

// NackThenAck is the evidence that the broker refused a publish of a batch
// and confirmed a later one of the same batch: the broker's queue was at
// its length limit and made room while the batch went out.
func NackThenAck() Evidence {
	return Evidence{Name: "a nack ahead of a confirm in one batch", Needs: []history.Source{history.SourceRelayLog}, Check: func(o *history.Record) (bool, string) {
		claim, n := NackBeforeAck(o.Log)
		if n == 0 {
			return false, fmt.Sprintf("%d nacks, none ahead of the confirmed last publish of their batch", o.Count(eventlog.Nacked))
		}
		return true, fmt.Sprintf("claim %s: %d nacked publishes ahead of its confirmed last", claim, n)
	}}
}

// ReturnsAheadOfTheirBatch counts the returns a relay had in hand while
// it settled an earlier batch, from its event log: a returned line (logged
// when the relay drains the return, under the claim it came back from)
// of a claim not yet answered, followed in the same process's log by an
// answer (confirmed or nacked) of a claim it published before that one.
// It returns that earlier claim and the count for the claim with the most.
func ReturnsAheadOfTheirBatch(log []eventlog.Entry) (settling string, returns int) {
	type relayClaim struct{ process, claim string }
	order := map[relayClaim]int{}             // a claim's place among its process's claims, by its first publish
	answered := map[relayClaim]bool{}         // a claim with an answer line
	inHand := map[string]map[relayClaim]int{} // process → claims not yet answered → their returns logged
	ahead := map[relayClaim]int{}             // an answered claim → later claims' returns in hand when it answered
	for _, e := range log {
		if e.ClaimID == "" {
			continue
		}
		c := relayClaim{e.Process, e.ClaimID}
		switch e.Event {
		case eventlog.Published:
			if _, seen := order[c]; !seen {
				order[c] = len(order)
			}
		case eventlog.Returned:
			if !answered[c] {
				if inHand[e.Process] == nil {
					inHand[e.Process] = map[relayClaim]int{}
				}
				inHand[e.Process][c]++
			}
		case eventlog.Confirmed, eventlog.Nacked:
			if answered[c] {
				continue
			}
			answered[c] = true
			delete(inHand[e.Process], c)
			at, published := order[c]
			if !published {
				continue
			}
			for later, n := range inHand[e.Process] {
				if next, ok := order[later]; ok && next > at {
					ahead[c] += n
				}
			}
		}
	}
	for c, n := range ahead {
		if n > returns || n == returns && c.claim < settling {
			settling, returns = c.claim, n
		}
	}
	return settling, returns
}

// ReturnAheadOfItsBatch is the evidence that a relay had a later batch's
// basic.return in hand while it settled an earlier batch on the same
// channel: the return a relay that keeps only the settling batch's returns
// would drop.
func ReturnAheadOfItsBatch() Evidence {
	return Evidence{Name: "a later batch's return in hand while an earlier batch settled", Needs: []history.Source{history.SourceRelayLog}, Check: func(o *history.Record) (bool, string) {
		claim, n := ReturnsAheadOfTheirBatch(o.Log)
		if n == 0 {
			return false, fmt.Sprintf("%d returns, none logged before its own batch's answers while an earlier batch of its relay settled", o.Count(eventlog.Returned))
		}
		return true, fmt.Sprintf("claim %s settled with %d returns of a later batch of its relay in hand", claim, n)
	}}
}
