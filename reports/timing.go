package reports

import (
	"fmt"
	"sort"
	"strings"

	"github.com/faultline-dev/faultline/harness/result"
)

// timingRow is one line of the time to a verdict: a figure, what it is
// made of or which goal it is held against, and whether it met it.
type timingRow struct {
	Label string
	Value string
	Note  string
	Class string // clsGood or clsBad for a figure with a goal, else ""
}

// timingRows are the run's time to a verdict, as figures with notes;
// none for a run that did not record it.
func timingRows(run result.Run) []timingRow {
	t := run.Timing
	if t == nil {
		return nil
	}
	goals := map[string]result.Goal{}
	for _, g := range t.Goals() {
		goals[g.Name] = g
	}
	withGoal := func(r timingRow, name string) timingRow {
		if g, ok := goals[name]; ok {
			r.Class, r.Note = clsGood, "goal ≤ "+fmtDuration(g.GoalMS)+": met"
			if !g.Met {
				r.Class, r.Note = clsBad, "goal ≤ "+fmtDuration(g.GoalMS)+": missed"
			}
		}
		return r
	}
	rows := []timingRow{
		{Label: "infrastructure start-up", Value: fmtDuration(t.InfraStartMS), Note: startPartsText(t.StartPartsMS)},
		{Label: "all runs", Value: fmtDuration(t.RunsMS)},
		withGoal(timingRow{Label: "whole run, to the verdict", Value: fmtDuration(t.TotalMS)}, "total"),
		withGoal(timingRow{Label: "median scenario", Value: fmtDuration(t.ScenarioMedianMS)}, "scenario median"),
		{Label: "slowest scenario", Value: fmtDuration(t.ScenarioMaxMS), Note: slowestName(run.Scenarios, t.ScenarioMaxMS)},
	}
	if t.ExclusiveMS > 0 {
		rows[1].Note = fmtDuration(t.ExclusiveMS) + " of it with one run alone (it restarts the shared broker)"
	}
	return rows
}

// startPartsText lists the parts of the start-up: the provider's, its
// services', the build's and Toxiproxy's, then any other by name.
func startPartsText(parts map[string]int64) string {
	order := []string{"infra", "postgres", "rabbitmq", "build", "toxiproxy"}
	rank := map[string]int{}
	for i, name := range order {
		rank[name] = i
	}
	names := make([]string, 0, len(parts))
	for name := range parts {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		ri, oki := rank[names[i]]
		rj, okj := rank[names[j]]
		switch {
		case oki && okj:
			return ri < rj
		case oki != okj:
			return oki
		}
		return names[i] < names[j]
	})
	out := make([]string, 0, len(names))
	for _, name := range names {
		out = append(out, name+" "+fmtDuration(parts[name]))
	}
	return strings.Join(out, ", ")
}

func slowestName(runs []result.Scenario, maxMS int64) string {
	for _, s := range runs {
		if s.Verdict != result.NotRun && s.DurationMS == maxMS {
			return s.Name + " [" + variantOf(s) + "]"
		}
	}
	return ""
}

// phasesText says where a run's time went: each phase and the teardown,
// in seconds.
func phasesText(s result.Scenario) string {
	var out []string
	for _, p := range s.PhaseTimes() {
		out = append(out, fmt.Sprintf("%s %.1f", p.Name, float64(p.MS)/1000))
	}
	return strings.Join(out, " · ")
}

// slowestRuns are the runs that ran, slowest first.
func slowestRuns(runs []result.Scenario) []result.Scenario {
	var out []result.Scenario
	for _, s := range runs {
		if s.Verdict != result.NotRun {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].DurationMS > out[j].DurationMS })
	return out
}
