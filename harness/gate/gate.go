// Package gate runs faultline's reliability gate: every scenario on the
// correct pipeline (all must pass, for every seed) and, for every broken
// variant, the scenarios that must catch it (each variant must be reported
// with the violation its missing guard causes).
package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/safe"
	"github.com/faultline-dev/faultline/harness/target"
)

// Catch says that a scenario must catch a variant with a violation kind.
type Catch struct {
	Variant  string
	Scenario string
	Expect   string // violation kind: lost, phantom, duplicate-effect, stale-write, stuck-row, stuck-position, …
	Guard    string
}

// CatchesOf are the catches a target file declares: for each of its broken
// variants, the scenarios that must catch it with its expected violation.
// A scenario name the catalogue does not know is an error naming the line.
func CatchesOf(t *target.Target, catalogue []runner.Scenario) ([]Catch, error) {
	known, names := namesOf(catalogue)
	var out []Catch
	var errs []error
	for _, v := range t.Variants {
		for _, sc := range v.CaughtBy {
			if !known[sc] {
				errs = append(errs, fmt.Errorf("%s:%d: variants[%s].caught_by: unknown scenario %q (known: %s)", t.Path, v.Line, v.Name, sc, strings.Join(names, ", ")))
				continue
			}
			out = append(out, Catch{Variant: v.Name, Scenario: sc, Expect: v.Expect, Guard: v.Guard})
		}
	}
	return out, errors.Join(errs...)
}

// Within are the catches whose scenario is among picked (a profile of
// the catalogue): a variant only another profile's scenarios catch is not
// run by this one.
func Within(catches []Catch, picked []runner.Scenario) []Catch {
	in := map[string]bool{}
	for _, sc := range picked {
		in[sc.Name] = true
	}
	var out []Catch
	for _, c := range catches {
		if in[c.Scenario] {
			out = append(out, c)
		}
	}
	return out
}

// KnownFindingsOf are the known findings a target file declares, each
// naming a scenario of the catalogue. A scenario name the catalogue does
// not know is an error naming the line.
func KnownFindingsOf(t *target.Target, catalogue []runner.Scenario) ([]target.KnownFinding, error) {
	known, names := namesOf(catalogue)
	var errs []error
	for _, k := range t.KnownFindings {
		if !known[k.Scenario] {
			msg := fmt.Sprintf("unknown scenario %q", k.Scenario)
			if s := closest(k.Scenario, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", s)
			} else {
				msg += " (known: " + strings.Join(names, ", ") + ")"
			}
			errs = append(errs, fmt.Errorf("%s:%d: known_findings[%s].scenario: %s", t.Path, k.Line, k.Scenario, msg))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return t.KnownFindings, nil
}

// namesOf are the catalogue's scenario names, as a set and sorted.
func namesOf(catalogue []runner.Scenario) (known map[string]bool, sorted []string) {
	known = map[string]bool{}
	for _, sc := range catalogue {
		known[sc.Name] = true
		sorted = append(sorted, sc.Name)
	}
	sort.Strings(sorted)
	return known, sorted
}

// closest is the name that shares the longest prefix with name, if it
// shares more than half of name: a likely misspelling.
func closest(name string, names []string) string {
	best, bestLen := "", len(name)/2
	for _, n := range names {
		l := 0
		for l < len(n) && l < len(name) && n[l] == name[l] {
			l++
		}
		if l > bestLen {
			best, bestLen = n, l
		}
	}
	return best
}

// Plan is what the gate runs.
type Plan struct {
	Scenarios []runner.Scenario // the catalogue
	Catches   []Catch
	// Known are the target's known findings: a correct-pipeline run that
	// shows exactly one does not fail the gate, and one that no longer
	// shows does.
	Known    []target.KnownFinding
	Seeds    []int64 // the correct pipeline runs once per seed; variants with the first
	Parallel int     // runs at once (exclusive scenarios still run alone)
	// Retries is how many times a run that ended indeterminate is run
	// again, each time with the next seed; every attempt is kept.
	Retries int
	// VariantsOnly skips the correct pipeline (a caller that runs it itself).
	VariantsOnly bool
	// Progress is told each finished run; may be nil.
	Progress func(done, total int, res result.Scenario)
	// Phase is told a run's phases; may be nil.
	Phase func(run string, phase string)
	// Tick is told a run's progress in its long phases; may be nil.
	Tick func(run, phase string, done float64)
}

// Goals of the time to a verdict (issue 7): the gate, the correct pipeline
// and every variant, within two minutes on a 2-core machine; one scenario
// within 10 s at the median.
const (
	GoalTotal          = 120 * time.Second
	GoalScenarioMedian = 10 * time.Second
)

// VariantStall ends a broken variant's wait for convergence once its
// pipeline has shown no change at all for this long, or for five of the
// target's leases if that is longer (runner.Options.Stall): a broken
// pipeline may never converge (no-lease leaves its rows Processing), and
// the checker reports what it finds then. A variant that converges slowly
// still moves, and waits up to the scenario's own bound; rows that stood
// still for five leases are ones no lease will free.
const VariantStall = 10 * time.Second

type job struct {
	sc      runner.Scenario
	variant string
	seed    int64
	// stuck: the variant is to be caught with rows left stuck, so its
	// pipeline never settles and the run waits until it stalls.
	stuck bool
	// expect is the violation a variant's run must show (Catch.Expect).
	expect string
}

// showedNothing reports whether a run says nothing of its job: it is
// indeterminate, or, on a broken variant, it did not show the violation
// expected and its window never opened (it failed on another count: a run
// whose window did not open cannot have missed the variant). Such a run
// is run again, and does not count as a miss.
func showedNothing(r result.Scenario, expect string, variant bool) bool {
	if r.Verdict == result.Indeterminate {
		return true
	}
	return variant && r.Verdict == result.Fail && !r.Caught(expect) && len(r.Unopened()) > 0
}

// expected is what a run is expected to take beyond the fixed costs every
// run has, to start the longest first: its paced or sustained workload
// and, when its pipeline is not to settle, the whole convergence bound.
func (j job) expected() time.Duration {
	spec := j.sc.TrafficFor(j.seed)
	d := spec.Pace
	if spec.Sustain != nil {
		d = max(d, spec.Sustain.For)
	}
	if j.stuck {
		d += VariantStall
	}
	return d
}

// Run runs the plan on shared infrastructure.
//
// The exclusive runs (they restart the broker) run one after the other.
// Where they get an infrastructure of their own (runner.Shared's
// ExclusiveApart), they do so beside the others; else they go first, alone,
// before any other run starts: started among the others they would wait
// for the runs under way to end, hold back those behind them meanwhile,
// and leave the workers half idle. The others run plan.Parallel at a
// time, the longest expected first, so that no long run starts last and
// keeps the gate waiting alone.
func Run(ctx context.Context, sh *runner.Shared, plan Plan) (result.Run, error) {
	if len(plan.Seeds) == 0 {
		return result.Run{}, fmt.Errorf("gate: no seed")
	}
	byName := map[string]runner.Scenario{}
	for _, sc := range plan.Scenarios {
		byName[sc.Name] = sc
	}
	var jobs []job
	for _, seed := range plan.Seeds {
		for _, sc := range plan.Scenarios {
			if !plan.VariantsOnly {
				jobs = append(jobs, job{sc: sc, seed: seed})
			}
		}
	}
	for _, c := range plan.Catches {
		sc, ok := byName[c.Scenario]
		if !ok {
			return result.Run{}, fmt.Errorf("gate: variant %s is to be caught by unknown scenario %q", c.Variant, c.Scenario)
		}
		jobs = append(jobs, job{sc: sc, variant: c.Variant, seed: plan.Seeds[0], stuck: c.Expect == "stuck-row" || c.Expect == "stuck-position", expect: c.Expect})
	}
	exclusive, others := schedule(jobs)

	started := time.Now()
	results := make([]result.Scenario, len(jobs))
	retried := make([][]result.Scenario, len(jobs))
	var mu sync.Mutex
	done := 0
	attempt := func(j job, seed int64) result.Scenario {
		opts := runner.Options{Seed: seed, Variant: j.variant}
		if j.variant != "" {
			opts.Stall = VariantStall
		}
		name := RunName(j.sc.Name, variantName(j.variant), seed)
		if plan.Phase != nil {
			opts.Phase = func(p string) { plan.Phase(name, p) }
		}
		if plan.Tick != nil {
			opts.Tick = func(p string, d float64) { plan.Tick(name, p, d) }
		}
		return sh.Run(ctx, j.sc, opts)
	}
	runJob := func(i int) {
		j := jobs[i]
		if err := ctx.Err(); err != nil {
			// Interrupted before it started: it starts nothing.
			results[i] = result.Scenario{Name: j.sc.Name, Variant: variantName(j.variant), Seed: j.seed, Verdict: result.Indeterminate,
				Reason: fmt.Sprintf("%s: %v before it started", result.Interrupted, context.Cause(ctx))}
			return
		}
		res := attempt(j, j.seed)
		// A run that showed nothing: run it again with the next seed, as
		// long as retries are left and no interrupt came.
		for n := 1; showedNothing(res, j.expect, j.variant != "") && n <= plan.Retries && ctx.Err() == nil; n++ {
			res.Attempt = n
			retried[i] = append(retried[i], res)
			if plan.Progress != nil {
				mu.Lock()
				plan.Progress(done, len(jobs), res)
				mu.Unlock()
			}
			res = attempt(j, j.seed+int64(n))
			res.Attempt = n + 1
		}
		results[i] = res
		mu.Lock()
		done++
		if plan.Progress != nil {
			plan.Progress(done, len(jobs), res)
		}
		mu.Unlock()
	}
	// runJobSafely is runJob with a panic outside the run (the progress
	// callback, the retry bookkeeping) made that job's indeterminate
	// result, so that the worker goes on with the others.
	runJobSafely := func(i int) {
		err := safe.Do("gate worker", func() error { runJob(i); return nil })
		if perr, ok := safe.As(err); ok {
			j := jobs[i]
			results[i] = result.Scenario{Name: j.sc.Name, Variant: variantName(j.variant), Seed: j.seed, Verdict: result.Indeterminate,
				Reason: fmt.Sprintf("%v\n%s", perr, perr.Stack)}
		}
	}
	apart := sh.ExclusiveApart()
	var wg sync.WaitGroup
	exclusiveTook := time.Duration(0)
	if apart {
		wg.Go(func() {
			for _, i := range exclusive {
				runJobSafely(i)
			}
		})
	} else {
		for _, i := range exclusive {
			runJobSafely(i)
		}
		exclusiveTook = time.Since(started)
	}
	queue := make(chan int)
	for range min(max(plan.Parallel, 1), max(len(others), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range queue {
				runJobSafely(i)
			}
		}()
	}
	for _, i := range others {
		queue <- i
	}
	close(queue)
	wg.Wait()

	out := result.Run{Schema: result.Schema, Seed: plan.Seeds[0], Seeds: plan.Seeds, Started: started, Scenarios: results}
	for _, r := range retried {
		out.Retried = append(out.Retried, r...)
	}
	out.Variants = Verdicts(plan.Catches, results)
	if !plan.VariantsOnly {
		out.KnownFindings = MarkKnown(plan.Known, results)
	}
	out.Interrupted = ctx.Err() != nil
	out.Verdict = Decide(out, plan.VariantsOnly)
	out.Pass = out.Verdict == result.Pass
	out.DurationMS = time.Since(started).Milliseconds()
	out.Timing = sh.Timing(results)
	out.Timing.RunsMS = out.DurationMS
	if len(exclusive) > 0 && !apart {
		out.Timing.ExclusiveMS = exclusiveTook.Milliseconds()
	}
	out.Timing.GoalTotalMS = GoalTotal.Milliseconds()
	out.Timing.GoalScenarioMedianMS = GoalScenarioMedian.Milliseconds()
	return out, nil
}

// Decide is the whole run's verdict from its runs' last attempts, its
// variants and its known findings: fail if the correct pipeline failed a
// run other than by showing a known finding (result.Scenario.Known), a
// variant was missed, or a known finding was not reproduced; else indeterminate if the run was interrupted, a run stayed
// indeterminate, a variant's catching runs were all indeterminate, or
// nothing of the correct pipeline could run; else pass.
func Decide(run result.Run, variantsOnly bool) string {
	failed, unknown := false, run.Interrupted
	ran := 0
	for _, r := range run.Scenarios {
		if r.Variant != variantName("") {
			continue
		}
		switch r.Verdict {
		case result.Pass, result.Limit:
			ran++
		case result.NotRun:
			// A scenario that needs what the target does not offer is
			// reported not run, with its reason: neither passed nor failed.
		case result.Fail:
			ran++
			// A run that showed a known finding, and nothing else,
			// shows what the target file says it shows.
			failed = failed || !r.Known
		default:
			ran++
			unknown = true
		}
	}
	if ran == 0 && !variantsOnly {
		unknown = true // nothing could be run: nothing was shown
	}
	if !variantsOnly {
		for _, k := range run.KnownFindings {
			// A known finding no longer shown is a stale entry: the
			// target file must keep saying what is true. (A finding whose
			// runs failed otherwise fails with those runs; one whose runs
			// showed nothing leaves them indeterminate.)
			if k.Status == result.KnownNotReproduced {
				failed = true
			}
		}
	}
	for _, v := range run.Variants {
		switch {
		case v.Caught:
		case len(v.Missed) > 0 || len(v.Indeterminate) == 0:
			failed = true // missed, or no catching scenario could run on it
		default:
			unknown = true
		}
	}
	switch {
	case failed:
		return result.Fail
	case unknown:
		return result.Indeterminate
	default:
		return result.Pass
	}
}

// MarkKnown marks the correct pipeline's runs that show a known finding
// (failed with its violation kinds and nothing else: Known), and says
// what the gate saw of each finding. Every run of a finding's scenario
// is to show it: a run that passed, or a scenario that was not run, is a
// finding not reproduced.
func MarkKnown(known []target.KnownFinding, results []result.Scenario) []result.KnownFinding {
	var out []result.KnownFinding
	for _, k := range known {
		f := result.KnownFinding{Scenario: k.Scenario, Violations: slices.Clone(k.Violations), Cause: k.Cause}
		var passed, other, unknown, notRun []string
		for i := range results {
			r := &results[i]
			if r.Variant != variantName("") || r.Name != k.Scenario {
				continue
			}
			switch {
			case r.ShowsOnly(k.Violations):
				r.Known = true
				f.Shown = append(f.Shown, result.KnownRun{Seed: r.Seed, Figures: figures(*r, k.Violations)})
			case r.Passed():
				passed = append(passed, fmt.Sprintf("seed %d", r.Seed))
			case r.Verdict == result.Fail:
				other = append(other, fmt.Sprintf("seed %d: %s", r.Seed, strings.Join(r.ViolationKinds(), ", ")))
			case r.Verdict == result.NotRun:
				notRun = append(notRun, r.Reason)
			default:
				unknown = append(unknown, fmt.Sprintf("seed %d", r.Seed))
			}
		}
		kinds := strings.Join(k.Violations, ", ")
		switch {
		case len(passed) > 0:
			f.Status = result.KnownNotReproduced
			f.Detail = fmt.Sprintf("known finding not reproduced: %s no longer shows %s (passed with %s); if the library fixed it, remove it from the target file",
				k.Scenario, kinds, strings.Join(passed, ", "))
		case len(f.Shown) > 0:
			f.Status = result.KnownShown
		case len(other) > 0:
			f.Status = result.KnownOther
			f.Detail = fmt.Sprintf("%s failed with violations the finding does not list (it lists %s): %s", k.Scenario, kinds, strings.Join(other, "; "))
		case len(unknown) > 0:
			f.Status = result.KnownIndeterminate
			f.Detail = fmt.Sprintf("%s showed nothing (indeterminate: %s)", k.Scenario, strings.Join(unknown, ", "))
		default:
			why := "it was not run"
			if len(notRun) > 0 && notRun[0] != "" {
				why = "it was not run: " + notRun[0]
			}
			f.Status = result.KnownNotReproduced
			f.Detail = fmt.Sprintf("known finding not reproduced: %s no longer shows %s (%s); remove it from the target file, or offer what the scenario needs",
				k.Scenario, kinds, why)
		}
		out = append(out, f)
	}
	return out
}

// figures are a run's counts of each of kinds it showed.
func figures(r result.Scenario, kinds []string) []result.Figure {
	counts := map[string]int{}
	for _, v := range r.UnexpectedViolations() {
		counts[v.Kind] += r.ViolationCount(v)
	}
	var out []result.Figure
	for _, k := range kinds {
		if n, ok := counts[k]; ok {
			out = append(out, result.Figure{Kind: k, Count: n})
		}
	}
	return out
}

// schedule orders the jobs: the exclusive ones, in plan order, to run one
// after the other; then the others, to run in parallel, the longest
// expected first (plan order among equals).
func schedule(jobs []job) (exclusive, others []int) {
	for i, j := range jobs {
		if j.sc.Exclusive {
			exclusive = append(exclusive, i)
		} else {
			others = append(others, i)
		}
	}
	sort.SliceStable(others, func(a, b int) bool { return jobs[others[a]].expected() > jobs[others[b]].expected() })
	return exclusive, others
}

// RunName names one run of the gate in its progress: scenario, variant
// and seed (two seeds of one scenario run at once).
func RunName(scenario, variant string, seed int64) string {
	return fmt.Sprintf("%s[%s] seed %d", scenario, variant, seed)
}

func variantName(v string) string {
	if v == "" {
		return "correct"
	}
	return v
}

// Verdicts decides, per variant, whether it was caught: a catching scenario
// ran on it and reported the violation its missing guard causes. A run that
// failed only by timing out or by an unrelated error does not count.
func Verdicts(catches []Catch, results []result.Scenario) []result.Variant {
	var order []string
	byVariant := map[string]*result.Variant{}
	for _, c := range catches {
		v, ok := byVariant[c.Variant]
		if !ok {
			v = &result.Variant{Name: c.Variant, Guard: c.Guard, Expected: c.Expect, CaughtBy: []string{}}
			byVariant[c.Variant] = v
			order = append(order, c.Variant)
		}
		ran, unknown := false, false
		for _, r := range results {
			if r.Variant != c.Variant || r.Name != c.Scenario || r.Verdict == result.NotRun {
				continue
			}
			if showedNothing(r, c.Expect, true) {
				unknown = true
				continue
			}
			ran = true
			if r.Caught(c.Expect) {
				v.Caught = true
				v.CaughtBy = append(v.CaughtBy, c.Scenario)
			} else {
				v.Missed = append(v.Missed, c.Scenario)
			}
		}
		switch {
		case unknown && !ran:
			v.Indeterminate = append(v.Indeterminate, c.Scenario)
		case !ran:
			v.NotRun = append(v.NotRun, c.Scenario)
		}
	}
	out := make([]result.Variant, 0, len(order))
	for _, name := range order {
		out = append(out, *byVariant[name])
	}
	return out
}

// Cell of the catch matrix.
const (
	Caught        = "caught"
	Missed        = "missed"
	NotRun        = "not run"
	Indeterminate = "indeterminate"
)

// Matrix is variant × scenario → caught / missed / not run.
func Matrix(run result.Run, catches []Catch) (variants, scenarios []string, cells map[string]map[string]string) {
	seenScenario := map[string]bool{}
	cells = map[string]map[string]string{}
	for _, c := range catches {
		if cells[c.Variant] == nil {
			cells[c.Variant] = map[string]string{}
			variants = append(variants, c.Variant)
		}
		if !seenScenario[c.Scenario] {
			seenScenario[c.Scenario] = true
			scenarios = append(scenarios, c.Scenario)
		}
	}
	for _, v := range variants {
		for _, s := range scenarios {
			cells[v][s] = NotRun
		}
	}
	for _, c := range catches {
		for _, r := range run.Scenarios {
			if r.Variant == c.Variant && r.Name == c.Scenario {
				switch {
				case r.Caught(c.Expect):
					cells[c.Variant][c.Scenario] = Caught
				case showedNothing(r, c.Expect, true):
					if cells[c.Variant][c.Scenario] == NotRun {
						cells[c.Variant][c.Scenario] = Indeterminate
					}
				case r.Verdict != result.NotRun && cells[c.Variant][c.Scenario] != Caught:
					cells[c.Variant][c.Scenario] = Missed
				}
			}
		}
	}
	sort.Strings(scenarios)
	return variants, scenarios, cells
}

// TargetVariants are the target file's variants as results.json carries
// them: the report's window table is drawn from them.
func TargetVariants(t *target.Target) []result.TargetVariant {
	out := make([]result.TargetVariant, 0, len(t.Variants))
	for _, v := range t.Variants {
		out = append(out, result.TargetVariant{Name: v.Name, Guard: v.Guard, Expect: v.Expect, CaughtBy: slices.Clone(v.CaughtBy)})
	}
	return out
}
