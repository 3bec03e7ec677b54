package runner

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/harness/workload"
)

// A preferred setting the target offers is turned as a required one is; one
// it lacks leaves the scenario to Without (which may bound its timing, or
// refuse), or, with no Without, runs it untuned. Required settings are
// kept either way: the runner refuses those the target lacks.
func TestScenarioOnTarget(t *testing.T) {
	offers := &target.Target{Settings: map[string]target.Setting{"retry-budget": {Name: "retry-budget", Role: "relay"}}}
	lacks := &target.Target{Settings: map[string]target.Setting{}}
	bounded := func(sc Scenario, _ *target.Target, missing []string) (Scenario, string, error) {
		sc.Invariants = nil
		return sc, "bounded without " + missing[0], nil
	}
	refuses := func(Scenario, *target.Target, []string) (Scenario, string, error) {
		return Scenario{}, "", errors.New("no outage known to be inside the budget")
	}
	base := Scenario{Name: "s", Invariants: []string{check.NoneGaveUp}, Settings: map[string]string{"queue-max-length": "5"}, Prefers: map[string]string{"retry-budget": "30"}}
	for _, tc := range []struct {
		name       string
		without    func(Scenario, *target.Target, []string) (Scenario, string, error)
		t          *target.Target
		settings   map[string]string
		how, err   string
		noneFailed bool
	}{
		{name: "offered: turned", without: bounded, t: offers, settings: map[string]string{"queue-max-length": "5", "retry-budget": "30"}, noneFailed: true},
		{name: "not offered: bounded instead", without: bounded, t: lacks, settings: map[string]string{"queue-max-length": "5"}, how: "bounded without retry-budget"},
		{name: "not offered: refused", without: refuses, t: lacks, err: "no outage known"},
		{name: "not offered, no Without: untuned", t: lacks, settings: map[string]string{"queue-max-length": "5"}, noneFailed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := base
			sc.Without = tc.without
			got, how, err := sc.On(tc.t)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.settings, got.Settings)
			assert.Empty(t, got.Prefers, "resolved: nothing left to prefer")
			assert.Equal(t, tc.how, how)
			assert.Equal(t, tc.noneFailed, slices.Contains(got.Invariants, check.NoneGaveUp))
			assert.Equal(t, map[string]string{"queue-max-length": "5"}, base.Settings, "the catalogue's value is not changed")
		})
	}
}

// The reason an outage judged by its shape ended unopened reaches the
// checks; an outage by the clock, or one that opened, gives none.
func TestUnopenedOutage(t *testing.T) {
	unopened := result.Fault{ByRetries: true, Error: "window not opened: a row came within a retry of its budget of 8"}
	assert.Equal(t, "a row came within a retry of its budget of 8", unopenedOutage([]result.Fault{unopened}))
	assert.Empty(t, unopenedOutage([]result.Fault{{ByRetries: true, Hit: true}}))
	assert.Empty(t, unopenedOutage([]result.Fault{{Error: unopened.Error}}), "an outage by the clock")
	assert.Empty(t, unopenedOutage([]result.Fault{{ByRetries: true, Error: "unbind order.created: channel closed"}}), "a fault that failed is not an unopened window")
}

// An unbinding's span ends where the fault bound the queue again, and
// lasts to the end of the run where it never did.
func TestUnboundSpans(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	got := unboundSpans([]result.Fault{
		{Unbound: true, Rebound: true, Start: t0, End: t0.Add(time.Second)},
		{Kind: "crash", Hit: true, Start: t0, End: t0.Add(time.Second)},
		{Unbound: true, Start: t0.Add(2 * time.Second), End: t0.Add(3 * time.Second)},
	})
	assert.Equal(t, []history.Interval{{Start: t0, End: t0.Add(time.Second)}, {Start: t0.Add(2 * time.Second)}}, got)
}

// A seed picks the run's traffic among the scenario's profiles in turn,
// and never changes its faults.
func TestTrafficFor(t *testing.T) {
	sc := Scenario{Name: "s", Workload: workload.Steady(), Also: []workload.Spec{workload.BurstSpec(), workload.ConsumerBacklogSpec()}}
	var got []string
	for seed := int64(-3); seed <= 3; seed++ {
		got = append(got, sc.TrafficFor(seed).ProfileName())
	}
	assert.Equal(t, []string{workload.Paced, workload.Burst, workload.ConsumerBacklog, workload.Paced, workload.Burst, workload.ConsumerBacklog, workload.Paced}, got)
	alone := Scenario{Name: "s", Workload: workload.BurstSpec()}
	for seed := int64(0); seed < 3; seed++ {
		assert.Equal(t, workload.BurstSpec(), alone.TrafficFor(seed))
	}
	assert.Len(t, sc.Traffic(), 3)
}
