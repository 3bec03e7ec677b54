package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/target"
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
		{"a variant that never settles", job{sc: steady, variant: "no-lease", stuck: true}, 5*time.Second + VariantStall},
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

// A variant's run that failed on another count while its window never
// opened showed nothing of the variant: it is indeterminate (run again by
// the gate), not a miss. One whose window opened and showed another
// violation missed it.
func TestVerdictsUnopenedIsNotAMiss(t *testing.T) {
	catches := []Catch{{Variant: "published-before-confirm", Scenario: "broker-nack", Expect: "lost"}}
	other := func(opened bool) result.Scenario {
		r := failedWith("broker-nack", 1, "stuck-row")
		r.Variant = "published-before-confirm"
		r.Faults = []result.Fault{{Kind: "crash", Target: "consumer", Hit: opened}}
		return r
	}
	for _, tc := range []struct {
		name            string
		run             result.Scenario
		missed, unknown bool
		cell            string
	}{
		{name: "window unopened, another violation", run: other(false), unknown: true, cell: Indeterminate},
		{name: "window opened, another violation", run: other(true), missed: true, cell: Missed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.unknown, showedNothing(tc.run, "lost", true))
			assert.False(t, showedNothing(tc.run, "", false), "a correct run's failure is never set aside")
			v := Verdicts(catches, []result.Scenario{tc.run})
			require.Len(t, v, 1)
			assert.False(t, v[0].Caught)
			assert.Equal(t, tc.missed, len(v[0].Missed) > 0, "missed: %+v", v[0])
			assert.Equal(t, tc.unknown, len(v[0].Indeterminate) > 0, "indeterminate: %+v", v[0])
			_, _, cells := Matrix(result.Run{Scenarios: []result.Scenario{tc.run}}, catches)
			assert.Equal(t, tc.cell, cells["published-before-confirm"]["broker-nack"])
		})
	}
}

// failedWith is a failed correct-pipeline run of scenario whose invariants
// broke with violations of kinds (one invariant each, one event each).
func failedWith(scenario string, seed int64, kinds ...string) result.Scenario {
	r := result.Scenario{Name: scenario, Variant: "correct", Seed: seed, Verdict: result.Fail}
	for _, k := range kinds {
		r.Invariants = append(r.Invariants, result.Invariant{Name: "no-" + k, Violations: []result.Violation{{Kind: k, EventIDs: []string{"e-" + k}}}})
	}
	return r
}

// TestKnownFindings: a correct run that fails with exactly a known
// finding's kinds (at least one of them, none other) does not fail the
// gate and is reported with its figures; one with an extra kind still
// fails; a finding that no longer shows (its run passed, or its scenario
// was not run) fails the gate; an indeterminate run stays indeterminate.
func TestKnownFindings(t *testing.T) {
	unroutable := target.KnownFinding{Scenario: "unroutable", Violations: []string{"lost", "stuck-row"}, Cause: "no basic.return listener"}
	pass := result.Scenario{Name: "a", Variant: "correct", Seed: 1, Verdict: result.Pass}
	lost := failedWith("unroutable", 1, "lost")
	lost.Counts.Lost = 73
	lost.Invariants[0].Violations[0].EventIDs = []string{"e1", "e2"} // capped: the count is the run's
	tests := []struct {
		name       string
		runs       []result.Scenario
		verdict    string
		status     string
		known      []bool // per run of unroutable, in order
		detail     string
		figures    string
		variantsOn bool
	}{
		{"exactly a known kind: pass", []result.Scenario{pass, lost}, result.Pass, result.KnownShown, []bool{true}, "", "lost 73", false},
		{"every known kind", []result.Scenario{pass, failedWith("unroutable", 1, "stuck-row", "lost")}, result.Pass, result.KnownShown, []bool{true}, "", "lost 1, stuck-row 1", false},
		{"an extra kind: fail", []result.Scenario{pass, failedWith("unroutable", 1, "lost", "phantom")}, result.Fail, result.KnownOther, []bool{false},
			"unroutable failed with violations the finding does not list (it lists lost, stuck-row): seed 1: lost, phantom", "", false},
		{"another kind only: fail", []result.Scenario{failedWith("unroutable", 1, "duplicate-effect")}, result.Fail, result.KnownOther, []bool{false}, "seed 1: duplicate-effect", "", false},
		{"a broken invariant without violations: fail", []result.Scenario{{Name: "unroutable", Variant: "correct", Seed: 1, Verdict: result.Fail,
			Invariants: []result.Invariant{{Name: "converged"}, {Name: "no-lost", Violations: []result.Violation{{Kind: "lost"}}}}}}, result.Fail, result.KnownOther, []bool{false}, "", "", false},
		{"not reproduced: the run passed", []result.Scenario{pass, {Name: "unroutable", Variant: "correct", Seed: 1, Verdict: result.Pass}}, result.Fail, result.KnownNotReproduced, []bool{false},
			"known finding not reproduced: unroutable no longer shows lost, stuck-row (passed with seed 1); if the library fixed it, remove it from the target file", "", false},
		{"not reproduced on one seed of two", []result.Scenario{lost, {Name: "unroutable", Variant: "correct", Seed: 2, Verdict: result.Pass}}, result.Fail, result.KnownNotReproduced, []bool{true, false},
			"(passed with seed 2)", "", false},
		{"not reproduced: not run", []result.Scenario{pass, {Name: "unroutable", Variant: "correct", Seed: 1, Verdict: result.NotRun, Reason: "the target offers no crash point"}}, result.Fail, result.KnownNotReproduced, []bool{false},
			"(it was not run: the target offers no crash point); remove it from the target file", "", false},
		{"indeterminate stays indeterminate", []result.Scenario{pass, {Name: "unroutable", Variant: "correct", Seed: 1, Verdict: result.Indeterminate, Reason: "window not shown"}}, result.Indeterminate, result.KnownIndeterminate, []bool{false},
			"unroutable showed nothing (indeterminate: seed 1)", "", false},
		{"shown on one seed, indeterminate on another", []result.Scenario{lost, {Name: "unroutable", Variant: "correct", Seed: 2, Verdict: result.Indeterminate}}, result.Indeterminate, result.KnownShown, []bool{true, false}, "", "lost 73", false},
		{"another scenario's failure still fails", []result.Scenario{lost, failedWith("b", 1, "lost")}, result.Fail, result.KnownShown, []bool{true}, "", "lost 73", false},
		{"a variant's run is no known finding", []result.Scenario{pass, lost, func() result.Scenario { r := lost; r.Variant = "no-inbox"; return r }()}, result.Pass, result.KnownShown, []bool{true, false}, "", "lost 73", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := append([]result.Scenario(nil), tt.runs...)
			for i := range runs {
				runs[i].Invariants = append([]result.Invariant(nil), runs[i].Invariants...)
			}
			findings := MarkKnown([]target.KnownFinding{unroutable}, runs)
			require.Len(t, findings, 1)
			f := findings[0]
			assert.Equal(t, tt.status, f.Status)
			assert.Equal(t, "no basic.return listener", f.Cause)
			assert.Equal(t, []string{"lost", "stuck-row"}, f.Violations)
			assert.Contains(t, f.Detail, tt.detail)
			var known []bool
			for _, r := range runs {
				if r.Name == "unroutable" {
					known = append(known, r.Known)
				}
			}
			assert.Equal(t, tt.known, known)
			if tt.figures != "" {
				require.NotEmpty(t, f.Shown)
				assert.Equal(t, tt.figures, f.Shown[0].String())
				assert.Equal(t, "seed 1: "+tt.figures, f.Line())
			}
			run := result.Run{Scenarios: runs, KnownFindings: findings}
			assert.Equal(t, tt.verdict, Decide(run, false))
		})
	}
}

// A target file's known finding must name a scenario of the catalogue.
func TestKnownFindingsOf(t *testing.T) {
	catalogue := []runner.Scenario{{Name: "blackbox-unroutable-then-routable"}, {Name: "broker-restart"}}
	tg := &target.Target{Path: "/x/faultline.yaml", KnownFindings: []target.KnownFinding{
		{Scenario: "blackbox-unroutable-then-routable", Violations: []string{"lost"}, Cause: "c", Line: 3},
	}}
	got, err := KnownFindingsOf(tg, catalogue)
	require.NoError(t, err)
	assert.Equal(t, tg.KnownFindings, got)

	tg.KnownFindings = append(tg.KnownFindings, target.KnownFinding{Scenario: "blackbox-unroutable", Violations: []string{"lost"}, Cause: "c", Line: 7},
		target.KnownFinding{Scenario: "nope", Violations: []string{"lost"}, Cause: "c", Line: 9})
	_, err = KnownFindingsOf(tg, catalogue)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `/x/faultline.yaml:7: known_findings[blackbox-unroutable].scenario: unknown scenario "blackbox-unroutable" (did you mean blackbox-unroutable-then-routable?)`)
	assert.Contains(t, err.Error(), `/x/faultline.yaml:9: known_findings[nope].scenario: unknown scenario "nope" (known: blackbox-unroutable-then-routable, broker-restart)`)
}

// Without the correct pipeline (VariantsOnly) known findings decide nothing.
func TestDecideVariantsOnlyIgnoresKnownFindings(t *testing.T) {
	run := result.Run{Variants: []result.Variant{{Name: "v", Caught: true}},
		KnownFindings: []result.KnownFinding{{Scenario: "s", Status: result.KnownNotReproduced}}}
	assert.Equal(t, result.Pass, Decide(run, true))
}
