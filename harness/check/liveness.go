package check

import (
	"fmt"
	"slices"
	"time"

	"github.com/faultline-dev/faultline/harness/result"
)

// Recovery is how the run came back after its faults: when the last one
// healed, when every committed fact had taken effect (zero: never, within
// the convergence wait), and the bound the run allows in between, with
// how it was drawn.
type Recovery struct {
	Healed time.Time
	// LoadEnded is when the workload's last order was answered: no fact
	// can take effect before it was committed, so the clock of a run
	// whose faults healed mid-load starts here.
	LoadEnded time.Time
	CaughtUp  time.Time
	Bound     time.Duration
	BoundIs   string // e.g. "the faults' 12s + lease 2s + a reconnection 10s"
}

// ReconnectAllowance is the part of the liveness bound that lets a client
// notice a dead node or server and reconnect elsewhere: heartbeats of a
// few seconds, a reconnect backoff of a few more.
const ReconnectAllowance = 10 * time.Second

// LivenessBound draws the bound from the run: a pipeline that keeps up
// with its load drains what piled up during an outage in at most as long
// as the outage lasted; rows claimed when the fault struck wait out a
// lease; a client takes a reconnection to find a live node.
func LivenessBound(faultsLasted, lease time.Duration) (time.Duration, string) {
	b := faultsLasted + lease + ReconnectAllowance
	return b, fmt.Sprintf("the faults' %s + the lease %s + a reconnection %s", faultsLasted.Round(time.Millisecond), lease, ReconnectAllowance)
}

// liveAfterHeal checks the run's recovery against its bound.
func liveAfterHeal(o *Observation) result.Invariant {
	r := o.Recovery
	if r == nil || r.Healed.IsZero() {
		return notChecked(LiveAfterHeal, "no fault healed in this run")
	}
	inv := result.Invariant{Name: LiveAfterHeal, RestsOn: []string{FromContract}}
	if r.CaughtUp.IsZero() {
		inv.Detail = fmt.Sprintf("not every committed fact took effect after the last fault healed (bound %s: %s)", r.Bound, r.BoundIs)
		inv.Violations = []result.Violation{{Kind: "not-live", Message: inv.Detail}}
		return inv
	}
	from, since := r.Healed, "the last fault healed"
	if r.LoadEnded.After(from) {
		from, since = r.LoadEnded, "the last fault healed and the last order was answered"
	}
	took := max(r.CaughtUp.Sub(from), 0)
	inv.OK = took <= r.Bound
	inv.Detail = fmt.Sprintf("every committed fact took effect %s after %s; bound %s (%s)", took.Round(time.Millisecond), since, r.Bound.Round(time.Millisecond), r.BoundIs)
	if !inv.OK {
		inv.Violations = []result.Violation{{Kind: "not-live", Message: inv.Detail}}
	}
	return inv
}

// PublishedWithoutFact are the eventIds the tap queue saw routed whose fact
// is not in the database at the end — after a failover, events published
// for commits the promoted server never had; ok is false where there is no
// tap, or the facts carry no eventId.
func PublishedWithoutFact(o *Observation) (ids []string, ok bool) {
	if !o.HasTap {
		return nil, false
	}
	facts := make(map[string]bool, len(o.Facts))
	for _, f := range o.Facts {
		if f.EventID == "" {
			return nil, false
		}
		facts[f.EventID] = true
	}
	for id := range o.Tap {
		if !facts[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, true
}

// factsKept: the database holds at least as many facts as the producer
// acknowledged (answered as created); fewer is committed facts lost.
func factsKept(o *Observation) result.Invariant {
	if o.Acknowledged == 0 {
		return notChecked(FactsKept, "the producer acknowledged nothing")
	}
	inv := result.Invariant{Name: FactsKept, OK: int64(len(o.Facts)) >= o.Acknowledged, RestsOn: []string{FromContract}}
	inv.Detail = fmt.Sprintf("%d facts acknowledged, %d in the database", o.Acknowledged, len(o.Facts))
	if !inv.OK {
		gone := o.Acknowledged - int64(len(o.Facts))
		inv.Detail = fmt.Sprintf("%d facts the producer acknowledged are gone (%d acknowledged, %d in the database)", gone, o.Acknowledged, len(o.Facts))
		inv.Violations = []result.Violation{{Kind: "fact-lost", Message: inv.Detail}}
	}
	return inv
}
