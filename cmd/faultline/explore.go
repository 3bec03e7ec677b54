package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/explore"
	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/harness/workload"
)

// settingsFlag is a repeatable --set NAME=VALUE.
type settingsFlag map[string]string

func (s settingsFlag) String() string {
	parts := make([]string, 0, len(s))
	for k, v := range s {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (s settingsFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	s[name] = value
	return nil
}

func cmdExplore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("explore")
	var c common
	c.flags(fs)
	targetFlag(fs, &c.targetPath)
	variant := fs.String("variant", "", "explore this broken variant instead of the correct pipeline")
	budget := fs.Duration("budget", 10*time.Minute, "how long to explore: no run starts after it (runs under way finish)")
	shrinkBudget := fs.Duration("shrink-budget", 5*time.Minute, "how long to shrink the failures found, after the exploration (0: no shrinking)")
	shardFlag := fs.String("shard", "", "i/n: explore only the i-th of n disjoint slices of the enumeration (needs --seed, the same for every shard)")
	hits := fs.Int("hits", explore.DefaultHits, "arm each crash point at hits 1..k")
	first := fs.Bool("first", false, "stop exploring at the first violation (with --variant: of the kind the variant expects) that fails again in --repeats more runs, and shrink what was found; runs under way finish")
	dryRun := fs.Bool("dry-run", false, "print the plan (every run, in order, with its faults and settings) and run nothing")
	repeats := fs.Int("repeats", 2, "a shrink candidate counts as failing only if it fails this many runs out of this many")
	retries := fs.Int("retries", 2, "run a run whose faults happened but that ended without a verdict (an infrastructure error) again this many times, even past --budget; every attempt's reason is kept (also for the runs that recheck, shrink and confirm a finding)")
	traffic := fs.String("traffic", workload.Paced, "the traffic profile every run sends: "+strings.Join(profileNames(), ", ")+" (faultline list shows what each sends); several, comma-separated, or all: each run draws one, by the seed")
	settings := settingsFlag{}
	fs.Var(settings, "set", "NAME=VALUE: turn one of the target's settings for every run (repeatable), e.g. --set lease-renewal=400ms")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("explore takes no arguments, got %q", fs.Arg(0))
	}
	if *budget <= 0 {
		return usagef("--budget must be positive, got %s", *budget)
	}
	if *shrinkBudget < 0 {
		return usagef("--shrink-budget must not be negative, got %s", *shrinkBudget)
	}
	if *hits < 1 || *hits > 100 {
		return usagef("--hits must be 1..100, got %d", *hits)
	}
	if *repeats < 1 {
		return usagef("--repeats must be at least 1, got %d", *repeats)
	}
	if *retries < 0 || *retries > maxRetries {
		return usagef("--retries must be between 0 and %d, got %d", maxRetries, *retries)
	}
	profiles, err := trafficProfiles(*traffic)
	if err != nil {
		return err
	}
	spec, _ := workload.ProfileNamed(profiles[0])
	var shard explore.Shard
	if *shardFlag != "" {
		var err error
		if shard, err = explore.ParseShard(*shardFlag); err != nil {
			return usageError{msg: err.Error()}
		}
		if !flagSet(fs, "seed") {
			return usagef("--shard needs --seed: every shard must enumerate the same list (e.g. --seed $GITHUB_RUN_NUMBER)")
		}
	}
	if err := c.resolve(); err != nil {
		return err
	}
	if err := checkVariant(c.target, *variant); err != nil {
		return err
	}
	for name := range settings {
		if _, ok := c.target.Settings[name]; !ok {
			return usagef("--set %s: target %s has no setting %q (known: %s)", name, c.target.Name, name, strings.Join(settingNames(c.target), ", "))
		}
	}
	surface, err := explore.SurfaceOf(c.target)
	if err != nil {
		return targetErrorf("%v", err)
	}
	items, err := surface.Enumerate(explore.Options{Seed: c.seed, Hits: *hits, Profiles: profiles})
	if err != nil {
		return usagef("target %s: %v", c.target.Name, err)
	}
	part := shard.Of(items)
	if *dryRun {
		printPlan(stdout, part)
		return nil
	}
	dir, err := outDir(c.out)
	if err != nil {
		return err
	}

	rep := newReporter(stderr)
	defer rep.Stop()
	singles := 0
	for _, it := range items {
		if it.Size == 1 {
			singles++
		}
	}
	rep.Logf("explore: target %s [%s], seed %d, shard %s, traffic %s: %d runs of a plan of %d (%d single faults, then combinations), budget %s; report in %s",
		c.target.Name, variantOr(*variant), c.seed, shard, strings.Join(profiles, ", "), len(part), len(items), singles, *budget, dir)
	cfg := explore.Config{
		Target: c.target.Name, Offered: explore.OfferedOf(c.target, surface), Variant: *variant, Seed: c.seed, Hits: *hits,
		Shard: shard, PlanTotal: len(items), Workload: spec, Parallel: c.parallel,
		Budget: *budget, ShrinkBudget: *shrinkBudget, Repeats: *repeats, Retries: *retries, StopAtFirst: *first,
		Phase: rep.Phase, Tick: rep.Tick, FaultDeadline: faultDeadline(profiles, c.target.Lease),
		Progress: func(p explore.Progress) {
			line := progressLine(p)
			if p.Run != "" {
				rep.Done(p.Run, line)
			} else {
				rep.Logf("%s", line)
			}
		},
		Checkpoint: func(r *explore.Report) {
			if err := explore.WriteReport(filepath.Join(dir, explore.ReportFile), r); err != nil {
				rep.Logf("explore: checkpoint: %v", err)
			}
		},
	}
	if len(settings) > 0 {
		cfg.Settings = settings
	}
	if *variant != "" && *variant != "correct" {
		cfg.Stall = gate.VariantStall // as in the gate: a broken pipeline may never settle
		v, _ := c.target.Variant(*variant)
		cfg.StopKind = v.Expect
	}
	var out *explore.Report
	interrupted, err := withShared(ctx, c, dir, rep, func(ctx context.Context, sh *runner.Shared) error {
		out = explore.Explore(ctx, sh, part, cfg)
		return nil
	})
	if err != nil {
		return err
	}
	rep.Stop()
	if err := explore.WriteAll(dir, out); err != nil {
		return err
	}
	printExplore(stdout, out, dir, replayTarget(c.targetPath))
	if interrupted {
		fmt.Fprintln(stdout, "explore: interrupted: the runs under way ended without a verdict")
		return errInterrupted
	}
	return exploreVerdict(out)
}

// exploreVerdict is an exploration's exit: a violation, else runs that
// ended without a verdict (an error: the exploration is not a pass), else
// none.
func exploreVerdict(r *explore.Report) error {
	if len(r.Findings) > 0 {
		return errViolation
	}
	if n := len(explore.Unjudged(r.Runs)); n > 0 {
		return fmt.Errorf("explore: %d run(s) ended without a verdict on the pipeline (listed above): the exploration is not a pass: %w", n, errIndeterminate)
	}
	return nil
}

// flagSet reports whether the flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// checkVariant says, as a usage error, that the target has no such variant.
func checkVariant(t *target.Target, variant string) error {
	if variant == "" || variant == "correct" {
		return nil
	}
	if _, ok := t.Variant(variant); !ok {
		return usagef("target %s has no variant %q (known: %s)", t.Name, variant, strings.Join(variantNames(t), ", "))
	}
	return nil
}

func settingNames(t *target.Target) []string {
	var out []string
	for name := range t.Settings {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func variantOr(v string) string {
	if v == "" {
		return "correct"
	}
	return v
}

// replayTarget is the --target a replay command needs ("" for the default).
func replayTarget(path string) string {
	if path == "" {
		return ""
	}
	return " --target " + path
}

// progressLine is one line of how the exploration is getting on: runs
// done, windows covered, violations found, time left.
func progressLine(p explore.Progress) string {
	found := "none"
	if len(p.Violations) > 0 {
		found = kindCounts(p.Violations)
	}
	left := p.Left.Round(time.Second).String() + " left"
	if p.Stage == "shrink" {
		return fmt.Sprintf("[shrink, %d candidates tried, %s] %s", p.Done, left, p.Line)
	}
	return fmt.Sprintf("[%d/%d runs, %d running | windows %d/%d opened | violations: %s | %s] %s",
		p.Done, p.Planned, p.Running, p.Opened, p.Offered, found, left, p.Line)
}

// scheduleScenario is the scenario of a schedule file for `run
// --schedule`: the file must be one of this target's. Unless --seed was
// given the schedule's seed is used, and unless --variant was, its variant.
func scheduleScenario(path string, fs *flag.FlagSet, c *common, variant *string) (runner.Scenario, string, error) {
	s, err := explore.LoadSchedule(path)
	if err != nil {
		return runner.Scenario{}, "", usageError{msg: err.Error()}
	}
	if s.Target != c.target.Name {
		return runner.Scenario{}, "", usagef("schedule %s is of target %q, not of %q (%s): give its target with --target", path, s.Target, c.target.Name, c.target.Path)
	}
	if !flagSet(fs, "seed") {
		c.seed = s.Seed
	}
	if *variant == "" && s.Variant != "correct" {
		*variant = s.Variant
	}
	name := "schedule"
	if s.Violation != "" {
		name += "-" + s.Violation
	}
	return s.Scenario(name), s.Violation, nil
}

// maxListed is how many runs the summary names in one list (a finding's
// runs, the runs without a verdict).
const maxListed = 12

// printExplore prints the coverage, the findings (original beside minimal)
// and where the files are.
func printExplore(w io.Writer, r *explore.Report, dir, targetFlag string) {
	opened, offered := r.Coverage.Covered()
	shard := r.Shard.String()
	if len(r.Shards) > 0 {
		var parts []string
		for _, s := range r.Shards {
			parts = append(parts, s.String())
		}
		shard = "merged " + strings.Join(parts, ", ")
	}
	exhausted := "the budget ran out first"
	if r.Exhausted {
		exhausted = "all of them"
	}
	fmt.Fprintf(w, "\nexplored target %s [%s], seed %d, shard %s: %d runs of %d planned (%s) in %s; windows opened: %d of %d offered\n",
		r.Target, r.Variant, r.Seed, shard, len(r.Runs), r.Planned, exhausted, (time.Duration(r.DurationMS) * time.Millisecond).Round(time.Second), opened, offered)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nWINDOW\tROLE\tOFFERED BY\tRUNS\tOPENED\tNOT OPENED\tVIOLATIONS (runs that opened it)\tSTATUS")
	for _, c := range r.Coverage.Windows {
		by := "-"
		if len(c.By) > 0 {
			by = strings.Join(c.By, ", ")
		}
		status := c.Status
		if c.Status == explore.StatusUnexplored {
			if c.Runs == 0 {
				status += " (never tried)"
			} else {
				status += " (never opened)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", c.Window, c.Role, by, c.Runs, c.Opened, c.NotOpened, kindCounts(c.Violations), status)
	}
	fmt.Fprintln(tw, "\nLINK\tRUNS\tFAULT ON\tNEVER ON\tVIOLATIONS\tSTATUS")
	for _, c := range r.Coverage.Links {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", c.Link, c.Runs, c.Opened, c.NotOpened, kindCounts(c.Violations), c.Status)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nA window no run opened is unexplored, not safe.")

	if len(r.Findings) == 0 {
		fmt.Fprintln(w, "\nno violation found")
	}
	if unjudged := explore.Unjudged(r.Runs); len(unjudged) > 0 {
		fmt.Fprintf(w, "\n%d run(s) ended without a verdict on the pipeline (every fault happened, but faultline could not judge the run): neither a violation nor a pass\n", len(unjudged))
		for i, u := range unjudged {
			if i == maxListed {
				fmt.Fprintf(w, "  ... and %d more (explore.json)\n", len(unjudged)-maxListed)
				break
			}
			attempts := ""
			if u.Attempts > 0 {
				attempts = fmt.Sprintf(" (%d attempts, each without a verdict)", u.Attempts)
			}
			fmt.Fprintf(w, "  #%d: %s: %s%s\n", u.Index, u.Verdict, u.Reason, attempts)
			if u.Dir != "" {
				fmt.Fprintf(w, "      %s\n", u.Dir)
			}
		}
	}
	for _, f := range r.Findings {
		runs := make([]string, len(f.Runs))
		for i, n := range f.Runs {
			runs[i] = fmt.Sprintf("#%d", n)
		}
		if len(runs) > maxListed {
			runs = append(runs[:maxListed], "...")
		}
		rate := ""
		if r := f.Rate(); r != "" {
			rate = " — " + r
			if f.Failed < f.Of {
				rate += " (flaky)"
			}
		}
		fmt.Fprintf(w, "\nviolation %s in %d run(s)%s: %s\n", f.Sig().Label(), len(f.Runs), rate, strings.Join(runs, " "))
		for _, also := range f.Also {
			fmt.Fprintf(w, "  also, with faults more: %s\n", also)
		}
		fmt.Fprintf(w, "  original (%s): %d fault(s), %s\n", f.Original.Origin, len(f.Original.Faults), explore.WorkloadText(f.Original.Workload))
		for i, flt := range f.Original.Faults {
			fmt.Fprintf(w, "    %d. %s\n", i+1, explore.Describe(flt))
		}
		fmt.Fprintf(w, "  minimal: %d fault(s), %s — %s\n", len(f.Minimal.Faults), explore.WorkloadText(f.Minimal.Workload), f.Confirmed)
		for i, flt := range f.Minimal.Faults {
			fmt.Fprintf(w, "    %d. %s\n", i+1, explore.Describe(flt))
		}
		if len(f.Steps) > 0 {
			var steps []string
			for _, s := range f.Steps {
				steps = append(steps, s.Change)
			}
			fmt.Fprintf(w, "  shrunk in %d steps (%d candidates, %d runs): %s\n", len(f.Steps), f.Tried, f.ShrinkRuns, strings.Join(steps, "; "))
		}
		if !f.Complete {
			fmt.Fprintln(w, "  (the shrink did not finish: a smaller schedule may still fail)")
		}
		if f.Example != nil {
			fmt.Fprintf(w, "  e.g. %s\n", f.Example.Message)
		}
		file := filepath.Join(dir, f.File)
		fmt.Fprintf(w, "  schedule: %s (original beside it: %s)\n", file, strings.TrimSuffix(file, ".json")+".original.json")
		replay := "faultline run --schedule " + file + targetFlag
		if f.Minimal.Variant != "" && f.Minimal.Variant != "correct" {
			replay += " --variant " + f.Minimal.Variant
		}
		fmt.Fprintf(w, "  replay:   %s\n", replay)
	}
	fmt.Fprintf(w, "\nreport: %s (%s, schedule files)\n", filepath.Join(dir, explore.PageFile), explore.ReportFile)
}

// kindCounts is kind×runs, sorted, or "-".
func kindCounts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	return strings.Join(tallies(m, "%s×%d"), " ")
}

// printPlan writes the plan's runs, one a line.
func printPlan(w io.Writer, items []explore.Item) {
	for _, it := range items {
		extra := ""
		if len(it.Settings) > 0 {
			extra += " [set " + settingsFlag(it.Settings).String() + "]"
		}
		for _, name := range it.Invariants {
			if name == check.NoneGaveUp {
				extra += " [none may end Failed]"
			} else {
				extra += " [checks " + name + "]"
			}
		}
		if it.Profile != "" {
			extra += " [traffic " + it.Profile + "]"
		}
		fmt.Fprintf(w, "#%d %s%s\n", it.Index, it.Describe(), extra)
	}
}

// trafficProfiles reads --traffic: one profile, several joined by
// commas, or all; each named once.
func trafficProfiles(flag string) ([]string, error) {
	if flag == "all" {
		return profileNames(), nil
	}
	var out []string
	for _, name := range strings.Split(flag, ",") {
		name = strings.TrimSpace(name)
		if _, ok := workload.ProfileNamed(name); !ok {
			return nil, usagef("--traffic %q: want one of %s, several joined by commas, or all", name, strings.Join(profileNames(), ", "))
		}
		if slices.Contains(out, name) {
			return nil, usagef("--traffic names %s twice", name)
		}
		out = append(out, name)
	}
	return out, nil
}

// faultDeadline is how long an explored fault waits for its window: the
// longest any of the run's traffic profiles asks.
func faultDeadline(profiles []string, lease time.Duration) time.Duration {
	var d time.Duration
	for _, name := range profiles {
		spec, _ := workload.ProfileNamed(name)
		d = max(d, explore.FaultDeadline(spec, lease))
	}
	return d
}

// profileNames are the traffic profiles' names, in list order.
func profileNames() []string {
	var out []string
	for _, p := range workload.ProfileList() {
		out = append(out, p.Name)
	}
	return out
}
