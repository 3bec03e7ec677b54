package scenarios

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
)

// TestProductionProfile runs the production profile's own scenarios — a
// clustered broker, a failing-over database — on the reference: its
// correct pipeline passes each (or shows the documented limit its
// scenario exists to measure, with its numbers), liveness after heal is
// judged on each cluster run, and every variant only these windows catch
// is caught.
func TestProductionProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real infrastructure; not in -short")
	}
	t.Parallel()
	prod := Production()
	// Two at a time: each failover run starts a broker, a primary and a
	// standby of its own, and the cluster runs go one at a time anyway;
	// more would only load the machine the other tests share.
	catches, err := catchesIn(tgt, prod)
	require.NoError(t, err)
	require.NotEmpty(t, catches, "the reference declares variants the production scenarios catch")
	run, err := gate.Run(context.Background(), shared, gate.Plan{Scenarios: prod, Catches: catches, Seeds: []int64{seed}, Parallel: 2, Retries: retries,
		Progress: func(done, total int, res result.Scenario) {
			t.Logf("production [%d/%d] %s on %s: %s (%s)", done, total, res.Name, res.Variant, res.Verdict, res.Reason)
			for _, f := range res.Faults {
				for _, s := range f.States {
					t.Logf("  %s %s: %s", s.At.Format("15:04:05.000"), s.Lane, s.Label)
				}
			}
		}})
	require.NoError(t, err)
	for _, r := range run.Scenarios {
		if r.Variant != "correct" {
			continue
		}
		if !assert.Equal(t, correctVerdict(r.Name), r.Verdict, "%s: %s", r.Name, r.Reason) {
			continue
		}
		for _, inv := range r.Invariants {
			if inv.Name == check.LiveAfterHeal {
				assert.True(t, inv.OK, "%s: %s", r.Name, inv.Detail)
				assert.Contains(t, inv.Detail, "bound", "%s reports its liveness bound", r.Name)
			}
		}
		if r.Verdict == result.Limit {
			assert.NotEmpty(t, r.Limits(), r.Name)
			for _, e := range r.Evidence {
				t.Logf("%s: %s: %s", r.Name, e.Name, e.Detail)
			}
		}
	}
	for _, v := range run.Variants {
		assert.True(t, v.Caught, "variant %s was not caught with %s by %v", v.Name, v.Expected, v.Missed)
	}
}
