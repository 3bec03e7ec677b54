package result

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestScenarioStats(t *testing.T) {
	run := func(ms int64, verdict string) Scenario { return Scenario{DurationMS: ms, Verdict: verdict} }
	for _, tc := range []struct {
		name        string
		runs        []Scenario
		median, max int64
	}{
		{"none", nil, 0, 0},
		{"one", []Scenario{run(7000, Pass)}, 7000, 7000},
		{"odd count, unsorted", []Scenario{run(9000, Pass), run(7000, Fail), run(16000, Pass)}, 9000, 16000},
		{"even count: mean of the middle two", []Scenario{run(8000, Pass), run(7000, Pass), run(10000, Fail), run(20000, Pass)}, 9000, 20000},
		{"not-run runs do not count", []Scenario{run(8000, Pass), run(1, NotRun), run(2, NotRun)}, 8000, 8000},
		{"only not-run runs", []Scenario{run(5, NotRun)}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			median, maxMS := ScenarioStats(tc.runs)
			assert.Equal(t, tc.median, median)
			assert.Equal(t, tc.max, maxMS)
		})
	}
}

func TestGoals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		timing Timing
		want   []Goal
	}{
		{"no goals", Timing{TotalMS: 5000, ScenarioMedianMS: 100}, nil},
		{"both met, the limit itself included", Timing{TotalMS: 120000, GoalTotalMS: 120000, ScenarioMedianMS: 8000, GoalScenarioMedianMS: 10000}, []Goal{
			{Name: "total", MS: 120000, GoalMS: 120000, Met: true},
			{Name: "scenario median", MS: 8000, GoalMS: 10000, Met: true},
		}},
		{"total missed", Timing{TotalMS: 120001, GoalTotalMS: 120000, ScenarioMedianMS: 8000, GoalScenarioMedianMS: 10000}, []Goal{
			{Name: "total", MS: 120001, GoalMS: 120000, Met: false},
			{Name: "scenario median", MS: 8000, GoalMS: 10000, Met: true},
		}},
		{"only a median goal", Timing{TotalMS: 300000, ScenarioMedianMS: 11000, GoalScenarioMedianMS: 10000}, []Goal{
			{Name: "scenario median", MS: 11000, GoalMS: 10000, Met: false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.timing.Goals())
		})
	}
}

func TestPhaseTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name string
		run  Scenario
		want []PhaseTime
	}{
		{"no phases", Scenario{Started: t0, DurationMS: 50}, nil},
		{"phases and the teardown after them", Scenario{Started: t0, DurationMS: 8000, Phases: []Phase{
			{Name: "infra", Start: at(0), End: at(500)},
			{Name: "workload", Start: at(500), End: at(5500)},
			{Name: "converging", Start: at(5500), End: at(7600)},
		}}, []PhaseTime{{"infra", 500}, {"workload", 5000}, {"converging", 2100}, {Teardown, 400}}},
		{"no time left for a teardown", Scenario{Started: t0, DurationMS: 500, Phases: []Phase{
			{Name: "infra", Start: at(0), End: at(500)},
		}}, []PhaseTime{{"infra", 500}}},
		{"an unfinished phase is left out", Scenario{Started: t0, DurationMS: 900, Phases: []Phase{
			{Name: "infra", Start: at(0), End: at(300)},
			{Name: "workload", Start: at(300)},
		}}, []PhaseTime{{"infra", 300}, {Teardown, 600}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.run.PhaseTimes())
		})
	}
}
