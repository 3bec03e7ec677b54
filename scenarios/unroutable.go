package scenarios

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/target"
)

// retryBudget is the setting of how many failed attempts a relay makes
// before it gives a row up (Failed). It only tunes timing — how long a
// relay rides out an unbound queue — so the scenarios that turn it prefer
// it and run without it, their timing bounded instead.
const retryBudget = "retry-budget"

// The retry budgets the outages judged by their shape set (retryBudget),
// and end before a relay that backs off could spend.
const (
	shortOutageBudget = 8
	longOutageBudget  = 30
)

// shapedOutage is the bindings gone at trigger for at least least, and
// until the relays' retries show their shape in the audit trail (a row
// given up on, retries backing off, or publishes into it taken for
// delivered), at most most: a relay that does not back off spends its
// whole budget in it however slow the machine makes each retry, one that
// backs off shows it and the bindings come back inside its budget.
func shapedOutage(trigger fault.Trigger, least, most time.Duration, budget int) fault.Unbind {
	return fault.Unbind{Trigger: trigger, Duration: least, Shape: true, Max: most, Budget: budget}
}

// withOutage is sc with every unbinding of its schedule restored after d
// and once a publish into it is counted, no longer judged by its shape: a
// relay that published nothing in d has spent none of its retries on it.
func withOutage(sc runner.Scenario, d time.Duration) runner.Scenario {
	faults := sc.Faults
	sc.Faults = func(rng *rand.Rand) []fault.Fault {
		out := faults(rng)
		for i, f := range out {
			if u, ok := f.(fault.Unbind); ok {
				u.Duration, u.Shape, u.Max, u.Budget, u.UntilPublished = d, false, 0, 0, true
				out[i] = u
			}
		}
		return out
	}
	return sc
}

// ridesOutInstead is how an unroutable scenario whose point is a lost
// event (a return not listened for) runs on a target without a
// retry-budget setting, as a black-box team's file is: the queue unbound
// for as long as the target file says its relays ride out
// (timing.rides_out), none of them may give a row up in it; without that,
// for fallback, and a row given up on is flagged, not lost. Either way the
// verdict rests on the invariants: a publish never returned to its relay
// is a lost event.
func ridesOutInstead(fallback time.Duration) func(runner.Scenario, *target.Target, []string) (runner.Scenario, string, error) {
	return func(sc runner.Scenario, t *target.Target, missing []string) (runner.Scenario, string, error) {
		if t.RidesOut > 0 {
			sc = withOutage(sc, t.RidesOut)
			sc.Invariants = withInvariant(sc.Invariants, check.NoneGaveUp)
			return sc, fmt.Sprintf("no %s setting: bindings gone for timing.rides_out (%s), none may end Failed", strings.Join(missing, ", "), t.RidesOut), nil
		}
		sc = withOutage(sc, fallback)
		sc.Invariants = withoutInvariant(sc.Invariants, check.NoneGaveUp)
		return sc, fmt.Sprintf("no %s setting and no timing.rides_out: bindings gone for %s, a row given up on is flagged, not lost", strings.Join(missing, ", "), fallback), nil
	}
}

// ownBudget is how a scenario that turns the retry budget only to keep
// rows bouncing runs on a target without the setting: with the target's
// own budget, a row it gives up on flagged, not lost.
func ownBudget(sc runner.Scenario, _ *target.Target, missing []string) (runner.Scenario, string, error) {
	return sc, fmt.Sprintf("no %s setting: the relays' own budget, a row given up on is flagged, not lost", strings.Join(missing, ", ")), nil
}

// shortOutageInstead is how unroutable-short-outage runs without a
// retry-budget setting: its point is an outage inside the budget, so the
// outage is the one the target file says its relays ride out
// (timing.rides_out), none may end Failed; without that there is no outage
// known to be inside the budget, and it is not run.
func shortOutageInstead(sc runner.Scenario, t *target.Target, missing []string) (runner.Scenario, string, error) {
	if t.RidesOut <= 0 {
		return sc, "", errors.New("no retry-budget setting and no timing.rides_out in the target file: no outage is known to be inside its relays' retry budget")
	}
	return withOutage(sc, t.RidesOut), fmt.Sprintf("no %s setting: bindings gone for timing.rides_out (%s), none may end Failed", strings.Join(missing, ", "), t.RidesOut), nil
}

// withInvariant is the optional invariants with name among them, in a new
// slice: the catalogue's own list is not changed.
func withInvariant(names []string, name string) []string {
	if slices.Contains(names, name) {
		return names
	}
	return append(slices.Clone(names), name)
}

// withoutInvariant is the optional invariants without name, in a new slice.
func withoutInvariant(names []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == name })
}
