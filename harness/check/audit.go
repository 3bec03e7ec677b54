package check

import (
	"fmt"
	"sort"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
)

// More of what a verdict rests on.
const (
	FromAudit = "audit trail" // every outbox write with its writer (a trigger faultline installed)
	FromTap   = "tap queue"   // every routed publish per eventId (a queue faultline bound to the exchange)
)

// AuditStaleWrites finds, from the audit trail alone, writes accepted from
// a writer on a row another writer had claimed since: per row, the last
// claim names its writer, and any later write that is not itself a claim
// must come from that writer. A fenced write (0 rows) leaves no trace; an
// unfenced one from a relay whose claim was taken over does. The writes of
// one row are in commit order (each waits for the row lock of the one
// before).
func AuditStaleWrites(o *history.Record) []string {
	holder := map[string]string{} // row → writer of its last claim
	stale := map[string]bool{}
	for _, a := range o.Audit.Writes() {
		if a.Op != "UPDATE" {
			continue
		}
		if a.Claims() {
			holder[a.EventID] = a.Writer
			continue
		}
		if h, ok := holder[a.EventID]; ok && h != a.Writer {
			stale[a.EventID] = true
		}
	}
	ids := make([]string, 0, len(stale))
	for id := range stale {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// claimCommits is where each claim of a row stands in the audit trail:
// (eventId, claim id) → position. Empty without an audit trail.
type claimCommits map[[2]string]int

// claimCommits indexes the audit trail's claims. The writes of one row are
// in commit order (each waits for the row lock of the one before).
func commitsOfClaims(o *history.Record) claimCommits {
	out := claimCommits{}
	if o.Audit == nil {
		return out
	}
	for i, a := range o.Audit.Writes() {
		if a.Claims() {
			if _, ok := out[[2]string{a.EventID, a.NewClaim}]; !ok {
				out[[2]string{a.EventID, a.NewClaim}] = i
			}
		}
	}
	return out
}

// before reports whether the audit trail shows claim a of the row committed
// before claim b; false when it shows either not at all.
func (c claimCommits) before(eventID, a, b string) bool {
	ia, okA := c[[2]string{eventID, a}]
	ib, okB := c[[2]string{eventID, b}]
	return okA && okB && ia < ib
}

// AuditTimeline renders the audit rows of the given events.
func AuditTimeline(o *history.Record, ids ...string) []string {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var out []string
	for _, a := range o.Audit.Writes() {
		if want[a.EventID] {
			lease := ""
			if !a.Lease.IsZero() && a.NewStatus == "Processing" {
				lease = " lease to " + a.Lease.Format("15:04:05.000000")
			}
			out = append(out, fmt.Sprintf("%s %-10s %-6s %s %s→%s claim %s→%s%s (audit)", a.At.Format("15:04:05.000000"), a.Writer, a.Op, a.EventID,
				a.OldStatus, a.NewStatus, short(a.OldClaim), short(a.NewClaim), lease))
		}
	}
	return out
}

func short(claim string) string {
	if claim == "" {
		return "-"
	}
	return claim
}

// TapDuplicates counts the extra routings of eventIds the tap queue saw
// more than once (a republish the relay made).
func TapDuplicates(o *history.Record) (extra int, ids []string) {
	for id, n := range o.Tap {
		if n > 1 && id != "" {
			extra += n - 1
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return extra, ids
}

// ReclaimedByAnother (black-box): the audit trail shows a row still
// Processing under one claim claimed again under another: its lease ran out
// and a claim took it over (another relay's, or the same relay's after a
// restart — the claim id is new either way).
func ReclaimedByAnother() Evidence {
	return Evidence{
		Name:  "a row claimed again under another claim after its lease (audit trail)",
		Needs: []history.Source{history.SourceAudit, history.SourceAuditStatus},
		Check: func(o *history.Record) (bool, string) {
			for _, a := range o.Audit.Writes() {
				if a.Claims() && a.OldStatus == "Processing" && a.OldClaim != "" {
					return true, fmt.Sprintf("%s taken over: claim %s, then %s (by %s)", a.EventID, a.OldClaim, a.NewClaim, a.Writer)
				}
			}
			return false, fmt.Sprintf("%d outbox writes audited, no row taken over", len(o.Audit.Writes()))
		},
	}
}

// RoutedTwice (black-box): the tap queue saw an eventId routed more than
// once: it was published again.
func RoutedTwice() Evidence {
	return Evidence{
		Name:  "an eventId routed twice (tap queue)",
		Needs: []history.Source{history.SourceTap},
		Check: func(o *history.Record) (bool, string) {
			extra, ids := TapDuplicates(o)
			if extra == 0 {
				return false, fmt.Sprintf("%d eventIds routed, each once", len(o.Tap))
			}
			return true, fmt.Sprintf("%d extra routings, e.g. %s", extra, ids[0])
		},
	}
}

// BrokerRedelivered (black-box): the broker's own counter of redeliveries
// on the consumer's queue is above zero.
func BrokerRedelivered() Evidence {
	return Evidence{
		Name: "the broker redelivered to the consumer (its redelivery counter)",
		Check: func(o *history.Record) (bool, string) {
			return o.Queue.Redelivered > 0, fmt.Sprintf("%d redeliveries", o.Queue.Redelivered)
		},
	}
}

// RetriedInAudit (black-box): the audit trail shows a row sent back from
// Processing to Pending (a retry written) by its holder.
func RetriedInAudit() Evidence {
	return Evidence{
		Name:  "a retry written back to Pending (audit trail)",
		Needs: []history.Source{history.SourceAudit, history.SourceAuditStatus},
		Check: func(o *history.Record) (bool, string) {
			n := 0
			for _, a := range o.Audit.Writes() {
				if a.Op == "UPDATE" && a.OldStatus == "Processing" && a.NewStatus == "Pending" {
					n++
				}
			}
			return n > 0, fmt.Sprintf("%d retries written", n)
		},
	}
}

// LiveClaimsTaken finds, from the audit trail alone, the rows claimed while
// another claim's lease on them was live: per row, the lease the holding
// claim last wrote (its claim, or a renewal under the same claim) against
// the moment the next claim's write was made. A correct relay takes a row
// only once its lease has run out, judged when its claim statement ran,
// which is no later than its write, so a claim written at or before the
// lease's end was taken live whatever clock the relay read. A write that
// moves the row out of Processing, or drops its claim, ends the lease.
// Both times are the database server's.
func LiveClaimsTaken(o *history.Record) []string {
	type hold struct {
		claim string
		until time.Time
	}
	held := map[string]hold{}
	taken := map[string]bool{}
	for _, a := range o.Audit.Writes() {
		if a.Op != "UPDATE" {
			delete(held, a.EventID)
			continue
		}
		h, ok := held[a.EventID]
		switch {
		case a.Claims():
			if ok && !h.until.IsZero() && !a.At.After(h.until) {
				taken[a.EventID] = true
			}
			held[a.EventID] = hold{claim: a.NewClaim, until: a.Lease}
		case a.NewStatus != "Processing" || a.NewClaim == "":
			delete(held, a.EventID)
		case ok && a.NewClaim == h.claim && !a.Lease.IsZero():
			held[a.EventID] = hold{claim: h.claim, until: a.Lease}
		}
	}
	ids := make([]string, 0, len(taken))
	for id := range taken {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// leaseKept: no row was claimed while another claim's lease on it was
// live (the article's promise to relays that run side by side).
func leaseKept(o *history.Record) result.Invariant {
	switch why := noClaims(o); {
	case why != "":
		return notChecked(LeaseKept, why)
	case o.Audit == nil && o.HasLog("relay"):
		return notChecked(LeaseKept, "this run did not install the outbox's audit trail (the relays log their claims, and nothing in the run read it)")
	case o.Audit == nil:
		return notChecked(LeaseKept, "the outbox could not be audited (observe.outbox)")
	case !o.Audit.Lease:
		return notChecked(LeaseKept, "the outbox has no lease column faultline can watch (observe.outbox.lease, a timestamp)")
	}
	ids := LiveClaimsTaken(o)
	inv := result.Invariant{Name: LeaseKept, OK: len(ids) == 0, RestsOn: []string{FromAudit}}
	if len(ids) > 0 {
		inv.Detail = fmt.Sprintf("%d rows claimed while another claim's lease on them was live", len(ids))
		inv.Violations = []result.Violation{{Kind: "live-claim-taken", EventIDs: capList(ids), Message: inv.Detail,
			Timeline: AuditTimeline(o, capList(ids)...)}}
	}
	return inv
}
