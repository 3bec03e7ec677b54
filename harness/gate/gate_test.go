package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/workload"
)

func TestSchedule(t *testing.T) {
	sc := func(name string, pace time.Duration, exclusive bool) runner.Scenario {
		return runner.Scenario{Name: name, Workload: workload.Spec{Pace: pace}, Exclusive: exclusive}
	}
	steady := sc("steady", 5*time.Second, false)
	slow := sc("slow", 8*time.Second, false)
	restart := sc("restart", 5*time.Second, true)
	chaos := sc("chaos", 10*time.Second, true)
	name := func(j job) string {
		v := j.variant
		if v == "" {
			v = "correct"
		}
		return j.sc.Name + "/" + v
	}
	for _, tc := range []struct {
		name            string
		jobs            []job
		exclusive, rest []string
	}{
		{"nothing", nil, nil, nil},
		{"exclusive runs in plan order, alone", []job{{sc: steady}, {sc: chaos}, {sc: restart}},
			[]string{"chaos/correct", "restart/correct"}, []string{"steady/correct"}},
		{"the others longest first, plan order among equals", []job{
			{sc: steady}, {sc: slow}, {sc: steady, variant: "no-inbox"}, {sc: slow, variant: "no-fencing"},
		}, nil, []string{"slow/correct", "slow/no-fencing", "steady/correct", "steady/no-inbox"}},
		{"a variant that never settles waits its whole bound: it starts first", []job{
			{sc: slow}, {sc: steady, variant: "no-inbox"}, {sc: steady, variant: "no-lease", stuck: true}, {sc: restart},
		}, []string{"restart/correct"}, []string{"steady/no-lease", "slow/correct", "steady/no-inbox"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exclusive, rest := schedule(tc.jobs)
			var gotEx, gotRest []string
			for _, i := range exclusive {
				gotEx = append(gotEx, name(tc.jobs[i]))
			}
			for _, i := range rest {
				gotRest = append(gotRest, name(tc.jobs[i]))
			}
			assert.Equal(t, tc.exclusive, gotEx)
			assert.Equal(t, tc.rest, gotRest)
		})
	}
}

func TestExpected(t *testing.T) {
	steady := runner.Scenario{Workload: workload.Spec{Pace: 5 * time.Second}}
	for _, tc := range []struct {
		name string
		job  job
		want time.Duration
	}{
		{"paced workload", job{sc: steady}, 5 * time.Second},
		{"unpaced workload", job{sc: runner.Scenario{}}, 0},
		{"a variant that settles", job{sc: steady, variant: "no-inbox"}, 5 * time.Second},
		{"a variant that never settles", job{sc: steady, variant: "no-lease", stuck: true}, 5*time.Second + VariantConverge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.job.expected())
		})
	}
}

// TestDecide: the whole run fails on a failed correct run or a missed
// variant; it is indeterminate when a run stayed indeterminate, a
// variant's catching runs were all indeterminate, nothing ran, or it was
// interrupted; and passes otherwise.
func TestDecide(t *testing.T) {
	pass := result.Scenario{Name: "a", Variant: "correct", Verdict: result.Pass}
	fail := result.Scenario{Name: "b", Variant: "correct", Verdict: result.Fail}
	unknown := result.Scenario{Name: "c", Variant: "correct", Verdict: result.Indeterminate}
	notRun := result.Scenario{Name: "d", Variant: "correct", Verdict: result.NotRun}
	caught := result.Variant{Name: "v", Caught: true}
	missed := result.Variant{Name: "v", Missed: []string{"a"}}
	unknownVariant := result.Variant{Name: "v", Indeterminate: []string{"a"}}
	noRun := result.Variant{Name: "v", NotRun: []string{"a"}}
	cases := []struct {
		name string
		run  result.Run
		want string
	}{
		{"all pass", result.Run{Scenarios: []result.Scenario{pass, notRun}, Variants: []result.Variant{caught}}, result.Pass},
		{"a correct run failed", result.Run{Scenarios: []result.Scenario{pass, fail, unknown}}, result.Fail},
		{"a run stayed indeterminate", result.Run{Scenarios: []result.Scenario{pass, unknown}}, result.Indeterminate},
		{"a variant missed", result.Run{Scenarios: []result.Scenario{pass}, Variants: []result.Variant{missed}}, result.Fail},
		{"a variant's runs all indeterminate", result.Run{Scenarios: []result.Scenario{pass}, Variants: []result.Variant{unknownVariant}}, result.Indeterminate},
		{"a variant never run", result.Run{Scenarios: []result.Scenario{pass}, Variants: []result.Variant{noRun}}, result.Fail},
		{"nothing ran", result.Run{Scenarios: []result.Scenario{notRun}}, result.Indeterminate},
		{"interrupted", result.Run{Scenarios: []result.Scenario{pass}, Interrupted: true}, result.Indeterminate},
		{"interrupted after a failure", result.Run{Scenarios: []result.Scenario{fail}, Interrupted: true}, result.Fail},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Decide(c.run, false))
		})
	}
}

// TestVerdictsKeepIndeterminateApart: a catching run that showed nothing
// neither caught nor missed its variant.
func TestVerdictsKeepIndeterminateApart(t *testing.T) {
	catches := []Catch{{Variant: "no-inbox", Scenario: "s1", Expect: "duplicate-effect"}, {Variant: "no-inbox", Scenario: "s2", Expect: "duplicate-effect"}}
	runs := []result.Scenario{
		{Name: "s1", Variant: "no-inbox", Verdict: result.Indeterminate, Reason: "fault never happened"},
		{Name: "s2", Variant: "no-inbox", Verdict: result.NotRun},
	}
	v := Verdicts(catches, runs)
	require.Len(t, v, 1)
	assert.False(t, v[0].Caught)
	assert.Equal(t, []string{"s1"}, v[0].Indeterminate)
	assert.Empty(t, v[0].Missed)
	assert.Equal(t, []string{"s2"}, v[0].NotRun)
	_, _, cells := Matrix(result.Run{Scenarios: runs}, catches)
	assert.Equal(t, Indeterminate, cells["no-inbox"]["s1"])
	assert.Equal(t, NotRun, cells["no-inbox"]["s2"])
}
