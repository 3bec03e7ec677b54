package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
)

// ReconnectAllowance stands in the liveness bound for the reconnection
// where the run could not measure it (MeasureReconnection): heartbeats of
// a few seconds to notice a dead node or server, a reconnect backoff of a
// few more.
const ReconnectAllowance = 10 * time.Second

// Lag is how far behind its load the pipeline ran before the first fault:
// the longest it took the effects to reach what the orders answered at
// some moment called for. A relay that polls its outbox every few
// seconds lags by that much without any fault. Measured is false where
// the run could not tell (Detail says why).
type Lag struct {
	Took     time.Duration
	Measured bool
	Detail   string
}

// MeasureLag reads the pipeline's lag before firstFault off the samples:
// for each sample that expects effects, the time until a sample (still
// before the fault) counts as many.
func MeasureLag(samples []history.ClientSample, firstFault time.Time) Lag {
	var lag time.Duration
	matched := 0
	for i, s := range samples {
		if !s.At.Before(firstFault) {
			break
		}
		if s.Expected == 0 || s.Effects < 0 {
			continue
		}
		for _, later := range samples[i:] {
			if !later.At.Before(firstFault) {
				break
			}
			if later.Effects >= s.Expected {
				lag = max(lag, later.At.Sub(s.At))
				matched++
				break
			}
		}
	}
	if matched == 0 {
		return Lag{Detail: "the effects never caught up with the orders before the first fault"}
	}
	return Lag{Took: lag, Measured: true, Detail: fmt.Sprintf("the longest the effects took to catch up with the orders, over %d samples before the first fault", matched)}
}

// Reconnection is how long the target's clients took, after the last
// fault healed, to be connected again as they were before the first one.
// Measured is false where the run could not tell; Detail says what was
// seen, or why not.
type Reconnection struct {
	Took     time.Duration
	Measured bool
	Detail   string
}

// MeasureReconnection reads the reconnection off the run's samples: the
// baseline is the last sample before the first fault; the clients are
// back at the first sample from the heal on with at least the baseline's
// broker connections and a session on every database that had one (a
// pool opens and closes sessions as it likes, so their number is no
// measure). Clients that reconnected elsewhere while the fault lasted are
// back at once.
func MeasureReconnection(samples []history.ClientSample, firstFault, healed time.Time) Reconnection {
	var base *history.ClientSample
	for i := range samples {
		if samples[i].At.Before(firstFault) {
			base = &samples[i]
		}
	}
	if base == nil {
		return Reconnection{Detail: "no count of the clients before the first fault"}
	}
	var dbs []string
	for db, n := range base.Sessions {
		if n > 0 {
			dbs = append(dbs, db)
		}
	}
	slices.Sort(dbs)
	if base.Broker == 0 && len(dbs) == 0 {
		return Reconnection{Detail: "no client was connected before the first fault"}
	}
	var last *history.ClientSample
	for i := range samples {
		s := &samples[i]
		if s.At.Before(healed) {
			continue
		}
		last = s
		back := s.Broker >= base.Broker
		for _, db := range dbs {
			back = back && s.Sessions[db] > 0
		}
		if back {
			took := s.At.Sub(healed)
			return Reconnection{Took: took, Measured: true, Detail: fmt.Sprintf("%d broker connections and sessions on %s as before the faults, %s after the heal",
				base.Broker, describeDBs(dbs), took.Round(time.Millisecond))}
		}
	}
	if last == nil {
		return Reconnection{Detail: "no count of the clients after the heal"}
	}
	return Reconnection{Detail: fmt.Sprintf("the clients were not all back by the end of the run (%d of %d broker connections)", last.Broker, base.Broker)}
}

func describeDBs(dbs []string) string {
	if len(dbs) == 0 {
		return "no database"
	}
	return strings.Join(dbs, ", ")
}

// LivenessBound draws the bound from the run: a pipeline that keeps up
// with its load drains what piled up during an outage in at most as long
// as the outage lasted, plus the lag it runs at without faults; rows
// claimed when the fault struck wait out a lease; the clients take the
// reconnection the run measured to find a live node or server again.
// What the run could not measure, ReconnectAllowance stands in for, once.
func LivenessBound(faultsLasted, lease time.Duration, lag Lag, rc Reconnection) (time.Duration, string) {
	b := faultsLasted + lease
	is := fmt.Sprintf("the faults' %s + the lease %s", faultsLasted.Round(time.Millisecond), lease)
	if lag.Measured {
		b += lag.Took
		is += fmt.Sprintf(" + the pipeline's lag %s (measured: %s)", lag.Took.Round(time.Millisecond), lag.Detail)
	}
	if rc.Measured {
		b += rc.Took
		is += fmt.Sprintf(" + the reconnection %s (measured: %s)", rc.Took.Round(time.Millisecond), rc.Detail)
	}
	if !lag.Measured || !rc.Measured {
		var why []string
		for _, d := range []struct {
			measured bool
			what     string
		}{{lag.Measured, "lag: " + lag.Detail}, {rc.Measured, "reconnection: " + rc.Detail}} {
			if !d.measured {
				why = append(why, d.what)
			}
		}
		b += ReconnectAllowance
		is += fmt.Sprintf(" + an allowance %s for what was not measured (%s)", ReconnectAllowance, strings.Join(why, "; "))
	}
	return b, is
}

// liveAfterHeal checks the run's recovery against its bound.
func liveAfterHeal(o *history.Record) result.Invariant {
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
		// The pipeline came back, later than the bound drawn from what the
		// run measured. What it did not measure (a slower machine, the
		// target's own retry schedule) looks the same as a slow recovery,
		// so the run has no verdict on this account: it is run again, and
		// a pipeline that stays slow never passes. A pipeline that never
		// came back (above) is a violation.
		inv.Unconverged = true
		inv.Detail = fmt.Sprintf("every committed fact took effect, %s after %s: past the bound %s drawn from the run (%s)", took.Round(time.Millisecond), since, r.Bound.Round(time.Millisecond), r.BoundIs)
		inv.Violations = []result.Violation{{Kind: "slow-recovery", Message: inv.Detail}}
	}
	return inv
}

// PublishedWithoutFact are the eventIds the tap queue saw routed whose fact
// is not in the database at the end — after a failover, events published
// for commits the promoted server never had; ok is false where there is no
// tap, or the facts carry no eventId.
func PublishedWithoutFact(o *history.Record) (ids []string, ok bool) {
	if o.Tap == nil {
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

// factsKept: every fact the producer acknowledged (answered ok) is in its
// database at the end. Per aggregate where the create answers give ids:
// an aggregate with fewer facts than requests answered ok lost committed
// ones, however many other facts (a retried create's second aggregate)
// the database holds. Without ids, by count.
func factsKept(o *history.Record) result.Invariant {
	if o.Acknowledged == 0 {
		return notChecked(FactsKept, "the producer acknowledged nothing")
	}
	if o.AcknowledgedByID == nil {
		return factsKeptByCount(o)
	}
	held := make(map[string]int64, len(o.Facts))
	for _, f := range o.Facts {
		held[f.AggregateID]++
	}
	var short []string
	known, gone := 0, int64(0)
	for id, n := range o.AcknowledgedByID {
		if held[id] > 0 {
			known++
		}
		if held[id] < n {
			short = append(short, id)
			gone += n - held[id]
		}
	}
	if known == 0 && len(o.Facts) > 0 {
		// Facts there, and none of the aggregates the producer named: the
		// facts query's aggregate_id is not what the create answers with.
		return notChecked(FactsKept, fmt.Sprintf("none of the %d aggregate ids the producer answered with (workload.create.id) is an aggregate_id of the %d facts the contract's facts query returns", len(o.AcknowledgedByID), len(o.Facts)))
	}
	slices.Sort(short)
	inv := result.Invariant{Name: FactsKept, OK: len(short) == 0, RestsOn: []string{FromContract, FromWorkload}}
	inv.Detail = fmt.Sprintf("%d facts of %d aggregates acknowledged, each in the database (%d facts there)", o.Acknowledged, len(o.AcknowledgedByID), len(o.Facts))
	if !inv.OK {
		inv.Detail = fmt.Sprintf("%d facts the producer acknowledged are gone, from %d aggregates (%d acknowledged, %d in the database)", gone, len(short), o.Acknowledged, len(o.Facts))
		inv.Violations = []result.Violation{{Kind: "fact-lost", Message: inv.Detail + "; aggregates: " + strings.Join(capList(short), ", ")}}
	}
	return inv
}

// factsKeptByCount: the database holds at least as many facts as the
// producer acknowledged; fewer is committed facts lost.
func factsKeptByCount(o *history.Record) result.Invariant {
	inv := result.Invariant{Name: FactsKept, OK: int64(len(o.Facts)) >= o.Acknowledged, RestsOn: []string{FromContract, FromWorkload}}
	inv.Detail = fmt.Sprintf("%d facts acknowledged, %d in the database (counted: the create answers give no id)", o.Acknowledged, len(o.Facts))
	if !inv.OK {
		gone := o.Acknowledged - int64(len(o.Facts))
		inv.Detail = fmt.Sprintf("%d facts the producer acknowledged are gone (%d acknowledged, %d in the database)", gone, o.Acknowledged, len(o.Facts))
		inv.Violations = []result.Violation{{Kind: "fact-lost", Message: inv.Detail}}
	}
	return inv
}
