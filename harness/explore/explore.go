package explore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/safe"
	"github.com/faultline-dev/faultline/harness/workload"
)

// Schema is the version of explore.json.
const Schema = "github.com/faultline-dev/faultline/explore/v1"

// Runner runs one scenario on shared infrastructure: *runner.Shared.
type Runner interface {
	Run(ctx context.Context, sc runner.Scenario, opts runner.Options) result.Scenario
}

// Config of an exploration.
type Config struct {
	Target  string // the target's name
	Offered Offered
	Variant string // "" or "correct": the correct pipeline
	Seed    int64
	Hits    int
	Shard   Shard
	// PlanTotal is the length of the whole plan (every shard's).
	PlanTotal int
	Workload  workload.Spec
	Settings  map[string]string
	// Parallel runs at once.
	Parallel int
	// Budget bounds the exploration: no run starts after it. ShrinkBudget
	// bounds the shrinking that follows (0: no shrinking).
	Budget, ShrinkBudget time.Duration
	// StopAtFirst ends the exploration at the first run that reports a
	// violation — of kind StopKind, if set — and fails the same way again
	// in Repeats runs of its schedule side by side (runs under way
	// finish), and goes on to shrink what was found. A violation that does
	// not fail again (a window only just opened) does not stop it.
	StopAtFirst bool
	StopKind    string
	// Repeats: a shrink candidate counts as failing only if it fails this
	// many runs out of this many (default 2).
	Repeats int
	// Retries is how many times a run that ended without a verdict on the
	// pipeline although its faults happened (Record.Unjudged: a link or
	// the broker that did not answer, a log that could not be read) is run
	// again, the same schedule: the budget bounds which runs start, and a
	// run under way is carried on to a verdict. Its record keeps
	// why the earlier attempts said nothing. A run whose fault did not
	// happen is not run again: that is the exploration's answer about the
	// window (coverage), and the plan's other hits try it. The runs that
	// recheck, shrink and confirm a finding are made again alike.
	Retries int
	// Converge bounds each run's wait for convergence (0: the runner's).
	Converge time.Duration
	// Stall ends a run's wait for convergence once nothing changed for it
	// (runner.Options.Stall; 0: never).
	Stall time.Duration
	// FaultDeadline bounds each fault's wait for its window (0: the
	// runner's): a window that does not open in the workload's time will
	// not open later, and a run that waits for it only costs time.
	FaultDeadline time.Duration
	Now           func() time.Time

	// Progress is told how the exploration is getting on after each run
	// and each shrink candidate; may be nil.
	Progress func(Progress)
	// Phase and Tick are told each run's phases and progress; may be nil.
	Phase func(run, phase string)
	Tick  func(run, phase string, done float64)
	// Checkpoint is given the report so far after each run and each
	// shrink, so an interrupted exploration leaves what it found; may be nil.
	Checkpoint func(*Report)
}

// Progress is how an exploration is getting on.
type Progress struct {
	Stage string // "explore" or "shrink"
	// Run is the run that just finished; "" when a shrink candidate was
	// decided.
	Run        string
	Done       int // runs finished (explore), candidates tried (shrink)
	Planned    int // runs in the plan's slice
	Running    int
	Opened     int            // windows opened so far
	Offered    int            // windows the target offers
	Violations map[string]int // kind → runs that reported it
	Left       time.Duration  // of the stage's budget
	Line       string         // what just happened
}

// Report is an exploration's outcome: explore.json.
type Report struct {
	Schema  string `json:"schema"`
	Target  string `json:"target"`
	Variant string `json:"variant"`
	Seed    int64  `json:"seed"`
	Hits    int    `json:"hits"`
	Shard   Shard  `json:"shard"`
	// Shards are the shards a merged report holds.
	Shards         []Shard           `json:"shards,omitempty"`
	PlanTotal      int               `json:"plan_total"`
	Planned        int               `json:"planned"` // runs in this shard's slice of the plan
	Workload       workloadSpec      `json:"workload"`
	Settings       map[string]string `json:"settings,omitempty"`
	BudgetMS       int64             `json:"budget_ms"`
	ShrinkBudgetMS int64             `json:"shrink_budget_ms"`
	Started        time.Time         `json:"started"`
	DurationMS     int64             `json:"duration_ms"`
	// Exhausted: every run of the slice ran before the budget ran out.
	Exhausted bool `json:"exhausted"`
	// Rechecks are the runs made, with StopAtFirst, to see whether a
	// violation fails again before it ends the exploration.
	Rechecks int       `json:"rechecks,omitempty"`
	Offered  Offered   `json:"offered"`
	Coverage Coverage  `json:"coverage"`
	Runs     []Record  `json:"runs"`
	Findings []Finding `json:"findings"`
	Notes    []string  `json:"notes,omitempty"`
}

// Finding is one distinct failure the exploration found — one signature:
// a kind of violation, where its events stopped, what the faults touched —
// with the failing schedule it was shrunk from and the minimal one.
type Finding struct {
	Kind      string    `json:"kind"`
	Signature Signature `json:"signature"`
	Label     string    `json:"label,omitempty"` // the signature in a few words
	// Runs are the explored runs that failed with it (and with the
	// signatures in Also).
	Runs []int `json:"runs"`
	// Also are the labels of the signatures folded into this finding: runs
	// that failed the same way with a fault too many (explainedBy).
	Also     []string `json:"also,omitempty"`
	Original Schedule `json:"original"`
	Minimal  Schedule `json:"minimal"`
	Steps    []Step   `json:"steps"`
	// Tried candidates, in ShrinkRuns runs; Complete: no smaller candidate
	// failed (the budget did not cut the shrink short).
	Tried      int  `json:"tried"`
	ShrinkRuns int  `json:"shrink_runs"`
	Complete   bool `json:"complete"`
	// Confirmed says how often the minimal schedule failed.
	Confirmed string `json:"confirmed"`
	// Failed of Of runs of the reported schedule, confirming it, failed
	// with the signature; Of counts the confirming runs that gave a
	// verdict (Of 0: not run again, or none did). A finding that failed
	// only sometimes is kept, with its rate: a flaky failure is still a
	// bug.
	Failed int `json:"failed"`
	Of     int `json:"of"`
	// Example is one violation of the kind from a failing run of the
	// minimal schedule, with its timeline.
	Example *result.Violation `json:"example,omitempty"`
	// File is the minimal schedule's file in the report folder.
	File string `json:"file,omitempty"`
}

func (cfg *Config) defaults() {
	cfg.Parallel = max(cfg.Parallel, 1)
	if cfg.Repeats < 1 {
		cfg.Repeats = 2
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Workload.Orders == 0 {
		cfg.Workload = workload.Steady()
	}
	if cfg.Hits == 0 {
		cfg.Hits = DefaultHits
	}
	if cfg.Shard.All() {
		cfg.Shard = Shard{Index: 1, Count: 1}
	}
}

// schedule is a run of faults as a schedule of this exploration: the
// exploration's workload, or the traffic profile the run drew, and the
// exploration's settings with the run's own (those that open its windows)
// over them.
func (cfg *Config) schedule(faults []fault.Fault, settings map[string]string, invariants []string, profile, origin string) Schedule {
	var all map[string]string
	if len(cfg.Settings)+len(settings) > 0 {
		all = maps.Clone(cfg.Settings)
		if all == nil {
			all = map[string]string{}
		}
		maps.Copy(all, settings)
	}
	wl := cfg.Workload
	if spec, ok := workload.ProfileNamed(profile); ok {
		wl = spec
	}
	return Schedule{Target: cfg.Target, Variant: variantName(cfg.Variant), Seed: cfg.Seed, Workload: wl,
		Settings: all, Invariants: invariants, Faults: faults, Origin: origin}
}

func (cfg *Config) options(name string) runner.Options {
	opts := runner.Options{Seed: cfg.Seed, Variant: cfg.Variant, Converge: cfg.Converge, Stall: cfg.Stall, FaultDeadline: cfg.FaultDeadline}
	if opts.Variant == "correct" {
		opts.Variant = ""
	}
	if cfg.Phase != nil {
		opts.Phase = func(p string) { cfg.Phase(name, p) }
	}
	if cfg.Tick != nil {
		opts.Tick = func(p string, d float64) { cfg.Tick(name, p, d) }
	}
	return opts
}

// explorer is the state of one exploration.
type explorer struct {
	cfg     Config
	r       Runner
	mu      sync.Mutex
	rep     *Report
	running int
	// examples keep, per run index, one violation of each kind it reported.
	examples map[int]map[string]result.Violation
	// found is closed at the first violation that held up when
	// cfg.StopAtFirst.
	found     chan struct{}
	foundOnce sync.Once
}

// Explore runs the plan's items, cfg.Parallel at a time on the shared
// infrastructure, in plan order until the budget runs out, then shrinks
// one failing schedule per distinct signature found (Failures,
// shrinkAll): the one with the fewest faults, the earliest among equals.
func Explore(ctx context.Context, r Runner, items []Item, cfg Config) *Report {
	cfg.defaults()
	e := &explorer{cfg: cfg, r: r, examples: map[int]map[string]result.Violation{}, found: make(chan struct{})}
	e.rep = &Report{Schema: Schema, Target: cfg.Target, Variant: variantName(cfg.Variant), Seed: cfg.Seed, Hits: cfg.Hits, Shard: cfg.Shard,
		PlanTotal: cfg.PlanTotal, Planned: len(items), Settings: cfg.Settings,
		Workload: workloadData(cfg.Workload),
		BudgetMS: cfg.Budget.Milliseconds(), ShrinkBudgetMS: cfg.ShrinkBudget.Milliseconds(), Started: cfg.Now(),
		Offered: cfg.Offered, Runs: []Record{}, Findings: []Finding{}}
	e.explore(ctx, items)
	e.mu.Lock()
	e.finish()
	e.rep.Exhausted = len(e.rep.Runs) == len(items)
	e.mu.Unlock()
	e.shrinkAll(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.finish()
	if e.cfg.Checkpoint != nil {
		e.cfg.Checkpoint(e.rep)
	}
	return e.rep
}

// explore runs the items until the budget runs out.
func (e *explorer) explore(ctx context.Context, items []Item) {
	deadline := time.NewTimer(e.cfg.Budget)
	defer deadline.Stop()
	e.rep.Runs = []Record{}
	jobs := make(chan Item)
	var wg sync.WaitGroup
	for range min(e.cfg.Parallel, max(len(items), 1)) {
		wg.Go(func() {
			for it := range jobs {
				// A panic of explore's own bookkeeping loses this run's
				// record, said so, and the worker goes on.
				if err := safe.Do(fmt.Sprintf("explore run #%d", it.Index), func() error { e.runItem(ctx, it); return nil }); err != nil {
					e.mu.Lock()
					e.progress("explore", it.Name(), len(e.rep.Runs), e.rep.Started.Add(e.cfg.Budget), fmt.Sprintf("#%d: %v", it.Index, err))
					e.mu.Unlock()
				}
			}
		})
	}
	// The first run always starts (a budget, however short, covers one);
	// no run starts after the budget.
feed:
	for i, it := range items {
		var expired <-chan time.Time
		if i > 0 {
			expired = deadline.C
		}
		select {
		case jobs <- it:
		case <-expired:
			break feed
		case <-e.found:
			break feed
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
}

func (e *explorer) runItem(ctx context.Context, it Item) {
	var res result.Scenario
	var rec Record
	if specs, err := Specs(it.Faults); err != nil {
		// Only what a schedule file can hold is run: its record must say
		// what ran.
		res = result.Scenario{Name: it.Name(), Verdict: result.NotRun, Reason: err.Error()}
		rec = RecordOf(it.Index, specs, it.Describe(), res)
	} else {
		rec, res = e.attempts(ctx, it, specs)
	}
	rec.Settings, rec.Invariants, rec.Profile = it.Settings, it.Invariants, it.Profile

	e.mu.Lock()
	e.rep.Runs = append(e.rep.Runs, rec)
	if len(rec.Violations) > 0 {
		e.examples[it.Index] = examples(res)
	}
	e.rep.Coverage = ComputeCoverage(e.rep.Offered, e.rep.Runs)
	line := fmt.Sprintf("#%d %s: %s", it.Index, rec.Describe, outcome(rec))
	e.progress("explore", it.Name(), len(e.rep.Runs), e.rep.Started.Add(e.cfg.Budget), line)
	if e.cfg.Checkpoint != nil {
		e.cfg.Checkpoint(e.rep)
	}
	e.mu.Unlock()

	if kind, ok := e.stopsAt(rec); ok {
		e.recheck(ctx, it, kind)
	}
}

// attempts runs the item until it is judged (untilJudged) while the
// exploration goes on (no stop); it returns the last attempt's record,
// with the earlier attempts' reasons, and result.
func (e *explorer) attempts(ctx context.Context, it Item, specs []Spec) (Record, result.Scenario) {
	s := e.cfg.schedule(it.Faults, it.Settings, it.Invariants, it.Profile, fmt.Sprintf("explore run #%d", it.Index))
	record := func(res result.Scenario) Record { return RecordOf(it.Index, specs, it.Describe(), res) }
	last, earlier := e.untilJudged(ctx, s, it.Name(), record, nil, func(n int, rec Record) bool {
		if !rec.Unjudged() || e.stopped() {
			return false
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.progress("explore", "", len(e.rep.Runs), e.rep.Started.Add(e.cfg.Budget),
			fmt.Sprintf("#%d %s: %s: run again (attempt %d of %d)", it.Index, rec.Describe, outcome(rec), n+1, e.cfg.Retries+1))
		return true
	})
	if len(earlier) > 0 {
		last.rec.Attempts, last.rec.Earlier = len(earlier)+1, earlier
	}
	return last.rec, last.res
}

// attempt is one run of a schedule: its record and its result.
type attempt struct {
	rec Record
	res result.Scenario
}

// untilJudged runs s as name and, while again(n, the record of attempt n,
// read from record) says the run told nothing of the pipeline and may be
// made again, again as name.retryN, up to cfg.Retries times, while ctx
// lives; done, if not nil, hears of every attempt. It returns
// the last attempt and why each earlier one said nothing. Every run
// explore makes of a schedule goes through it: an infrastructure stall is
// never taken for a run that did not fail.
func (e *explorer) untilJudged(ctx context.Context, s Schedule, name string, record func(result.Scenario) Record,
	done func(run string, res result.Scenario), again func(n int, rec Record) bool) (attempt, []string) {
	var earlier []string
	for n := 1; ; n++ {
		run := name
		if n > 1 {
			run = fmt.Sprintf("%s.retry%d", name, n-1)
		}
		e.mu.Lock()
		e.running++
		e.mu.Unlock()
		res := e.r.Run(ctx, s.Scenario(run), e.cfg.options(run))
		e.mu.Lock()
		e.running--
		e.mu.Unlock()
		if done != nil {
			done(run, res)
		}
		rec := record(res)
		if n > e.cfg.Retries || rec.Judged() || ctx.Err() != nil || !again(n, rec) {
			return attempt{rec: rec, res: res}, earlier
		}
		earlier = append(earlier, rec.Reason)
	}
}

// stopped reports whether a violation held up (StopAtFirst): no run
// starts after it, and a run under way is not made again.
func (e *explorer) stopped() bool {
	select {
	case <-e.found:
		return true
	default:
		return false
	}
}

// stopsAt reports whether the run's violations would end the exploration
// (cfg.StopAtFirst), and the kind to recheck.
func (e *explorer) stopsAt(rec Record) (string, bool) {
	if !e.cfg.StopAtFirst || len(rec.Violations) == 0 || e.stopped() {
		return "", false // nothing to stop at, or already stopping
	}
	if e.cfg.StopKind == "" {
		return rec.Violations[0], true
	}
	return e.cfg.StopKind, slices.Contains(rec.Violations, e.cfg.StopKind)
}

// recheck runs the item's schedule cfg.Repeats more times side by side and
// ends the exploration if every one fails with kind; otherwise it goes on.
func (e *explorer) recheck(ctx context.Context, it Item, kind string) {
	s := e.cfg.schedule(it.Faults, it.Settings, it.Invariants, it.Profile, fmt.Sprintf("explore run #%d", it.Index))
	results := e.sideBySide(ctx, s, fmt.Sprintf("recheck-%d", it.Index), e.cfg.Repeats, Record.Unjudged, nil)
	failed := 0
	for _, res := range results {
		if FailsSame(res, len(it.Faults), kind) {
			failed++
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rep.Rechecks += len(results)
	held := failed == len(results)
	if held {
		for i := range e.rep.Runs {
			if e.rep.Runs[i].Index == it.Index {
				e.rep.Runs[i].HeldUp = true
			}
		}
	}
	next := "exploring on"
	select {
	case <-e.found:
		next = "already stopping" // another run held up meanwhile
	default:
		if held {
			e.foundOnce.Do(func() { close(e.found) })
			next = "stopping"
		}
	}
	verdict := fmt.Sprintf("failed again in %d of %d runs: %s", failed, len(results), next)
	e.progress("explore", "", len(e.rep.Runs), e.rep.Started.Add(e.cfg.Budget), fmt.Sprintf("#%d %s: rechecked, %s", it.Index, kind, verdict))
}

// outcome is a run's result in a few words.
func outcome(r Record) string {
	switch {
	case len(r.Violations) > 0:
		return fmt.Sprintf("%s %v", r.Verdict, r.Violations)
	case r.Verdict == result.Pass:
		return "pass"
	case r.Verdict == result.Limit:
		return "documented limit"
	case !r.Opened() && r.Verdict == result.Fail:
		return "window not opened"
	default:
		return r.Verdict + ": " + r.Reason
	}
}

// progress tells cfg.Progress; e.mu is held.
func (e *explorer) progress(stage, run string, done int, until time.Time, line string) {
	if e.cfg.Progress == nil {
		return
	}
	opened, offered := e.rep.Coverage.Covered()
	e.cfg.Progress(Progress{Stage: stage, Run: run, Done: done, Planned: e.rep.Planned, Running: e.running, Opened: opened, Offered: offered,
		Violations: violationCounts(e.rep.Runs), Left: max(until.Sub(e.cfg.Now()), 0), Line: line})
}

func violationCounts(runs []Record) map[string]int {
	out := map[string]int{}
	for _, r := range runs {
		for _, k := range r.Violations {
			out[k]++
		}
	}
	return out
}

// examples keeps one violation of each kind a run reported.
func examples(res result.Scenario) map[string]result.Violation {
	out := map[string]result.Violation{}
	for _, v := range res.UnexpectedViolations() {
		if _, ok := out[v.Kind]; ok {
			continue
		}
		if len(v.Timeline) > 40 {
			v.Timeline = v.Timeline[:40]
		}
		if len(v.EventIDs) > 20 {
			v.EventIDs = v.EventIDs[:20]
		}
		out[v.Kind] = v
	}
	return out
}

// finish sorts the runs and counts the coverage; e.mu is held.
func (e *explorer) finish() {
	sort.Slice(e.rep.Runs, func(i, j int) bool { return e.rep.Runs[i].Index < e.rep.Runs[j].Index })
	e.rep.Coverage = ComputeCoverage(e.rep.Offered, e.rep.Runs)
	e.rep.DurationMS = e.cfg.Now().Sub(e.rep.Started).Milliseconds()
}

// shrinkAll rechecks and shrinks one failing schedule per signature, in
// turn, sharing the shrink budget between the signatures still to do. A
// signature the findings so far already explain (explainedBy: the same
// failure with a fault too many) is folded into them instead. The run
// shrunk first may have failed by a hair (a window it only just opened):
// while its schedule does not hold up, the next failing run of the
// signature is tried, up to maxAttempts, and the one that failed most
// often is reported — never dropped, with its rate.
func (e *explorer) shrinkAll(ctx context.Context) {
	e.mu.Lock()
	groups := lookedForFirst(Failures(e.rep.Runs), e.cfg.StopKind)
	e.mu.Unlock()
	end := e.cfg.Now().Add(e.cfg.ShrinkBudget)
	for i, g := range groups {
		sig := g.Signature
		indices := make([]int, len(g.Runs))
		for j, r := range g.Runs {
			indices[j] = r.Index
		}
		slices.Sort(indices)
		e.mu.Lock()
		by := explainedBy(sig, e.rep.Findings)
		if len(by) > 0 {
			for _, j := range by {
				f := &e.rep.Findings[j]
				f.Runs = slices.Compact(slices.Sorted(slices.Values(append(f.Runs, indices...))))
				f.Also = append(f.Also, sig.Label())
			}
			e.progress("shrink", "", 0, end, fmt.Sprintf("%s: the same failure as finding(s) %s with faults more: folded into them, not shrunk",
				sig.Label(), foundLabels(e.rep.Findings, by)))
			e.mu.Unlock()
			continue
		}
		e.mu.Unlock()
		until := e.cfg.Now().Add(end.Sub(e.cfg.Now()) / time.Duration(len(groups)-i))
		var f Finding
		for attempt, rec := range g.Runs[:min(len(g.Runs), maxAttempts)] {
			h, held := e.finding(ctx, sig, indices, rec, until)
			if attempt == 0 || held || failsMoreOften(h, f) {
				f = h
			}
			if held || e.cfg.ShrinkBudget <= 0 || ctx.Err() != nil {
				break
			}
		}
		e.mu.Lock()
		e.rep.Findings = append(e.rep.Findings, f)
		if e.cfg.Checkpoint != nil {
			e.cfg.Checkpoint(e.rep)
		}
		e.mu.Unlock()
	}
}

// failsMoreOften reports whether a was run again and failed more often
// than b (or b was not run again).
func failsMoreOften(a, b Finding) bool {
	if a.Of == 0 {
		return false
	}
	return b.Of == 0 || a.Failed*b.Of > b.Failed*a.Of
}

// foundLabels are the labels of the findings at indices, quoted.
func foundLabels(fs []Finding, indices []int) string {
	parts := make([]string, len(indices))
	for i, j := range indices {
		parts[i] = strconv.Quote(fs[j].Sig().Label())
	}
	return strings.Join(parts, ", ")
}

// sideBySide runs the schedule n times at once, as name.1 .. name.n, each
// again while again says its record told nothing (untilJudged: counted as
// "did not fail", a run without a verdict would make a finding's schedule
// look flaky, or shrinking fall back a step), and tells done (if not nil)
// of each attempt as it ends.
func (e *explorer) sideBySide(ctx context.Context, s Schedule, name string, n int, again func(Record) bool, done func(run string, res result.Scenario)) []result.Scenario {
	results := make([]result.Scenario, n)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			record := func(res result.Scenario) Record { return RecordOf(0, make([]Spec, len(s.Faults)), "", res) }
			last, _ := e.untilJudged(ctx, s, fmt.Sprintf("%s.%d", name, i+1), record, done, func(_ int, rec Record) bool { return again(rec) })
			results[i] = last.res
		})
	}
	wg.Wait()
	return results
}

// lookedForFirst puts the groups of the kind looked for (--first with
// --variant) first among the groups to shrink, keeping their order and the
// others': they get the largest shares of the budget.
func lookedForFirst(groups []Group, kind string) []Group {
	out := make([]Group, 0, len(groups))
	for _, g := range groups {
		if g.Signature.Kind == kind {
			out = append(out, g)
		}
	}
	for _, g := range groups {
		if g.Signature.Kind != kind {
			out = append(out, g)
		}
	}
	return out
}

// heldUpFirst ranks a run that held up when rechecked before one that did
// not.
func heldUpFirst(r Record) int {
	if r.HeldUp {
		return 0
	}
	return 1
}

// maxAttempts bounds the failing runs of one signature tried as a
// finding's original.
const maxAttempts = 3

// finding shrinks the failing run rec of the signature until the
// deadline; held says whether what it reports failed every confirming run.
func (e *explorer) finding(ctx context.Context, sig Signature, runs []int, rec Record, until time.Time) (Finding, bool) {
	faults, err := Faults(rec.Faults)
	if err != nil {
		return Finding{}, false // cannot happen: the records were written from faults
	}
	orig := e.cfg.schedule(faults, rec.Settings, rec.Invariants, rec.Profile, fmt.Sprintf("explore run #%d", rec.Index))
	orig.Violation = sig.Kind
	f := Finding{Kind: sig.Kind, Signature: sig, Label: sig.Label(), Runs: runs, Original: orig, Minimal: orig, Steps: []Step{},
		Confirmed: fmt.Sprintf("failed once with %s while exploring (run #%d); not shrunk", sig.Label(), rec.Index)}
	if ex, ok := e.examples[rec.Index][sig.Kind]; ok {
		f.Example = &ex
	}
	if e.cfg.ShrinkBudget <= 0 || ctx.Err() != nil {
		return f, false
	}
	held := e.shrink(ctx, &f, until)
	return f, held
}

// Confirm is how many more runs, side by side, a minimal schedule must
// fail, all of them, before it is reported: the shrinker takes a candidate
// on Repeats runs, and a schedule shrunk to the edge of its window (a hold
// just past the lease) can pass the next time. One that does not hold up
// falls back a step, at most maxFallback times, and then to the original.
const (
	Confirm     = 5
	maxFallback = 4
)

// shrink shrinks a finding's original schedule until deadline, then
// confirms the minimal schedule (falling back a step while it does not
// hold up). A schedule fails when a run of it fails like the finding's
// signature (FailsLike). When nothing smaller holds up, the original is
// run Confirm times and reported with how often it failed, however
// seldom.
func (e *explorer) shrink(ctx context.Context, f *Finding, deadline time.Time) bool {
	var mu sync.Mutex
	var n, tried int
	sig, label, slug := f.Sig(), f.Sig().Label(), f.Sig().Slug()
	found := map[string]result.Violation{} // schedule key → a violation it failed with
	// failsIn runs s repeats times side by side and counts the runs that
	// failed like the signature, and those that judged the pipeline at
	// all (Record.Judged). A candidate of the shrink is run again only
	// when its faults all happened and still nothing was judged
	// (Record.Unjudged): a smaller schedule whose window does not open is
	// not one that fails. A confirming run is run again whatever kept it
	// from a verdict: the schedule failed before, so a run that said
	// nothing (a stalled start, a window the load kept shut) is no sign
	// that it passes.
	failsIn := func(ctx context.Context, s Schedule, repeats int, stage string) (failed, judged int) {
		mu.Lock()
		n++
		name := fmt.Sprintf("%s-%s-%03d", stage, slug, n)
		mu.Unlock()
		again := Record.Unjudged
		if stage == "confirm" {
			again = func(r Record) bool { return !r.Judged() }
		}
		results := e.sideBySide(ctx, s, name, repeats, again, func(run string, res result.Scenario) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.progress("shrink", run, tried, deadline, fmt.Sprintf("%s: %s", run, outcome(RecordOf(0, make([]Spec, len(s.Faults)), "", res))))
		})
		mu.Lock()
		defer mu.Unlock()
		f.ShrinkRuns += len(results)
		for _, res := range results {
			if RecordOf(0, make([]Spec, len(s.Faults)), "", res).Judged() {
				judged++
			}
			if !FailsLike(res, len(s.Faults), sig) {
				continue
			}
			failed++
			if _, ok := found[s.key()]; !ok {
				if ex, ok := examples(res)[sig.Kind]; ok {
					found[s.key()] = ex
				}
			}
		}
		return failed, judged
	}
	// confirm runs s Confirm times: it holds when every run that judged
	// the pipeline failed like the signature, and most of them did judge.
	confirm := func(ctx context.Context, s Schedule) (failed, judged int, holds bool) {
		failed, judged = failsIn(ctx, s, Confirm, "confirm")
		return failed, judged, failed == judged && judged > Confirm/2
	}
	fails := func(ctx context.Context, s Schedule) bool {
		failed, _ := failsIn(ctx, s, e.cfg.Repeats, "shrink")
		return failed == e.cfg.Repeats
	}
	opts := ShrinkOptions{Batch: max(e.cfg.Parallel/e.cfg.Repeats, 1), Deadline: deadline, Now: e.cfg.Now,
		Tried: func(c Candidate, failed, taken bool) {
			verdict := "passes or fails otherwise: kept the larger schedule"
			switch {
			case taken:
				verdict = fmt.Sprintf("still fails with %s (%d of %d runs): taken", label, e.cfg.Repeats, e.cfg.Repeats)
			case failed:
				// Side by side with a candidate before it that was taken;
				// tried again from there if it is still smaller.
				verdict = fmt.Sprintf("still fails with %s (%d of %d runs), but an earlier candidate of its batch was taken", label, e.cfg.Repeats, e.cfg.Repeats)
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			tried++
			e.progress("shrink", "", tried, deadline, fmt.Sprintf("%s: %s — %s", label, c.Change, verdict))
		}}
	shrunk := Shrink(ctx, f.Original, fails, opts)
	f.Tried, f.Complete = shrunk.Tried, shrunk.Complete
	// Confirm, falling back a step while the schedule does not hold up.
	kept, keptFailed, keptJudged := -1, 0, 0
	for i := len(shrunk.Steps) - 1; i >= 0 && i >= len(shrunk.Steps)-maxFallback && ctx.Err() == nil; i-- {
		failed, judged, holds := confirm(ctx, shrunk.Steps[i].Schedule)
		e.mu.Lock()
		verdict := "holds up: " + confirmedIn(failed, judged)
		if !holds {
			verdict = confirmedIn(failed, judged) + ": one step back"
		}
		e.progress("shrink", "", tried, deadline, fmt.Sprintf("%s: confirming the schedule after %d steps (%d runs) — %s", label, i+1, Confirm, verdict))
		e.mu.Unlock()
		if holds {
			kept, keptFailed, keptJudged = i, failed, judged
			break
		}
	}
	if kept < len(shrunk.Steps)-1 {
		f.Complete = false // it fell back: a smaller schedule may yet fail every time
	}
	if kept < 0 {
		f.Minimal, f.Steps = f.Original, []Step{}
		f.Minimal.Violation = f.Kind
		if ctx.Err() != nil {
			return false
		}
		// Nothing smaller held up: how often does the original fail?
		failed, judged, holds := confirm(ctx, f.Original)
		f.Failed, f.Of = failed, judged
		if ex, ok := found[f.Original.key()]; ok {
			f.Example = &ex
		}
		switch {
		case holds:
			f.Confirmed = fmt.Sprintf("the original schedule failed with %s in %s confirming it; no smaller schedule failed every time", label, confirmedIn(failed, judged))
			return true
		case failed > 0:
			f.Confirmed = fmt.Sprintf("flaky: the original schedule failed with %s in %s confirming it; kept, not shrunk (no smaller schedule failed every time)", label, confirmedIn(failed, judged))
		default:
			f.Confirmed = fmt.Sprintf("failed with %s while exploring, but in %s confirming it: kept, as seen once", label, confirmedIn(failed, judged))
		}
		return false
	}
	f.Minimal, f.Steps = shrunk.Steps[kept].Schedule, shrunk.Steps[:kept+1]
	f.Minimal.Violation = f.Kind
	f.Minimal.Origin = fmt.Sprintf("%s, shrunk in %d steps (%d candidates tried)", f.Original.Origin, len(f.Steps), f.Tried)
	f.Failed, f.Of = keptFailed, keptJudged
	f.Confirmed = fmt.Sprintf("the minimal schedule failed with %s in %d of %d runs while shrinking and in %s confirming it",
		label, e.cfg.Repeats, e.cfg.Repeats, confirmedIn(keptFailed, keptJudged))
	if ex, ok := found[f.Minimal.key()]; ok {
		f.Example = &ex
	}
	return true
}

// confirmedIn says in how many of the Confirm runs a schedule failed:
// "4 of 5 runs", or, where some runs said nothing of the pipeline even
// when run again, "4 of 4 runs with a verdict (1 of 5 without one)".
func confirmedIn(failed, judged int) string {
	if judged == Confirm {
		return fmt.Sprintf("%d of %d runs", failed, Confirm)
	}
	return fmt.Sprintf("%d of %d runs with a verdict (%d of %d without one)", failed, judged, Confirm-judged, Confirm)
}

// FailsSame reports whether a run failed the same way: it reported the
// violation kind and every one of its faults happened (a fault that never
// happened is not part of the failure).
func FailsSame(res result.Scenario, faults int, kind string) bool {
	if !res.HasViolation(kind) || len(res.Faults) != faults {
		return false
	}
	return !slices.ContainsFunc(res.Faults, func(f result.Fault) bool { return !f.Hit })
}
