package check

import (
	"fmt"
	"slices"
	"time"
)

// RetryPace is how fast the relays go round while the queue is unbound,
// read from the outbox's audit trail alone (black-box): how long a claim
// takes from its claim to its retry write (publish, return, confirm, the
// write), and how soon a row that is due gets claimed. Their sum, Cycle,
// is the shortest a retry can come round: the pace of a relay that does
// not back off, whatever the relay. Durations are differences of the
// database's own clock, never compared with faultline's.
type RetryPace struct {
	// RoundTrip is the median, over retry writes after the mark, of the
	// time from the claim to its retry write (same row, same claim).
	RoundTrip time.Duration
	// ClaimWait is the median, over rows inserted, of the time from the
	// insert to the row's first claim.
	ClaimWait time.Duration
	// Retries counts the retry writes (Processing → Pending) after the
	// mark, MostRetries the most of one row, Failed the rows written
	// Failed after it, Claims the claims after it (a relay at work in the
	// outage, whether or not it retries).
	Retries, MostRetries, Failed, Claims int
}

// Cycle is one retry round trip of a relay that does not back off; 0 when
// the audit trail showed no retry or no claim yet.
func (p RetryPace) Cycle() time.Duration {
	if p.RoundTrip <= 0 || p.ClaimWait < 0 {
		return 0
	}
	return p.RoundTrip + p.ClaimWait
}

func (p RetryPace) String() string {
	return fmt.Sprintf("round trip %s (claim→retry %s + claim wait %s), %d claims, %d retries (at most %d of one row), %d Failed",
		p.Cycle().Round(time.Millisecond), p.RoundTrip.Round(time.Millisecond), p.ClaimWait.Round(time.Millisecond), p.Claims, p.Retries, p.MostRetries, p.Failed)
}

// MeasureRetryPace reads the pace from the audit rows (in trail order),
// counting retries and Failed writes of rows with an id above mark (the
// trail's last id when the queue's bindings went away).
func MeasureRetryPace(audit []AuditRow, mark int64) RetryPace {
	var p RetryPace
	inserted := map[string]time.Time{}
	claimed := map[[2]string]time.Time{} // (row, claim) → its claim
	firstClaim := map[string]bool{}
	retries := map[string]int{}
	var trips, waits []time.Duration
	for _, a := range audit {
		switch {
		case a.Op == "INSERT":
			inserted[a.EventID] = a.At
		case a.claims():
			if a.ID > mark {
				p.Claims++
			}
			claimed[[2]string{a.EventID, a.NewClaim}] = a.At
			if at, ok := inserted[a.EventID]; ok && !firstClaim[a.EventID] {
				waits = append(waits, a.At.Sub(at))
			}
			firstClaim[a.EventID] = true
		case a.ID > mark && a.Op == "UPDATE" && a.OldStatus == "Processing" && a.NewStatus == "Pending":
			p.Retries++
			retries[a.EventID]++
			p.MostRetries = max(p.MostRetries, retries[a.EventID])
			if at, ok := claimed[[2]string{a.EventID, a.OldClaim}]; ok {
				trips = append(trips, a.At.Sub(at))
			}
		case a.ID > mark && a.Op == "UPDATE" && a.NewStatus == "Failed" && a.OldStatus != "Failed":
			p.Failed++
		}
	}
	p.RoundTrip, p.ClaimWait = median(trips), median(waits)
	return p
}

// median of ds; 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
