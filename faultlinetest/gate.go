package faultlinetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/harness/version"
	"github.com/faultline-dev/faultline/reports"
	"github.com/faultline-dev/faultline/scenarios"
)

// VariantPrefix begins the name of a broken variant's subtest:
// TestReliability/variant/no-lease.
const VariantPrefix = "variant/"

// LogFile is what the harness logged while the gate ran (infrastructure
// start-up, each run's verdict), in the report folder.
const LogFile = "faultline.log"

// Gate runs faultline's gate on the pipeline the target file at
// targetPath describes (relative to the test's package folder): each
// scenario of the catalogue on the correct pipeline as subtest
// <scenario>, each broken variant through the scenarios that must catch
// it as subtest variant/<name>. It returns when every subtest is over,
// with the report written (ReportDir); what it started is stopped in
// t.Cleanup.
//
// A bad target file or option fails t at once, naming every problem.
// In -short, Gate skips t.
func Gate(t *testing.T, targetPath string, opts ...Option) {
	t.Helper()
	if testing.Short() {
		t.Skip("faultline: the gate starts PostgreSQL, RabbitMQ, Toxiproxy and the target's processes: skipped in -short")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		t.Fatalf("faultline: %v", err)
	}
	tgt, err := loadTarget(targetPath)
	if err != nil {
		t.Fatalf("faultline: %v", err)
	}
	jobs, err := jobsOf(tgt, cfg)
	if err != nil {
		t.Fatalf("faultline: %v", err)
	}
	if cfg.reportDir == "" {
		cfg.reportDir = t.ArtifactDir()
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	g := &gateRun{cfg: cfg, tgt: tgt, ctx: ctx, cancel: cancel, cleanup: supervisor.NewCleanup(), started: time.Now()}
	t.Cleanup(func() { g.stop(t) })
	g.runAll(t, jobs)
	g.finish(t)
}

// loadTarget loads the target file at path; a file with mistakes is an
// error listing each.
func loadTarget(path string) (*target.Target, error) {
	t, err := target.Load(path)
	var problems *target.Errors
	if errors.As(err, &problems) {
		return nil, fmt.Errorf("target file %s has %d problem(s):\n%s", path, len(*problems), problems.Error())
	}
	if err != nil {
		return nil, fmt.Errorf("target file: %w", err)
	}
	return t, nil
}

// job is one subtest: a scenario on the correct pipeline, or a variant
// through its catching scenarios.
type job struct {
	name    string
	sc      runner.Scenario // the correct pipeline's scenario; unset for a variant
	variant string
	catches []gate.Catch          // a variant's
	known   []target.KnownFinding // a scenario's known findings
	weight  int                   // runs it may have going at once
}

// jobsOf are the gate's subtests on t, in the order they start: the
// scenarios that restart the broker first (on the shared broker they run
// alone, so they go before the others crowd it), then the variants (their
// runs wait out a longer convergence), then the other scenarios, each
// group in catalogue and target-file order. Catches and known findings
// naming a scenario no profile has are an error, as in the CLI.
func jobsOf(t *target.Target, cfg config) ([]job, error) {
	catches, err := gate.CatchesOf(t, scenarios.Every())
	if err != nil {
		return nil, err
	}
	known, err := gate.KnownFindingsOf(t, scenarios.Every())
	if err != nil {
		return nil, err
	}
	catches = gate.Within(catches, cfg.picked)
	var first, variants, rest []job
	for _, sc := range cfg.picked {
		j := job{name: sc.Name, sc: sc, weight: 1}
		for _, k := range known {
			if k.Scenario == sc.Name {
				j.known = append(j.known, k)
			}
		}
		if sc.Exclusive {
			first = append(first, j)
		} else {
			rest = append(rest, j)
		}
	}
	byVariant := map[string]int{}
	for _, c := range catches {
		i, ok := byVariant[c.Variant]
		if !ok {
			i = len(variants)
			byVariant[c.Variant] = i
			variants = append(variants, job{name: VariantPrefix + c.Variant, variant: c.Variant})
		}
		variants[i].catches = append(variants[i].catches, c)
		variants[i].weight = min(len(variants[i].catches), cfg.parallel)
	}
	return slices.Concat(first, variants, rest), nil
}

// gateRun is one Gate: its knobs, the infrastructure once started, and
// what its subtests found.
type gateRun struct {
	cfg     config
	tgt     *target.Target
	ctx     context.Context // cancelled on SIGINT/SIGTERM, and when the test ends
	cancel  context.CancelCauseFunc
	cleanup *supervisor.Cleanup
	started time.Time

	startOnce  sync.Once
	sh         *runner.Shared
	startErr   error
	stopSignal func() // uninstalls the signal handler; nil until started

	mu         sync.Mutex
	correctRan int // subtests of the correct pipeline that ran
	scenarios  []result.Scenario
	retried    []result.Scenario
	variants   []result.Variant
	known      []result.KnownFinding
}

// runAll runs the jobs as subtests of t, at most cfg.parallel runs at
// once: a job takes its weight in slots before its subtest starts, in
// order, and gives them back when it ends. A subtest -run leaves out
// ends at once, having started nothing.
func (g *gateRun) runAll(t *testing.T, jobs []job) {
	slots := make(chan struct{}, g.cfg.parallel)
	var wg sync.WaitGroup
	for _, j := range jobs {
		for range j.weight {
			slots <- struct{}{} // only this goroutine takes slots: it cannot hold some while waiting for others
		}
		wg.Go(func() {
			defer func() {
				for range j.weight {
					<-slots
				}
			}()
			// testing allows t.Run from several goroutines at once, all
			// returned before Gate does (wg.Wait).
			t.Run(j.name, func(t *testing.T) { g.runJob(t, j) })
		})
	}
	wg.Wait()
}

// start starts the shared infrastructure and builds the target, once, for
// the first subtest that runs; the others wait for it and share it.
func (g *gateRun) start(t *testing.T) (*runner.Shared, error) {
	g.startOnce.Do(func() {
		g.sh, g.startErr = g.startShared(t)
	})
	return g.sh, g.startErr
}

func (g *gateRun) startShared(t *testing.T) (*runner.Shared, error) {
	dir := g.cfg.reportDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report folder: %w", err)
	}
	log, err := os.Create(filepath.Join(dir, LogFile))
	if err != nil {
		return nil, fmt.Errorf("report folder: %w", err)
	}
	// Added first, so it runs last: the steps before it still log.
	g.cleanup.Add("close "+LogFile, func(context.Context) error { return log.Close() })
	g.stopSignal = g.cleanup.OnSignal(g.cancel)
	t.Logf("faultline: starting PostgreSQL, RabbitMQ and Toxiproxy, building target %s (%s); seed %d; log in %s",
		g.tgt.Name, g.tgt.Path, g.cfg.seed, filepath.Join(dir, LogFile))
	sh, err := runner.StartShared(g.ctx, runner.SharedOptions{Root: filepath.Join(dir, "runs"), Log: log, Infra: g.cfg.infra, Target: g.tgt,
		ToxiproxyLog: filepath.Join(dir, "toxiproxy.log")}, g.cleanup)
	if err != nil {
		return nil, err
	}
	t.Logf("faultline: %s infrastructure ready in %s", sh.Infra.Name(), sh.StartedIn.Round(time.Millisecond))
	return sh, nil
}

// stop stops everything the gate started, last started first.
func (g *gateRun) stop(t *testing.T) {
	err := g.cleanup.Run(context.WithoutCancel(g.ctx))
	if g.stopSignal != nil {
		g.stopSignal()
	}
	g.cancel(nil)
	if err != nil {
		t.Errorf("faultline: %v", err)
	}
}

// runJob is one subtest: its runs through the gate (retries included),
// then its verdict.
func (g *gateRun) runJob(t *testing.T, j job) {
	sh, err := g.start(t)
	if err != nil {
		t.Fatalf("no verdict: %v", err)
	}
	plan := gate.Plan{Seeds: []int64{g.cfg.seed}, Retries: g.cfg.retries, Parallel: j.weight,
		Progress: func(_, _ int, res result.Scenario) { t.Log(runLine(res, g.cfg.retries)) }}
	if j.variant == "" {
		plan.Scenarios, plan.Known = []runner.Scenario{j.sc}, j.known
	} else {
		plan.Scenarios, plan.Catches, plan.VariantsOnly = g.cfg.picked, j.catches, true
	}
	out, err := gate.Run(g.ctx, sh, plan)
	if err != nil {
		t.Fatalf("no verdict: %v", err)
	}
	g.add(out, j.variant == "")
	v := judgeCorrect(out)
	if j.variant != "" {
		v = judgeVariant(out)
	}
	for _, res := range out.Scenarios {
		for _, line := range details(res) {
			t.Log(line)
		}
	}
	switch v.outcome {
	case passed:
		t.Log(v.message)
	case notRun:
		t.Skip(v.message)
	default:
		t.Error(v.message)
	}
}

// add keeps a subtest's runs for the report.
func (g *gateRun) add(out result.Run, correct bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if correct {
		g.correctRan++
	}
	g.scenarios = append(g.scenarios, out.Scenarios...)
	g.retried = append(g.retried, out.Retried...)
	g.variants = append(g.variants, out.Variants...)
	g.known = append(g.known, out.KnownFindings...)
}

// finish decides the whole run as the gate does, over the subtests that
// ran, and writes its report. A whole verdict other than pass fails t if
// no subtest did already (every scenario not run: nothing was shown).
func (g *gateRun) finish(t *testing.T) {
	t.Helper()
	if g.sh == nil {
		if g.startErr == nil {
			t.Log("faultline: no subtest ran (-run left them all out): nothing started")
		}
		return
	}
	run := g.whole()
	if run.Verdict != result.Pass && !t.Failed() {
		t.Errorf("faultline: the gate's verdict is %s (see the report)", run.Verdict)
	}
	if err := reports.Write(g.cfg.reportDir, run); err != nil {
		t.Errorf("faultline: %v", err)
		return
	}
	t.Logf("faultline: %s: report in %s (results.json, summary.md, junit.xml)", strings.ToUpper(run.Verdict), filepath.Join(g.cfg.reportDir, reports.IndexFile))
}

// whole is the gate's result.Run over the subtests that ran.
func (g *gateRun) whole() result.Run {
	g.mu.Lock()
	defer g.mu.Unlock()
	took := time.Since(g.started)
	run := result.Run{Schema: result.Schema, Target: g.tgt.Name, TargetFile: g.tgt.Path, Version: version.String(), Seed: g.cfg.seed, Seeds: []int64{g.cfg.seed}, Started: g.started,
		DurationMS: took.Milliseconds(), Infra: g.sh.Infra.Name(), Scenarios: g.scenarios, Retried: g.retried,
		Variants: g.variants, TargetVariants: gate.TargetVariants(g.tgt), KnownFindings: g.known,
		Interrupted: errors.Is(context.Cause(g.ctx), supervisor.ErrInterrupted)}
	if run.Variants == nil {
		run.Variants = []result.Variant{}
	}
	// With no subtest of the correct pipeline picked, the run is judged
	// as the gate judges its variants alone.
	run.Verdict = gate.Decide(run, g.correctRan == 0)
	run.Pass = run.Verdict == result.Pass
	run.Timing = g.sh.Timing(run.Scenarios)
	run.Timing.RunsMS = took.Milliseconds()
	run.Timing.TotalMS = took.Milliseconds()
	return run
}

// Outcomes of a subtest.
type outcome int

const (
	passed    outcome = iota
	failed            // a violation, a variant not caught, a known finding no longer shown
	noVerdict         // indeterminate through the retries: never a pass
	notRun            // the target does not offer what the scenario needs
)

// verdict is a subtest's outcome and the line that says it.
type verdict struct {
	outcome outcome
	message string
}

// judgeCorrect is the verdict of a scenario's subtest on the correct
// pipeline, from the gate's run of it alone (gate.Decide).
func judgeCorrect(out result.Run) verdict {
	if len(out.Scenarios) != 1 {
		return verdict{noVerdict, fmt.Sprintf("no verdict: %d runs where one was expected", len(out.Scenarios))}
	}
	res := out.Scenarios[0]
	switch out.Verdict {
	case result.Pass:
		msg := fmt.Sprintf("%s seed %d: %s", res.Name, res.Seed, res.Verdict)
		if res.Verdict == result.Limit {
			msg += ": " + res.Reason
		}
		for _, k := range out.KnownFindings {
			msg = fmt.Sprintf("%s seed %d: known finding shown (%s): %s", res.Name, res.Seed, strings.Join(k.Violations, ", "), k.Line())
		}
		return verdict{passed, msg}
	case result.Fail:
		if res.Verdict == result.Fail && !res.Known {
			return verdict{failed, violationSummary(res)}
		}
		for _, k := range out.KnownFindings {
			if k.Detail != "" {
				return verdict{failed, k.Detail}
			}
		}
		return verdict{failed, fmt.Sprintf("%s seed %d: %s: %s", res.Name, res.Seed, res.Verdict, res.Reason)}
	default:
		if res.Verdict == result.NotRun {
			return verdict{notRun, fmt.Sprintf("not run: %s", res.Reason)}
		}
		return verdict{noVerdict, fmt.Sprintf("no verdict: %s seed %d stayed %s through %s: %s",
			res.Name, res.Seed, res.Verdict, attempts(res), firstLine(res.Reason))}
	}
}

// judgeVariant is the verdict of a variant's subtest, from the gate's
// runs of its catching scenarios on it (gate.Verdicts, gate.Decide).
func judgeVariant(out result.Run) verdict {
	if len(out.Variants) != 1 {
		return verdict{noVerdict, fmt.Sprintf("no verdict: %d variants where one was expected", len(out.Variants))}
	}
	v := out.Variants[0]
	guard := ""
	if v.Guard != "" {
		guard = " (guard: " + v.Guard + ")"
	}
	switch out.Verdict {
	case result.Pass:
		return verdict{passed, fmt.Sprintf("variant %s caught with %s by %s", v.Name, v.Expected, strings.Join(v.CaughtBy, ", "))}
	case result.Fail:
		var why []string
		for _, name := range v.Missed {
			for _, r := range out.Scenarios {
				if r.Name == name {
					why = append(why, fmt.Sprintf("%s seed %d showed %s", name, r.Seed, shown(r)))
				}
			}
		}
		for _, name := range v.NotRun {
			reason := "never run"
			for _, r := range out.Scenarios {
				if r.Name == name && r.Reason != "" {
					reason = firstLine(r.Reason)
				}
			}
			why = append(why, fmt.Sprintf("%s not run: %s", name, reason))
		}
		return verdict{failed, fmt.Sprintf("variant %s%s not caught: expected %s; %s", v.Name, guard, v.Expected, strings.Join(why, "; "))}
	default:
		var why []string
		for _, name := range v.Indeterminate {
			for _, r := range out.Scenarios {
				if r.Name == name {
					why = append(why, fmt.Sprintf("%s seed %d through %s: %s", name, r.Seed, attempts(r), firstLine(r.Reason)))
				}
			}
		}
		return verdict{noVerdict, fmt.Sprintf("no verdict: variant %s%s: its catching scenarios stayed indeterminate: %s", v.Name, guard, strings.Join(why, "; "))}
	}
}

// violationSummary says what a failing run broke: the invariants, each
// violation's kind, count and message, and where its logs are.
func violationSummary(res result.Scenario) string {
	lines := []string{fmt.Sprintf("%s seed %d: violation: %s", res.Name, res.Seed, res.Reason)}
	for _, v := range res.UnexpectedViolations() {
		lines = append(lines, fmt.Sprintf("  %s (%d events): %s", v.Kind, res.ViolationCount(v), v.Message))
	}
	if res.Dir != "" {
		lines = append(lines, "  logs and timeline kept in "+res.Dir)
	}
	return strings.Join(lines, "\n")
}

// shown is what a run on a variant showed instead of its expected kind.
func shown(r result.Scenario) string {
	switch {
	case r.Verdict == result.Fail && len(r.ViolationKinds()) > 0:
		return strings.Join(r.ViolationKinds(), ", ")
	case r.Verdict == result.Fail:
		return "fail: " + firstLine(r.Reason)
	default:
		return "no violation (" + r.Verdict + ")"
	}
}

// attempts says how many times a run was made.
func attempts(r result.Scenario) string {
	if r.Attempt <= 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", r.Attempt)
}

// runLine says one run's end in a line, as the CLI's progress does.
func runLine(res result.Scenario, retries int) string {
	line := fmt.Sprintf("%s [%s] seed %d: %s (%.1fs)", res.Name, res.Variant, res.Seed, res.Verdict, float64(res.DurationMS)/1000)
	if res.Verdict == result.Indeterminate {
		line += ": " + firstLine(res.Reason)
		if res.Attempt > 0 && res.Attempt <= retries {
			line += fmt.Sprintf(" (attempt %d: running it again with seed %d)", res.Attempt, res.Seed+1)
		}
	}
	return line
}

// details are a run's figures, one line each: its counts, faults and
// evidence.
func details(res result.Scenario) []string {
	c := res.Counts
	lines := []string{fmt.Sprintf("  %s [%s]: orders %d events %d published %d delivered %d dup-delivered %d absorbed %d lost %d phantom %d dup-effects %d recovery %dms",
		res.Name, res.Variant, c.Orders, c.Events, c.Published, c.Delivered, c.DuplicatesDelivered, c.DuplicatesAbsorbed, c.Lost, c.Phantom, c.DuplicateEffects, res.RecoveryMS)}
	for _, f := range res.Faults {
		lines = append(lines, fmt.Sprintf("    fault %s %s %s: hit=%t %s", f.Kind, f.Target, f.Detail, f.Hit, f.Error))
	}
	for _, e := range res.Evidence {
		lines = append(lines, fmt.Sprintf("    evidence %q: seen=%t %s", e.Name, e.Seen, e.Detail))
	}
	return lines
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
