// Package runner runs one scenario against a target — any pipeline its
// target file describes: it gives the scenario its own databases, vhost and
// Toxiproxy links on the shared infrastructure, starts the target's
// processes through their links, drives the workload, injects the faults,
// waits for convergence and hands the end state to the checker. Its output
// is a result.Scenario. It knows the target only through its target file
// (harness/target) and the protocol.
package runner

import (
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/harness/workload"
)

// Scenario is a plain value: what to run, what to break, what to see.
type Scenario struct {
	Name        string
	Description string
	// Window names the window the scenario opens, as the protocol does
	// (protocol.DescribeWindow: a crash-point window, one faultline opens
	// from outside, a black-box one); "" for none of its own (a random
	// mix). Reports and list word it from there.
	Window string

	Workload workload.Spec
	// Also are other traffic profiles under which the scenario opens its
	// window alike and its evidence holds: a run draws its traffic among
	// Workload and these by its seed (TrafficFor), so a gate over several
	// seeds puts the same fault under each, one run at a time.
	Also []workload.Spec
	// Settings are knobs of the target the scenario turns (the target
	// file's settings: retry-budget, lease-renewal, ...), name → value,
	// that it cannot do without: a target that does not offer one does not
	// run the scenario.
	Settings map[string]string
	// Prefers are settings that only tune the scenario's timing (how long
	// a relay rides out an unbound queue): applied where the target offers
	// them, as Settings are; where it does not, the scenario still runs,
	// as Without makes it.
	Prefers map[string]string
	// Without is the scenario as it runs on a target that does not offer
	// every preferred setting (missing names those it lacks, sorted): its
	// timing bounded instead, and how in a line; or an error saying why it
	// cannot run there (not run). Nil: it runs unchanged, untuned.
	Without func(sc Scenario, t *target.Target, missing []string) (Scenario, string, error)
	// Relay, when set, is the scenario as it runs on the target's relay
	// model (target.Relay): re-timed by what that relay shows from
	// outside, and how in a line; or an error saying why the model offers
	// no such window (the scenario is not offered there, never run to
	// fail). Nil: the scenario is the same on every relay.
	Relay func(sc Scenario, t *target.Target) (Scenario, string, error)
	// Instances overrides the target's instance count of a role (e.g.
	// one relay, so one claim holds every row).
	Instances map[string]int
	// Faults builds the seeded schedule: the same seed gives the same faults.
	Faults func(rng *rand.Rand) []fault.Fault
	// Evidence the run must show: a scenario that never opened its window fails.
	Evidence []check.Evidence
	// Invariants names the optional invariants (check.AllInvariants) the
	// run is judged by besides the always-on ones: check.NoneGaveUp where
	// the outage is shorter than the retry budget's backoff, so an event
	// the pipeline gave up on (Failed) is a violation; check.AggregateOrder
	// where the pipeline promises per-aggregate order.
	Invariants []string
	// Expect reads the checks' results for the violations the scenario
	// exists to show (a documented limit): it returns the evidence that
	// the checker reported exactly them, and its notes on the invariants
	// (those a break of which it excuses, and why; why it excuses others
	// not), which the run applies (result.Annotated). It changes nothing.
	Expect func(o *history.Record, faults []result.Fault, invs []result.Invariant) (result.Evidence, []result.Note)
	// Limit: the scenario exists to show a documented limit, so a correct
	// pipeline's run ends limit, never pass. A scenario may have Expect
	// without it: one that accepts a limit only some targets show (a log
	// relay's slot through a failover).
	Limit bool
	// Exclusive scenarios restart the broker or the database: they run on an
	// infrastructure of their own where the provider can start one, else
	// alone on the shared one.
	Exclusive bool
	// FaultsOptional: the faults are drawn at random and one may find
	// nothing to hit (a crash point of a process with no batch left); a
	// fault that did not happen is a window not opened, not what the
	// verdict rests on. A run where none happened is indeterminate.
	FaultsOptional bool
	// Converge bounds the wait for convergence (default 45s).
	Converge time.Duration
}

// On is the scenario as it runs on t: the preferred settings t offers
// join its Settings; for those it lacks, Without says how it runs instead
// (the line says how, "" when nothing was missing), or why it cannot.
func (s Scenario) On(t *target.Target) (Scenario, string, error) {
	s, how, err := s.onRelay(t)
	if err != nil {
		return s, "", err
	}
	out, settingsHow, err := s.onSettings(t)
	return out, JoinLines(how, settingsHow), err
}

// onSettings is On for the preferred settings.
func (s Scenario) onSettings(t *target.Target) (Scenario, string, error) {
	if len(s.Prefers) == 0 {
		return s, "", nil
	}
	var missing []string
	settings := maps.Clone(s.Settings)
	if settings == nil {
		settings = map[string]string{}
	}
	for name, v := range s.Prefers {
		if _, ok := t.Settings[name]; ok {
			settings[name] = v
		} else {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	out := s
	out.Settings, out.Prefers, out.Without = settings, nil, nil
	if len(missing) == 0 || s.Without == nil {
		return out, "", nil
	}
	return s.Without(out, t, missing)
}

// Traffic is every profile the scenario runs under: Workload, then Also.
func (s Scenario) Traffic() []workload.Spec {
	return append([]workload.Spec{s.Workload}, s.Also...)
}

// TrafficFor is the traffic a run of the seed sends: the seed modulo the
// number of profiles picks one of Traffic, so consecutive seeds take each
// in turn. It draws nothing from the schedule's generator: the faults of a
// seed are the same whatever the traffic.
func (s Scenario) TrafficFor(seed int64) workload.Spec {
	all := s.Traffic()
	n := int64(len(all))
	return all[((seed%n)+n)%n]
}

// Schedule resolves the scenario's faults for a seed.
func (s Scenario) Schedule(seed int64) []fault.Fault {
	if s.Faults == nil {
		return nil
	}
	return s.Faults(rand.New(rand.NewPCG(uint64(seed), uint64(seed)*0x9e3779b97f4a7c15+1)))
}

// needs lists the capabilities a schedule's faults need.
func needs(faults []fault.Fault) []string { return fault.NeedsOf(faults) }
