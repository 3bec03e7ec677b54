package scenarios

import (
	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/target"
)

// correctVerdict is what the correct pipeline must get on the scenario
// named: a pass, or — a scenario that exists to show a documented limit
// (runner.Scenario.Limit) — that limit.
func correctVerdict(name string) string {
	if sc, err := Lookup(name); err == nil && sc.Limit {
		return result.Limit
	}
	return result.Pass
}

// catchesIn are the catches a target file declares whose scenario is
// among picked; every name is checked against every profile.
func catchesIn(t *target.Target, picked []runner.Scenario) ([]gate.Catch, error) {
	all, err := gate.CatchesOf(t, Every())
	if err != nil {
		return nil, err
	}
	return gate.Within(all, picked), nil
}
