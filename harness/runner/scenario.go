// Package runner runs one scenario against a target — any pipeline its
// target file describes: it gives the scenario its own databases, vhost and
// Toxiproxy links on the shared infrastructure, starts the target's
// processes through their links, drives the workload, injects the faults,
// waits for convergence and hands the end state to the checker. Its output
// is a result.Scenario. It knows the target only through its target file
// (harness/target) and the protocol.
package runner

import (
	"math/rand/v2"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/workload"
)

// Scenario is a plain value: what to run, what to break, what to see.
type Scenario struct {
	Name        string
	Description string
	// Window is the failure window (docs/design.md's table) the scenario
	// opens.
	Window string

	Workload workload.Spec
	// Settings are knobs of the target the scenario turns (the target
	// file's settings: retry-budget, lease-renewal, ...), name → value. A
	// target that does not offer one does not run the scenario.
	Settings map[string]string
	// Instances overrides the target's instance count of a role (e.g.
	// one relay, so one claim holds every row).
	Instances map[string]int
	// Faults builds the seeded schedule: the same seed gives the same faults.
	Faults func(rng *rand.Rand) []fault.Fault
	// Evidence the run must show: a scenario that never opened its window fails.
	Evidence []check.Evidence
	// Ordered checks per-aggregate order.
	Ordered bool
	// NoneFailed: the scenario's outage is shorter than the retry budget's
	// backoff, so an event the pipeline gave up on (Failed) is a violation.
	NoneFailed bool
	// Expect accepts violations the scenario exists to show (a documented
	// limit): it marks those invariants Expected in place and returns the
	// evidence that the checker reported exactly them.
	Expect func(o *check.Observation, faults []result.Fault, invs []result.Invariant) result.Evidence
	// Exclusive scenarios touch shared infrastructure (the broker) and run
	// alone.
	Exclusive bool
	// FaultsOptional: the faults are drawn at random and one may find
	// nothing to hit (a crash point of a process with no batch left); a
	// fault that did not happen is a window not opened, not what the
	// verdict rests on. A run where none happened is indeterminate.
	FaultsOptional bool
	// Converge bounds the wait for convergence (default 45s).
	Converge time.Duration
}

// Schedule resolves the scenario's faults for a seed.
func (s Scenario) Schedule(seed int64) []fault.Fault {
	if s.Faults == nil {
		return nil
	}
	return s.Faults(rand.New(rand.NewPCG(uint64(seed), uint64(seed)*0x9e3779b97f4a7c15+1)))
}

// needs lists the capabilities a schedule's faults need.
func needs(faults []fault.Fault) []string {
	var out []string
	for _, f := range faults {
		if n, ok := f.(fault.Needs); ok {
			out = append(out, n.Needs()...)
		}
	}
	return out
}
