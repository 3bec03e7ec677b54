package reports

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/scenarios"
)

// fixtureCatalogue is a gate run as wide as the reference's: every
// scenario of the default profile on the correct pipeline and every
// variant of the reference's target file run by the scenarios that must
// catch it, each caught. One run of the correct pipeline failed: events
// lost at the skipped stage under a broker nack. The figures are the
// fixture's, not a measurement; the widths are the catalogue's.
func fixtureCatalogue(t *testing.T) result.Run {
	t.Helper()
	tg, err := target.Load(filepath.Join("..", "system", "faultline.yaml"))
	require.NoError(t, err)
	run := result.Run{Schema: result.Schema, Target: "orders", TargetFile: "/home/team/orders/faultline.yaml", Version: "v0.9.0",
		Seed: 7, Seeds: []int64{7}, Started: t0, DurationMS: 212_000, Verdict: result.Fail, Infra: "local",
		Timing: &result.Timing{InfraStartMS: 6100, StartPartsMS: map[string]int64{"infra": 6000, "rabbitmq": 5900, "postgres": 1400, "build": 2100, "toxiproxy": 90},
			RunsMS: 205_000, ExclusiveMS: 31_000, TotalMS: 212_000, ScenarioMedianMS: 14_200, ScenarioMaxMS: 41_000,
			GoalTotalMS: 300_000, GoalScenarioMedianMS: 20_000}}
	windows := map[string]string{}
	for _, sc := range scenarios.Every() {
		windows[sc.Name] = sc.Window
	}
	picked, err := scenarios.Profile(scenarios.ProfileDefault)
	require.NoError(t, err)
	ran := func(name, variant string, i int) result.Scenario {
		c := counts(150 + i%7*10)
		return result.Scenario{Name: name, Variant: variant, Seed: 7, Window: windows[name], Verdict: result.Pass, Counts: c,
			Invariants: invariants(), RecoveryMS: int64(900 + i*37%2000), DurationMS: int64(11_000 + i*311%9000), Started: at(-7000)}
	}
	for i, sc := range picked {
		s := ran(sc.Name, correct, i)
		if sc.Name == "broker-nack" {
			ids := lostIDs("01JNACKED", 3)
			s.Verdict, s.Reason = result.Fail, "invariant broken: no-lost-event: 3 committed events have no effect"
			s.Counts.Lost, s.Counts.Reservations = 3, s.Counts.Reservations-3
			s.Invariants = invariants(result.Invariant{Name: "no-lost-event", Detail: "3 committed events have no effect",
				Violations: []result.Violation{{Kind: "lost", EventIDs: ids, Message: "3 committed events never took effect (skipped 3)",
					Stages: map[result.Stage][]string{result.StageSkipped: ids}}}})
		}
		run.Scenarios = append(run.Scenarios, s)
	}
	run.TargetVariants = []result.TargetVariant{}
	for i, v := range tg.Variants {
		run.TargetVariants = append(run.TargetVariants, result.TargetVariant{Name: v.Name, Guard: v.Guard, Expect: v.Expect, CaughtBy: v.CaughtBy})
		verdict := result.Variant{Name: v.Name, Guard: v.Guard, Expected: v.Expect, Caught: true, CaughtBy: []string{}}
		for _, name := range v.CaughtBy {
			if _, ok := windows[name]; !ok {
				continue
			}
			s := ran(name, v.Name, i)
			s.Verdict = result.Fail
			s.Invariants = invariants(result.Invariant{Name: "no-lost-event", Violations: []result.Violation{{Kind: v.Expect, EventIDs: []string{"01JVARIANT0000000000000000"}, Message: "caught"}}})
			run.Scenarios = append(run.Scenarios, s)
			verdict.CaughtBy = append(verdict.CaughtBy, name)
		}
		run.Variants = append(run.Variants, verdict)
	}
	return run
}

// The reference's whole catalogue fits at 1280 px too: its window table,
// its catch matrix of every variant against every scenario that must
// catch one, its findings.
func TestCatalogueReportFitsViewport(t *testing.T) {
	needChromium(t)
	run := fixtureCatalogue(t)
	require.Greater(t, len(run.Variants), 15, "every variant of the reference")
	rep := overflowOf(t, run)
	assert.LessOrEqual(t, rep.Page, rep.Viewport, "the page is no wider than the viewport")
	assert.Empty(t, rep.Over)
}
