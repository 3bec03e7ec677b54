package scenarios

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
)

// noBudget is the fixture: the reference's target file without its
// retry-budget setting, as a black-box team's would be.
var noBudget = filepath.Join("testdata", "no-retry-budget", "faultline.yaml")

// unbindOf is the one unbinding of sc's schedule.
func unbindOf(t *testing.T, sc runner.Scenario) fault.Unbind {
	t.Helper()
	for _, f := range sc.Schedule(1) {
		if u, ok := f.(fault.Unbind); ok {
			return u
		}
	}
	require.Fail(t, "no unbinding", sc.Name)
	return fault.Unbind{}
}

// The unroutable scenarios turn the retry budget where the target offers
// it (the outage then timed by the relays' measured round trips) and run
// without it where it does not, their outage bounded by the target's
// timing.rides_out, or a fixed spell with a row given up on flagged; the
// one whose point is the budget still requires it.
func TestUnroutableSettingsArePreferences(t *testing.T) {
	fixture, err := target.Load(noBudget)
	require.NoError(t, err)
	require.NotContains(t, fixture.Settings, retryBudget)
	unsaid := *fixture
	unsaid.RidesOut = 0
	for _, tc := range []struct {
		scenario   string
		on         *target.Target
		err        string
		budget     string
		outage     time.Duration
		shaped     bool
		noneFailed bool
	}{
		{scenario: "blackbox-unroutable-then-routable", on: tgt, budget: "30", outage: 3 * time.Second, shaped: true, noneFailed: true},
		{scenario: "blackbox-unroutable-then-routable", on: fixture, outage: 1500 * time.Millisecond, noneFailed: true},
		{scenario: "blackbox-unroutable-then-routable", on: &unsaid, outage: 3 * time.Second},
		{scenario: "unroutable-then-routable", on: tgt, budget: "30", outage: 3 * time.Second, noneFailed: true},
		{scenario: "unroutable-then-routable", on: fixture, outage: 1500 * time.Millisecond, noneFailed: true},
		{scenario: "unroutable-short-outage", on: tgt, budget: "8", outage: 1500 * time.Millisecond, shaped: true, noneFailed: true},
		{scenario: "unroutable-short-outage", on: fixture, outage: 1500 * time.Millisecond, noneFailed: true},
		{scenario: "unroutable-short-outage", on: &unsaid, err: "no outage is known to be inside"},
	} {
		t.Run(tc.scenario+" on "+tc.on.Name+map[bool]string{true: " without rides_out"}[tc.on.RidesOut == 0], func(t *testing.T) {
			sc, err := Lookup(tc.scenario)
			require.NoError(t, err)
			got, _, err := sc.On(tc.on)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.budget, got.Settings[retryBudget])
			u := unbindOf(t, got)
			assert.Equal(t, tc.outage, u.Duration)
			assert.Equal(t, tc.shaped, u.Shape)
			assert.Equal(t, tc.noneFailed, slices.Contains(got.Invariants, check.NoneGaveUp))
		})
	}
	exhausted, err := Lookup("unroutable-budget-exhausted")
	require.NoError(t, err)
	assert.Contains(t, exhausted.Settings, retryBudget, "its point is the budget running out: required")
}

// TestUnroutableWithoutRetryBudget: on the fixture (no retry-budget
// setting) blackbox-unroutable-then-routable runs — not "not run" — and
// passes on the correct pipeline, and catches ignore-return (a return
// never matched to its publish) as lost.
func TestUnroutableWithoutRetryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real infrastructure; not in -short")
	}
	fixture, err := target.Load(noBudget)
	require.NoError(t, err)
	cleanup := supervisor.NewCleanup()
	t.Cleanup(func() { _ = cleanup.Run(context.Background()) })
	sh, err := shared.WithTarget(context.Background(), fixture, cleanup)
	require.NoError(t, err)
	sc, err := Lookup("blackbox-unroutable-then-routable")
	require.NoError(t, err)
	run, err := gate.Run(context.Background(), sh, gate.Plan{
		Scenarios: []runner.Scenario{sc}, Catches: []gate.Catch{{Variant: "ignore-return", Scenario: sc.Name, Expect: "lost"}},
		Seeds: []int64{seed}, Parallel: 2, Retries: retries,
		Progress: func(done, total int, res result.Scenario) {
			report(t, res)
		}})
	require.NoError(t, err)
	for _, r := range run.Scenarios {
		assert.NotEqual(t, result.NotRun, r.Verdict, "%s on %s: %s", r.Name, r.Variant, r.Reason)
		if r.Variant == "correct" {
			assert.Equal(t, result.Pass, r.Verdict, r.Reason)
		}
	}
	require.Len(t, run.Variants, 1)
	assert.True(t, run.Variants[0].Caught, "ignore-return not caught with lost: missed by %v", run.Variants[0].Missed)
}
