package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
)

// phaseColumns are the columns of the per-run table: the runner's phases,
// then the teardown after them.
var phaseColumns = []string{runner.PhaseInfra, runner.PhaseWorkload, runner.PhaseFaults, runner.PhaseConverging, runner.PhaseChecking, result.Teardown}

// waits says where runs wait on something of ours (README, "Time to a
// verdict"); variants adds the gate's bound on a broken variant's
// convergence.
func waits(variants bool, lease time.Duration) []string {
	out := []string{
		"workload: paced, most scenarios send 120 orders over 5s so faults land mid-stream",
		fmt.Sprintf("converging: until settled and then quiet for %s (the management API's unacked count lags), polled every 200ms", runner.QuietWindow),
		fmt.Sprintf("relays: the target's lease %s (a dead relay's rows are taken over after it; overlaps the workload)", lease),
		"faults: a broker restart waits for RabbitMQ to boot again (about 5s); these runs have the broker to themselves",
	}
	if variants {
		out = append(out, fmt.Sprintf("variants: convergence ends once nothing changed for %s or five leases (no-lease never converges and waits that long)", gate.VariantStall))
	}
	return out
}

// printTiming prints the time to a verdict: the infrastructure's start-up,
// the runs, the whole command and the median and slowest scenario against
// the goals, then every run, slowest first, with where its time went, and
// where runs wait. whole names the command ("gate", "run").
func printTiming(w io.Writer, t *result.Timing, runs []result.Scenario, whole string, waitLines []string) {
	if t == nil {
		return
	}
	goals := map[string]result.Goal{}
	for _, g := range t.Goals() {
		goals[g.Name] = g
	}
	against := func(name string) string {
		g, ok := goals[name]
		if !ok {
			return ""
		}
		verdict := "met"
		if !g.Met {
			verdict = "MISSED"
		}
		return fmt.Sprintf("goal ≤ %s: %s", secs(g.GoalMS), verdict)
	}
	fmt.Fprintln(w, "\ntime to a verdict:")
	for _, r := range [][3]string{
		{"infrastructure start-up", secs(t.InfraStartMS), startParts(t.StartPartsMS)},
		{"runs", secs(t.RunsMS), exclusiveNote(t)},
		{"whole " + whole, secs(t.TotalMS), against("total")},
		{"median scenario", secs(t.ScenarioMedianMS), against("scenario median")},
		{"slowest scenario", secs(t.ScenarioMaxMS), slowest(runs, t.ScenarioMaxMS)},
	} {
		head := fmt.Sprintf("  %-24s %7s  ", r[0], r[1])
		if r[2] == "" {
			fmt.Fprintln(w, strings.TrimRight(head, " "))
			continue
		}
		printWrapped(w, head, strings.Repeat(" ", len(head)), r[2])
	}

	fmt.Fprintln(w, "runs, slowest first (seconds):")
	sorted := slowestFirst(runs)
	names := make([]string, len(sorted))
	// The figures take 2 + 8 + 6×(1+10) columns at most; a name that
	// leaves no room for them on a 100-column line gets a line of its own.
	cols := 0
	for _, c := range phaseColumns {
		cols += 1 + colWidth(c)
	}
	room := termWidth - 2 - 8 - cols
	width := len("run")
	for i, r := range sorted {
		names[i] = fmt.Sprintf("%s [%s] seed %d", r.Name, r.Variant, r.Seed)
		if len(names[i]) <= room {
			width = max(width, len(names[i]))
		}
	}
	header := fmt.Sprintf("  %-*s %7s", width, "run", "wall")
	for _, c := range phaseColumns {
		header += fmt.Sprintf(" %*s", colWidth(c), phaseLabel[c])
	}
	fmt.Fprintln(w, header)
	for i, r := range sorted {
		name := names[i]
		if len(name) > width {
			fmt.Fprintf(w, "  %s\n", name)
			name = ""
		}
		row := fmt.Sprintf("  %-*s", width, name)
		if r.Verdict == result.NotRun {
			fmt.Fprintln(w, row+" "+fmt.Sprintf("%7s", "not run"))
			continue
		}
		row += fmt.Sprintf(" %7.1f", float64(r.DurationMS)/1000)
		took := map[string]int64{}
		for _, p := range r.PhaseTimes() {
			took[p.Name] += p.MS
		}
		for _, c := range phaseColumns {
			cell := "-"
			if ms, ok := took[c]; ok {
				cell = fmt.Sprintf("%.1f", float64(ms)/1000)
			}
			row += fmt.Sprintf(" %*s", colWidth(c), cell)
		}
		fmt.Fprintln(w, row)
	}
	if len(waitLines) > 0 {
		fmt.Fprintln(w, "where runs wait:")
		for _, l := range waitLines {
			printWrapped(w, "  ", "    ", l)
		}
	}
}

// phaseLabel is a phase's column header: short, so a run's figures fit
// beside its name in 100 columns.
var phaseLabel = map[string]string{
	runner.PhaseInfra: "infra", runner.PhaseWorkload: "load", runner.PhaseFaults: "fault",
	runner.PhaseConverging: "conv", runner.PhaseChecking: "check", result.Teardown: "down",
}

func colWidth(phase string) int { return max(len(phaseLabel[phase]), 5) }

// secs prints milliseconds as seconds with one decimal.
func secs(ms int64) string {
	return fmt.Sprintf("%.1fs", float64(ms)/1000)
}

// startParts says what the start-up was made of: the provider's services
// (side by side), the build running alongside, the Toxiproxy server.
func startParts(parts map[string]int64) string {
	var out []string
	if ms, ok := parts["infra"]; ok {
		s := "infra " + secs(ms)
		var svc []string
		for _, name := range []string{"postgres", "rabbitmq"} {
			if ms, ok := parts[name]; ok {
				svc = append(svc, name+" "+secs(ms))
			}
		}
		if len(svc) > 0 {
			s += " (" + strings.Join(svc, ", ") + ", side by side)"
		}
		out = append(out, s)
	}
	if ms, ok := parts["build"]; ok {
		out = append(out, "build "+secs(ms)+" alongside")
	}
	if ms, ok := parts["toxiproxy"]; ok {
		out = append(out, "toxiproxy "+secs(ms))
	}
	known := map[string]bool{"infra": true, "postgres": true, "rabbitmq": true, "build": true, "toxiproxy": true}
	var other []string
	for name := range parts {
		if !known[name] {
			other = append(other, name)
		}
	}
	sort.Strings(other)
	for _, name := range other {
		out = append(out, name+" "+secs(parts[name]))
	}
	return strings.Join(out, ", ")
}

func exclusiveNote(t *result.Timing) string {
	if t.ExclusiveMS <= 0 {
		return ""
	}
	return secs(t.ExclusiveMS) + " of it with one run alone (it restarts the shared broker)"
}

// slowest names the run that took maxMS.
func slowest(runs []result.Scenario, maxMS int64) string {
	for _, r := range runs {
		if r.Verdict != result.NotRun && r.DurationMS == maxMS {
			return r.Name + " [" + r.Variant + "]"
		}
	}
	return ""
}

// slowestFirst orders runs by wall time, slowest first (in their order
// among equals); runs that did not run come last.
func slowestFirst(runs []result.Scenario) []result.Scenario {
	out := slices.Clone(runs)
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := out[i].Verdict == result.NotRun, out[j].Verdict == result.NotRun
		if ri != rj {
			return rj
		}
		return out[i].DurationMS > out[j].DurationMS
	})
	return out
}
