package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/harness/version"
	"github.com/faultline-dev/faultline/reports"
	"github.com/faultline-dev/faultline/scenarios"
	"github.com/faultline-dev/faultline/system/bench"
)

// common flags of run and gate.
type common struct {
	out        string
	seed       int64
	parallel   int
	infra      string
	targetPath string
	target     *target.Target
	noEventLog bool
	// more are the gate's further --target files (the gate takes several).
	morePaths []string
	more      []*target.Target
}

func (c *common) flags(fs *flag.FlagSet) {
	fs.BoolVar(&c.noEventLog, "no-event-log", false, "judge the target as if it wrote no event log and offered no crash point: only what faultline sees from outside (contract, audit trail, tap queue, broker)")
	fs.StringVar(&c.out, "out", "", "report folder (default: a new folder under reports/, with reports/latest pointing at it)")
	fs.Int64Var(&c.seed, "seed", 0, "seed of the fault schedules (default: drawn and printed)")
	fs.IntVar(&c.parallel, "parallel", 8, "scenario runs at once")
	fs.StringVar(&c.infra, "infra", "", "where PostgreSQL and RabbitMQ come from: local, docker, external or auto (default: $FAULTLINE_INFRA, else auto)")
}

func (c *common) resolve() error {
	if c.parallel < 1 {
		return usagef("--parallel must be at least 1, got %d", c.parallel)
	}
	if c.infra != "" && !slices.Contains(infra.Kinds(), c.infra) {
		return usagef("--infra %q: want one of %s", c.infra, strings.Join(infra.Kinds(), ", "))
	}
	if c.seed == 0 {
		c.seed = time.Now().UnixNano() % 1_000_000
	}
	t, err := loadTarget(c.targetPath)
	if err != nil {
		return err
	}
	c.target = t
	for _, p := range c.morePaths {
		o, err := loadTarget(p)
		if err != nil {
			return err
		}
		c.more = append(c.more, o)
	}
	if c.noEventLog {
		c.target = t.WithoutEventLogs()
		for i, o := range c.more {
			c.more[i] = o.WithoutEventLogs()
		}
	}
	return nil
}

// targets are every target the command attacks, the first first.
func (c *common) targets() []*target.Target { return append([]*target.Target{c.target}, c.more...) }

// targetsFlag is a repeatable --target: the first path, then the others.
type targetsFlag struct{ c *common }

func (f targetsFlag) String() string { return "" }

func (f targetsFlag) Set(v string) error {
	if f.c.targetPath == "" {
		f.c.targetPath = v
	} else {
		f.c.morePaths = append(f.c.morePaths, v)
	}
	return nil
}

// targetFlag is --target, the same for every command.
func targetFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "target", "", "the pipeline's target file (default: "+defaultTargetDoc+")")
}

// defaultTargetDoc says, in a flag's help, where the target file is found
// without --target (findTarget).
const defaultTargetDoc = "$FAULTLINE_TARGET, else ./faultline.yaml, else the nearest faultline.yaml up to the repository's root, else, inside faultline's source tree, the reference pipeline"

// referenceTarget is the reference pipeline's target file, relative to the
// root of faultline's source tree.
const referenceTarget = bench.TargetFile

// loadTarget loads the target file at path; empty: the one findTarget
// finds from the current folder.
func loadTarget(path string) (*target.Target, error) {
	if path == "" {
		dir, err := cwd()
		if err != nil {
			return nil, err
		}
		if path, err = findTarget(dir, os.Getenv("FAULTLINE_TARGET")); err != nil {
			return nil, err
		}
	}
	return loadTargetFile(path)
}

// loadTargetFile loads the target file at path, relative to the current
// folder. A file that is missing or does not parse is a bad target file
// (exit 2), its error listing every problem.
func loadTargetFile(path string) (*target.Target, error) {
	t, err := target.Load(path)
	var problems *target.Errors
	if errors.As(err, &problems) {
		return nil, targetErrorf("target file %s has %d problem(s):\n%s", path, len(*problems), problems.Error())
	}
	if err != nil {
		return nil, targetErrorf("%v", err)
	}
	return t, nil
}

// outDir makes the report folder; the default one is reports/<timestamp>
// with reports/latest pointing at it.
func outDir(flagValue string) (string, error) {
	if flagValue != "" {
		if err := os.MkdirAll(flagValue, 0o755); err != nil {
			return "", fmt.Errorf("report folder: %w", err)
		}
		return flagValue, nil
	}
	if err := os.MkdirAll("reports", 0o755); err != nil {
		return "", fmt.Errorf("report folder: %w", err)
	}
	// The time, and a random suffix MkdirTemp makes sure no other run
	// (another gate started in the same second) has.
	dir, err := os.MkdirTemp("reports", time.Now().Format("20060102-150405")+"-*")
	if err != nil {
		return "", fmt.Errorf("report folder: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", fmt.Errorf("report folder: %w", err)
	}
	// reports/latest is replaced in one rename, so two runs finishing
	// together leave it pointing at one of them, never missing.
	latest := filepath.Join("reports", "latest")
	tmp := latest + "." + filepath.Base(dir)
	if err := os.Symlink(filepath.Base(dir), tmp); err == nil {
		if err := os.Rename(tmp, latest); err != nil {
			_ = os.Remove(tmp)
		}
	}
	return dir, nil
}

// withShared starts the shared infrastructure, runs fn, and tears it all
// down — also on Ctrl-C. Runs keep their folders under dir/runs, and
// Toxiproxy's own log goes to dir/toxiproxy.log.
func withShared(ctx context.Context, c common, dir string, stderr io.Writer, fn func(context.Context, *runner.Shared) error) (interrupted bool, err error) {
	return withSharedCleanup(ctx, c, dir, stderr, func(ctx context.Context, sh *runner.Shared, _ *supervisor.Cleanup) error { return fn(ctx, sh) })
}

// withSharedCleanup is withShared, with the cleanup that what fn starts
// registers on.
//
// SIGINT or SIGTERM cancels the context fn is given: the runs under way
// end interrupted, nothing new starts, fn returns, everything is torn
// down, and interrupted says so (the caller reports, then exits 130). A
// second signal exits at once.
func withSharedCleanup(ctx context.Context, c common, dir string, stderr io.Writer, fn func(context.Context, *runner.Shared, *supervisor.Cleanup) error) (interrupted bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cleanup := supervisor.NewCleanup()
	stop := cleanup.OnSignal(cancel)
	defer stop()
	defer func() {
		if cerr := cleanup.Run(context.WithoutCancel(ctx)); cerr != nil {
			fmt.Fprintf(stderr, "faultline: cleanup: %v\n", cerr)
		}
	}()
	defer func() {
		interrupted = errors.Is(context.Cause(ctx), supervisor.ErrInterrupted)
		// A start cut short by a signal is an interruption (130), not an
		// infrastructure error.
		if interrupted && err != nil {
			err = fmt.Errorf("%w: %w", errInterrupted, err)
		}
	}()
	progress(stderr, "infra: starting PostgreSQL, RabbitMQ and Toxiproxy, building target %s (%s)", c.target.Name, c.target.Path)
	sh, err := runner.StartShared(ctx, runner.SharedOptions{Root: filepath.Join(dir, "runs"), Log: stderr, Infra: c.infra, Target: c.target,
		ToxiproxyLog: filepath.Join(dir, "toxiproxy.log")}, cleanup)
	if err != nil {
		return false, err
	}
	return false, fn(ctx, sh, cleanup)
}

var progressMu sync.Mutex

func progress(w io.Writer, format string, args ...any) {
	progressMu.Lock()
	defer progressMu.Unlock()
	fmt.Fprintf(w, time.Now().Format("15:04:05")+" "+format+"\n", args...)
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run")
	var c common
	c.flags(fs)
	targetFlag(fs, &c.targetPath)
	variant := fs.String("variant", "", "run on this broken variant instead of the correct pipeline")
	all := fs.Bool("all", false, "run every scenario")
	schedule := fs.String("schedule", "", "replay a schedule file that faultline explore wrote (its seed and variant unless given)")
	repeat := fs.Int("repeat", 1, "run each scenario (or the schedule) this many times, side by side: a failure that hangs on timing shows how often it happens")
	keep := fs.Bool("keep", false, "keep every run's folder (event logs, process output, merged timeline), not only a failing correct run's")
	names, err := parseInterspersed(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := c.resolve(); err != nil {
		return err
	}
	var picked []runner.Scenario
	if *all {
		picked = scenarios.All()
	}
	// A scenario named may be of any profile (scenarios.Lookup).
	scheduled := map[string]string{} // a schedule's scenario → the violation it reproduces
	if *schedule != "" {
		sc, kind, err := scheduleScenario(*schedule, fs, &c, variant)
		if err != nil {
			return err
		}
		picked = append(picked, sc)
		scheduled[sc.Name] = kind
	}
	for _, name := range names {
		sc, err := scenarios.Lookup(name)
		if err != nil {
			return usageError{msg: err.Error()}
		}
		picked = append(picked, sc)
	}
	if len(picked) == 0 {
		return usagef("run: name at least one scenario, or --all (see faultline list)")
	}
	if *repeat < 1 || *repeat > 100 {
		return usagef("--repeat must be 1..100, got %d", *repeat)
	}
	catches := variantCatches(c.target, *variant, picked, scheduled, *repeat)
	picked = repeated(picked, *repeat)
	if *variant != "" && *variant != "correct" {
		if _, ok := c.target.Variant(*variant); !ok {
			return usagef("target %s has no variant %q (known: %s)", c.target.Name, *variant, strings.Join(variantNames(c.target), ", "))
		}
	}
	dir, err := outDir(c.out)
	if err != nil {
		return err
	}
	rep := newReporter(stderr)
	defer rep.Stop()
	rep.Logf("target %s, seed %d; report in %s", c.target.Name, c.seed, dir)
	started := time.Now()
	var results []result.Scenario
	var timing *result.Timing
	interrupted, err := withShared(ctx, c, dir, rep, func(ctx context.Context, sh *runner.Shared) error {
		runsStarted := time.Now()
		results = runAll(ctx, sh, picked, *variant, *keep, c, rep)
		timing = sh.Timing(results)
		timing.RunsMS = time.Since(runsStarted).Milliseconds()
		timing.GoalScenarioMedianMS = gate.GoalScenarioMedian.Milliseconds()
		return nil
	})
	if err != nil {
		return err
	}
	timing.TotalMS = time.Since(started).Milliseconds()
	rep.Stop()
	out := result.Run{Schema: result.Schema, Target: c.target.Name, TargetFile: c.target.Path, Version: version.String(), TargetVariants: gate.TargetVariants(c.target), Seed: c.seed, Seeds: []int64{c.seed}, Started: started, DurationMS: timing.TotalMS,
		Scenarios: results, Variants: gate.Verdicts(catches, results), Timing: timing, Interrupted: interrupted}
	out.Verdict = runVerdict(results, interrupted)
	out.Pass = out.Verdict == result.Pass
	for _, r := range results {
		fmt.Fprintf(stdout, "%-32s %-24s %s  %s\n", r.Name, r.Variant, r.Verdict, oneLine(r))
		for _, w := range r.WaitLines() {
			fmt.Fprintf(stdout, "    %s\n", w)
		}
	}
	if *repeat > 1 {
		printRepeats(stdout, results, *repeat)
	}
	printTiming(stdout, out.Timing, out.Scenarios, "run", waits(false, c.target.Lease))
	if err := writeReport(ctx, dir, out, stdout, rep); err != nil {
		return err
	}
	return verdictErr(out)
}

// runVerdict is the verdict of a `run`: every scenario it was asked for
// must pass, so any fail fails it, and any other run (indeterminate, not
// run, interrupted) leaves it indeterminate.
func runVerdict(results []result.Scenario, interrupted bool) string {
	v := result.Pass
	if interrupted {
		v = result.Indeterminate
	}
	for _, r := range results {
		switch r.Verdict {
		case result.Pass, result.Limit:
		case result.Fail:
			return result.Fail
		default:
			v = result.Indeterminate
		}
	}
	return v
}

// verdictErr is a run's exit: interrupted (130) first, then a fail (1),
// then indeterminate (3), else none.
func verdictErr(run result.Run) error {
	switch {
	case run.Interrupted:
		return errInterrupted
	case run.Verdict == result.Fail:
		return errViolation
	case run.Verdict == result.Indeterminate:
		return errIndeterminate
	case !run.Pass:
		return errViolation
	}
	return nil
}

// runAll runs scenarios in parallel with progress.
func runAll(ctx context.Context, sh *runner.Shared, picked []runner.Scenario, variant string, keep bool, c common, rep reporter) []result.Scenario {
	results := make([]result.Scenario, len(picked))
	sem := make(chan struct{}, c.parallel)
	var wg sync.WaitGroup
	var done int
	var mu sync.Mutex
	vname := variant
	if vname == "" {
		vname = "correct"
	}
	for i, sc := range picked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			key := sc.Name + "[" + vname + "]"
			rep.Start(key)
			opts := runner.Options{Seed: c.seed, Variant: variant, KeepDir: keep,
				Phase: func(p string) { rep.Phase(key, p) },
				Tick:  func(p string, d float64) { rep.Tick(key, p, d) }}
			if variant != "" && variant != "correct" {
				opts.Stall = gate.VariantStall // as in the gate: a broken pipeline may never settle
			}
			res := sh.Run(ctx, sc, opts) // a panic of the harness is the run's indeterminate verdict
			results[i] = res
			mu.Lock()
			done++
			rep.Done(key, fmt.Sprintf("[%d/%d] %s [%s]: %s (%.1fs)", done, len(picked), res.Name, res.Variant, res.Verdict, float64(res.DurationMS)/1000))
			mu.Unlock()
		}()
	}
	wg.Wait()
	return results
}

func oneLine(r result.Scenario) string {
	c := r.Counts
	recovery := "not converged" // RecoveryMS -1
	if r.RecoveryMS >= 0 {
		recovery = fmt.Sprintf("%dms", r.RecoveryMS)
	}
	s := fmt.Sprintf("orders=%d lost=%d phantom=%d dup-effects=%d absorbed=%d fenced=%d recovery=%s", c.Orders, c.Lost, c.Phantom, c.DuplicateEffects, c.DuplicatesAbsorbed, c.FencedWrites, recovery)
	if r.Verdict != result.Pass && r.Verdict != result.Limit && r.Reason != "" {
		s += "\n    " + r.Reason
		if r.Dir != "" {
			s += "\n    logs: " + r.Dir
		}
	}
	return s
}

// writeReport writes the report folder (index.html, summary.md,
// results.json, junit.xml) and a screenshot of the page taken in headless
// Chromium; a missing browser costs only the screenshot.
func writeReport(ctx context.Context, dir string, run result.Run, stdout, stderr io.Writer) error {
	if err := reports.Write(dir, run); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if run.Interrupted {
		progress(stderr, "report: interrupted: no screenshot")
	} else if err := reports.WriteScreenshot(ctx, dir); err != nil {
		progress(stderr, "report: no screenshot: %v", err)
	}
	fmt.Fprintf(stdout, "report: %s (results.json, summary.md, junit.xml)\n", filepath.Join(dir, reports.IndexFile))
	return nil
}

// variantCatches are the catches a run on a broken variant is judged by,
// so its report says what the variant was expected to show and whether it
// did: a replayed schedule must show the violation it was shrunk for (else
// the variant's expected kind), a scenario the variant's caught_by names
// must show the variant's kind. Scenarios the target does not expect to
// catch the variant are left out; a run on the correct pipeline has none.
// With --repeat every copy (NAME.1 .. NAME.n) counts.
func variantCatches(t *target.Target, variant string, picked []runner.Scenario, scheduled map[string]string, repeat int) []gate.Catch {
	if variant == "" || variant == "correct" {
		return nil
	}
	v, ok := t.Variant(variant)
	if !ok {
		return nil // refused with the known names before anything runs
	}
	var out []gate.Catch
	for _, sc := range picked {
		kind, isSchedule := scheduled[sc.Name]
		if !isSchedule && !slices.Contains(v.CaughtBy, sc.Name) {
			continue
		}
		if kind == "" {
			kind = v.Expect
		}
		for _, run := range repeated([]runner.Scenario{sc}, repeat) {
			out = append(out, gate.Catch{Variant: v.Name, Scenario: run.Name, Expect: kind, Guard: v.Guard})
		}
	}
	return out
}

func variantNames(t *target.Target) []string {
	var out []string
	for _, v := range t.Variants {
		out = append(out, v.Name)
	}
	return out
}

// repeated is each scenario n times, named NAME.1 .. NAME.n.
func repeated(scs []runner.Scenario, n int) []runner.Scenario {
	if n <= 1 {
		return scs
	}
	out := make([]runner.Scenario, 0, len(scs)*n)
	for _, sc := range scs {
		for i := 1; i <= n; i++ {
			c := sc
			c.Name = fmt.Sprintf("%s.%d", sc.Name, i)
			out = append(out, c)
		}
	}
	return out
}

// printRepeats says, per scenario run more than once, how many of its runs
// failed and with what.
func printRepeats(w io.Writer, results []result.Scenario, n int) {
	type tally struct {
		failed int
		kinds  map[string]int
	}
	var order []string
	by := map[string]*tally{}
	for _, r := range results {
		name := r.Name
		if i := strings.LastIndexByte(name, '.'); i > 0 {
			name = name[:i]
		}
		t, ok := by[name]
		if !ok {
			t = &tally{kinds: map[string]int{}}
			by[name] = t
			order = append(order, name)
		}
		if r.Verdict == result.Fail {
			t.failed++
		}
		for _, k := range r.ViolationKinds() {
			t.kinds[k]++
		}
	}
	for _, name := range order {
		t := by[name]
		kinds := tallies(t.kinds, "%s in %d")
		detail := ""
		if len(kinds) > 0 {
			detail = " (" + strings.Join(kinds, ", ") + ")"
		}
		fmt.Fprintf(w, "%s: failed %d of %d runs%s\n", name, t.failed, n, detail)
	}
}

// tallies are the counts of m, each as format (name, count), sorted.
func tallies(m map[string]int, format string) []string {
	out := make([]string, 0, len(m))
	for k, n := range m {
		out = append(out, fmt.Sprintf(format, k, n))
	}
	sort.Strings(out)
	return out
}
