package result

import (
	"slices"
	"time"
)

// Timing is the time to a verdict: what the command spent starting the
// shared infrastructure, running the scenarios and in all, and the figures
// it is held against.
type Timing struct {
	// InfraStartMS is the shared infrastructure's start-up, once per
	// command: PostgreSQL, RabbitMQ, Toxiproxy and building the pipeline.
	InfraStartMS int64 `json:"infra_start_ms"`
	// StartPartsMS are its parts where known (postgres and rabbitmq on the
	// local provider, build, toxiproxy); some run side by side, so they
	// need not add up to InfraStartMS.
	StartPartsMS map[string]int64 `json:"start_parts_ms,omitempty"`
	// RunsMS is every scenario run, from the first one's start to the last
	// one's end.
	RunsMS int64 `json:"runs_ms"`
	// ExclusiveMS is the part of RunsMS during which one run had the shared
	// broker to itself (it restarts it) and nothing else ran.
	ExclusiveMS int64 `json:"exclusive_ms,omitempty"`
	// TotalMS is the whole command up to its verdict: infrastructure up,
	// every run, infrastructure down; the report is written after it.
	TotalMS int64 `json:"total_ms"`
	// ScenarioMedianMS and ScenarioMaxMS are over the runs that ran (see
	// ScenarioStats).
	ScenarioMedianMS int64 `json:"scenario_median_ms"`
	ScenarioMaxMS    int64 `json:"scenario_max_ms"`
	// Goals held against TotalMS and ScenarioMedianMS; 0 is no goal.
	GoalTotalMS          int64 `json:"goal_total_ms,omitempty"`
	GoalScenarioMedianMS int64 `json:"goal_scenario_median_ms,omitempty"`
}

// Goal is one figure against its goal.
type Goal struct {
	Name   string
	MS     int64 // the figure
	GoalMS int64 // at most this
	Met    bool
}

// Goals lists the figures that have a goal, each with whether it was met.
func (t Timing) Goals() []Goal {
	var out []Goal
	for _, g := range []Goal{
		{Name: "total", MS: t.TotalMS, GoalMS: t.GoalTotalMS},
		{Name: "scenario median", MS: t.ScenarioMedianMS, GoalMS: t.GoalScenarioMedianMS},
	} {
		if g.GoalMS > 0 {
			g.Met = g.MS <= g.GoalMS
			out = append(out, g)
		}
	}
	return out
}

// ScenarioStats are the median and the maximum wall time of the runs that
// ran (a run that was not run says nothing about how long one takes). The
// median of an even count is the mean of the two middle times. No run
// gives zeros.
func ScenarioStats(runs []Scenario) (median, maxMS int64) {
	var ms []int64
	for _, r := range runs {
		if r.Verdict != NotRun {
			ms = append(ms, r.DurationMS)
		}
	}
	if len(ms) == 0 {
		return 0, 0
	}
	slices.Sort(ms)
	n := len(ms)
	if n%2 == 1 {
		median = ms[n/2]
	} else {
		median = (ms[n/2-1] + ms[n/2]) / 2
	}
	return median, ms[n-1]
}

// PhaseTime is how long one phase of a run took.
type PhaseTime struct {
	Name string
	MS   int64
}

// Teardown names the time after a run's last phase: removing its
// processes, databases, vhost and links (not a phase of its own).
const Teardown = "teardown"

// PhaseTimes says where a run's wall time went: each phase, then the
// teardown after the last one (what is left of DurationMS).
func (s Scenario) PhaseTimes() []PhaseTime {
	var out []PhaseTime
	var last time.Time
	for _, p := range s.Phases {
		if p.End.IsZero() {
			continue
		}
		out = append(out, PhaseTime{Name: p.Name, MS: p.End.Sub(p.Start).Milliseconds()})
		if p.End.After(last) {
			last = p.End
		}
	}
	if !last.IsZero() && !s.Started.IsZero() {
		if rest := s.Started.Add(time.Duration(s.DurationMS) * time.Millisecond).Sub(last).Milliseconds(); rest > 0 {
			out = append(out, PhaseTime{Name: Teardown, MS: rest})
		}
	}
	return out
}
