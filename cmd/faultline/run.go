package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"faultline/harness/gate"
	"faultline/harness/infra"
	"faultline/harness/result"
	"faultline/harness/runner"
	"faultline/harness/supervisor"
	"faultline/reports"
	"faultline/scenarios"
)

// common flags of run and gate.
type common struct {
	out      string
	seed     int64
	parallel int
	infra    string
}

func (c *common) flags(fs *flag.FlagSet) {
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
	return nil
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
	dir := filepath.Join("reports", time.Now().Format("20060102-150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("report folder: %w", err)
	}
	latest := filepath.Join("reports", "latest")
	_ = os.Remove(latest)
	_ = os.Symlink(filepath.Base(dir), latest)
	return dir, nil
}

// withShared starts the shared infrastructure, runs fn, and tears it all
// down — also on Ctrl-C.
func withShared(ctx context.Context, c common, runsDir string, stderr io.Writer, fn func(*runner.Shared) error) error {
	cleanup := supervisor.NewCleanup()
	stop := cleanup.OnSignal()
	defer stop()
	defer func() { _ = cleanup.Run(context.WithoutCancel(ctx)) }()
	progress(stderr, "infra: starting PostgreSQL, RabbitMQ and Toxiproxy, building the pipeline")
	sh, err := runner.StartShared(ctx, runner.SharedOptions{Root: runsDir, Log: stderr, Infra: c.infra}, cleanup)
	if err != nil {
		return err
	}
	return fn(sh)
}

var progressMu sync.Mutex

func progress(w io.Writer, format string, args ...any) {
	progressMu.Lock()
	defer progressMu.Unlock()
	fmt.Fprintf(w, time.Now().Format("15:04:05")+" "+format+"\n", args...)
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var c common
	c.flags(fs)
	variant := fs.String("variant", "", "run on this broken variant instead of the correct pipeline")
	all := fs.Bool("all", false, "run every scenario")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: faultline run [flags] SCENARIO... | --all")
		fs.PrintDefaults()
	}
	names, err := parseInterspersed(fs, args, stderr)
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
	for _, name := range names {
		sc, err := scenarios.Lookup(name)
		if err != nil {
			return usageError{err.Error()}
		}
		picked = append(picked, sc)
	}
	if len(picked) == 0 {
		return usagef("run: name at least one scenario, or --all (see faultline list)")
	}
	if *variant != "" && *variant != "correct" && !knownVariant(*variant) {
		return usagef("unknown variant %q (known: %s)", *variant, strings.Join(variantNames(), ", "))
	}
	dir, err := outDir(c.out)
	if err != nil {
		return err
	}
	progress(stderr, "seed %d; report in %s", c.seed, dir)
	started := time.Now()
	var results []result.Scenario
	var timing *result.Timing
	err = withShared(ctx, c, filepath.Join(dir, "runs"), stderr, func(sh *runner.Shared) error {
		runsStarted := time.Now()
		results = runAll(ctx, sh, picked, *variant, c, stderr)
		timing = sh.Timing(results)
		timing.RunsMS = time.Since(runsStarted).Milliseconds()
		timing.GoalScenarioMedianMS = gate.GoalScenarioMedian.Milliseconds()
		return nil
	})
	if err != nil {
		return err
	}
	timing.TotalMS = time.Since(started).Milliseconds()
	out := result.Run{Schema: result.Schema, Seed: c.seed, Seeds: []int64{c.seed}, Started: started, DurationMS: timing.TotalMS, Scenarios: results, Variants: []result.Variant{}, Timing: timing}
	out.Pass = true
	for _, r := range results {
		fmt.Fprintf(stdout, "%-32s %-24s %s  %s\n", r.Name, r.Variant, r.Verdict, oneLine(r))
		if r.Verdict != result.Pass {
			out.Pass = false
		}
	}
	printTiming(stdout, out.Timing, out.Scenarios, "run", waits(false))
	if err := writeReport(ctx, dir, out, stdout, stderr); err != nil {
		return err
	}
	if !out.Pass {
		return errViolation
	}
	return nil
}

// runAll runs scenarios in parallel with progress.
func runAll(ctx context.Context, sh *runner.Shared, picked []runner.Scenario, variant string, c common, stderr io.Writer) []result.Scenario {
	results := make([]result.Scenario, len(picked))
	sem := make(chan struct{}, c.parallel)
	var wg sync.WaitGroup
	var done int
	var mu sync.Mutex
	b := newBars(stderr)
	for i, sc := range picked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			opts := runner.Options{Seed: c.seed, Variant: variant,
				Phase: func(p string) { progress(stderr, "  %s: %s", sc.Name, p) },
				Tick:  func(p string, d float64) { b.tick(sc.Name, p, d) }}
			if variant != "" && variant != "correct" {
				opts.Converge = gate.VariantConverge // as in the gate: a broken pipeline may never settle
			}
			res := sh.Run(ctx, sc, opts)
			results[i] = res
			mu.Lock()
			done++
			progress(stderr, "[%d/%d] %s [%s]: %s (%.1fs)", done, len(picked), res.Name, res.Variant, res.Verdict, float64(res.DurationMS)/1000)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return results
}

func oneLine(r result.Scenario) string {
	c := r.Counts
	s := fmt.Sprintf("orders=%d lost=%d phantom=%d dup-effects=%d absorbed=%d fenced=%d recovery=%dms", c.Orders, c.Lost, c.Phantom, c.DuplicateEffects, c.DuplicatesAbsorbed, c.FencedWrites, r.RecoveryMS)
	if r.Verdict != result.Pass && r.Reason != "" {
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
	if err := reports.Write(dir, run, reports.DefaultWindows()); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := reports.WriteScreenshot(ctx, dir); err != nil {
		progress(stderr, "report: no screenshot: %v", err)
	}
	fmt.Fprintf(stdout, "report: %s (results.json, summary.md, junit.xml)\n", filepath.Join(dir, reports.IndexFile))
	return nil
}

func variantNames() []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range scenarios.Catches() {
		if !seen[c.Variant] {
			seen[c.Variant] = true
			out = append(out, c.Variant)
		}
	}
	return out
}

func knownVariant(name string) bool {
	for _, v := range variantNames() {
		if v == name {
			return true
		}
	}
	return false
}
