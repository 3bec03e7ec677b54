package explore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/proxies"
)

// fakeRunner decides a run from its schedule alone: relay.after-claim is
// never reached (as a window the pipeline never opens), and a pause at
// relay.after-confirm past failAbove, with 20 orders or more, breaks
// fencing. flaky makes every second run of a shrink candidate pass.
type fakeRunner struct {
	failAbove time.Duration
	flaky     func(name string, c fault.Crash) bool
	delay     time.Duration
	// unjudged, if set, makes the run of that name indeterminate, with
	// the reason it gives ("": none): an infrastructure error once its
	// faults happened, a window not opened where one did not.
	unjudged func(name string) string

	mu    sync.Mutex
	names []string
}

func (f *fakeRunner) Run(ctx context.Context, sc runner.Scenario, opts runner.Options) result.Scenario {
	f.mu.Lock()
	f.names = append(f.names, sc.Name)
	f.mu.Unlock()
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	res := result.Scenario{Name: sc.Name, Variant: opts.Variant, Seed: opts.Seed, Verdict: result.Pass, DurationMS: 10}
	broken := false
	for _, flt := range sc.Schedule(opts.Seed) {
		spec, _ := SpecOf(flt)
		hit := spec.Window() != protocol.RelayAfterClaim
		if c, ok := flt.(fault.Crash); ok {
			if c.Point == protocol.RelayAfterConfirm && c.Action == crashpoint.Pause && c.Hold >= f.failAbove && sc.Workload.Orders >= 20 {
				broken = f.flaky == nil || !f.flaky(sc.Name, c)
			}
		}
		res.Faults = append(res.Faults, result.Fault{Kind: "x", Hit: hit})
		if !hit {
			res.Verdict = result.Fail
		}
	}
	inv := result.Invariant{Name: "fencing", OK: !broken}
	if broken {
		res.Verdict = result.Fail
		inv.Violations = []result.Violation{{Kind: "stale-write", EventIDs: []string{"E1"}, Message: "a <stale> write", Timeline: []string{"relay-1 marked E1"}}}
	}
	res.Invariants = []result.Invariant{inv}
	if f.unjudged != nil {
		if why := f.unjudged(sc.Name); why != "" {
			res.Verdict, res.Reason, res.Invariants = result.Indeterminate, why, nil
			if strings.HasPrefix(why, "window not opened") {
				for i := range res.Faults {
					res.Faults[i].Hit = false
				}
			}
		}
	}
	return res
}

func exploreConfig(t *testing.T, items []Item) Config {
	tg := testTarget()
	s, err := SurfaceOf(tg)
	require.NoError(t, err)
	return Config{Target: tg.Name, Offered: OfferedOf(tg, s), Variant: "no-fencing", Seed: 1, Hits: 2, PlanTotal: len(items),
		Parallel: 4, Budget: time.Hour, ShrinkBudget: time.Hour, Repeats: 2}
}

func TestExplore(t *testing.T) {
	items, err := Enumerate(testTarget(), Options{Seed: 1, Hits: 2, Combos: 30})
	require.NoError(t, err)
	fr := &fakeRunner{failAbove: 4 * time.Second}
	cfg := exploreConfig(t, items)
	var progress []Progress
	var mu sync.Mutex
	checkpoints := 0
	cfg.Progress = func(p Progress) { mu.Lock(); progress = append(progress, p); mu.Unlock() }
	cfg.Checkpoint = func(*Report) { checkpoints++ }
	rep := Explore(context.Background(), fr, items, cfg)

	require.Len(t, rep.Runs, len(items))
	assert.True(t, rep.Exhausted)
	for i, r := range rep.Runs {
		assert.Equal(t, i, r.Index, "runs in plan order")
	}
	assert.Greater(t, checkpoints, len(items))

	byWindow := map[string]WindowCoverage{}
	for _, w := range rep.Coverage.Windows {
		byWindow[w.Window] = w
	}
	claim := byWindow[protocol.RelayAfterClaim]
	assert.Equal(t, StatusUnexplored, claim.Status, "a window no run opened")
	assert.Positive(t, claim.NotOpened)
	assert.Zero(t, claim.Opened)
	confirm := byWindow[protocol.RelayAfterConfirm]
	assert.Equal(t, StatusOpened, confirm.Status)
	assert.Positive(t, confirm.Violations["stale-write"])

	require.Len(t, rep.Findings, 1)
	f := rep.Findings[0]
	assert.Equal(t, "stale-write", f.Kind)
	assert.NotEmpty(t, f.Runs)
	require.Len(t, f.Original.Faults, 1, "the failing run with the fewest faults is shrunk")
	require.Len(t, f.Minimal.Faults, 1)
	c := f.Minimal.Faults[0].(fault.Crash)
	assert.Equal(t, int64(1), c.Hit)
	assert.Equal(t, protocol.RelayAfterConfirm, c.Point)
	assert.Equal(t, 5*time.Second, c.Hold, "lease 4s × 2.5 = 10s → 5s still fails; 2.5s and 3.75s do not")
	assert.Equal(t, 22, f.Minimal.Workload.Orders)
	assert.True(t, f.Complete)
	assert.Equal(t, "stale-write", f.Minimal.Violation)
	assert.Equal(t, "no-fencing", f.Minimal.Variant)
	assert.Equal(t, 2*f.Tried+Confirm, f.ShrinkRuns, "every candidate runs twice, the minimal schedule Confirm times more")
	require.NotNil(t, f.Example)
	assert.Equal(t, []string{"E1"}, f.Example.EventIDs)
	assert.Contains(t, f.Confirmed, "2 of 2")

	mu.Lock()
	defer mu.Unlock()
	last := progress[len(progress)-1]
	assert.Equal(t, "shrink", last.Stage)
	var explored Progress
	for _, p := range progress {
		if p.Stage == "explore" {
			explored = p
		}
	}
	assert.Equal(t, len(items), explored.Done)
	// the consumer's crash loop (it has a database link) is one of them,
	// and opened
	assert.Equal(t, 4, explored.Offered)
	assert.Equal(t, 3, explored.Opened)
	assert.Positive(t, explored.Violations["stale-write"])
	assert.Positive(t, explored.Left)
}

// A minimal schedule that does not fail every time it is confirmed falls
// back a step.
func TestExploreMinimalMustHoldUp(t *testing.T) {
	pause := pauseAt("relay-1", protocol.RelayAfterConfirm, 1, 10*time.Second)
	items := []Item{{Index: 0, Faults: []fault.Fault{pause}, Size: 1}}
	// A hold of 5 s fails both shrink runs, but not the last confirming run.
	fr := &fakeRunner{failAbove: 4 * time.Second, flaky: func(name string, c fault.Crash) bool {
		return c.Hold < 10*time.Second && strings.HasPrefix(name, "confirm-") && strings.HasSuffix(name, ".5")
	}}
	rep := Explore(context.Background(), fr, items, exploreConfig(t, items))
	require.Len(t, rep.Findings, 1)
	f := rep.Findings[0]
	assert.Equal(t, 10*time.Second, f.Minimal.Faults[0].(fault.Crash).Hold, "one step back: the hold it had before")
	assert.Equal(t, 22, f.Minimal.Workload.Orders, "the steps before it stand")
	require.NotEmpty(t, f.Steps)
	assert.NotContains(t, f.Steps[len(f.Steps)-1].Change, "hold")
	assert.False(t, f.Complete, "after a fall back a smaller schedule may still fail every time")
	assert.Contains(t, f.Confirmed, "5 of 5 runs confirming")
}

// A confirming run that ended without a verdict is made again, whether its
// faults happened or not: it does not count as a run that did not fail,
// which would make shrinking fall back. One that still says nothing is
// left out of the count, so long as most runs gave a verdict.
func TestExploreConfirmsAgainAfterAnUnjudgedRun(t *testing.T) {
	pause := pauseAt("relay-1", protocol.RelayAfterConfirm, 1, 10*time.Second)
	items := []Item{{Index: 0, Faults: []fault.Fault{pause}, Size: 1}}
	const stalled, unopened = "link relay-1.amqp carries no traffic", "window not opened: the consumer did not start consuming"
	for _, tc := range []struct {
		name      string
		retries   int
		why       string
		runs      []string // the confirming runs of the smallest schedule (hold 5 s) whose first try shows nothing
		hold      time.Duration
		confirmed string
	}{
		{name: "made again", retries: 2, why: stalled, runs: []string{".5"}, hold: 5 * time.Second, confirmed: "5 of 5 runs confirming"},
		{name: "a window not opened made again", retries: 2, why: unopened, runs: []string{".5"}, hold: 5 * time.Second, confirmed: "5 of 5 runs confirming"},
		{name: "no retries: counted among the runs with a verdict", retries: 0, why: stalled, runs: []string{".5"}, hold: 5 * time.Second,
			confirmed: "4 of 4 runs with a verdict (1 of 5 without one) confirming"},
		{name: "no retries, most without a verdict: one step back", retries: 0, why: unopened, runs: []string{".3", ".4", ".5"}, hold: 10 * time.Second,
			confirmed: "5 of 5 runs confirming"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			first := "" // the first confirming batch: the smallest schedule's
			fr := &fakeRunner{failAbove: 4 * time.Second}
			fr.unjudged = func(name string) string {
				mu.Lock()
				defer mu.Unlock()
				if !strings.HasPrefix(name, "confirm-") || strings.Contains(name, ".retry") {
					return ""
				}
				batch := name[:strings.LastIndex(name, ".")]
				if first == "" {
					first = batch
				}
				if batch == first && slices.ContainsFunc(tc.runs, func(suffix string) bool { return strings.HasSuffix(name, suffix) }) {
					return tc.why
				}
				return ""
			}
			cfg := exploreConfig(t, items)
			cfg.Retries = tc.retries
			rep := Explore(context.Background(), fr, items, cfg)
			require.Len(t, rep.Findings, 1)
			f := rep.Findings[0]
			assert.Equal(t, tc.hold, f.Minimal.Faults[0].(fault.Crash).Hold)
			assert.Contains(t, f.Confirmed, tc.confirmed)
			assert.Equal(t, f.Of, f.Failed, "every run with a verdict failed")
			retried := slices.ContainsFunc(fr.names, func(n string) bool { return strings.Contains(n, ".retry1") })
			assert.Equal(t, tc.retries > 0, retried, "%v", fr.names)
		})
	}
}

// A shrink candidate counts as failing only if it fails every time.
func TestExploreShrinkNeedsEveryRunToFail(t *testing.T) {
	pause := pauseAt("relay-1", protocol.RelayAfterConfirm, 1, 10*time.Second)
	items := []Item{{Index: 0, Faults: []fault.Fault{pause}, Size: 1}}
	// Holds below 10 s fail only on a candidate's first run.
	fr := &fakeRunner{failAbove: 4 * time.Second, flaky: func(name string, c fault.Crash) bool {
		return c.Hold < 10*time.Second && strings.HasSuffix(name, ".2")
	}}
	cfg := exploreConfig(t, items)
	rep := Explore(context.Background(), fr, items, cfg)
	require.Len(t, rep.Findings, 1)
	f := rep.Findings[0]
	assert.Equal(t, 10*time.Second, f.Minimal.Faults[0].(fault.Crash).Hold, "a hold that failed once in two is not taken")
	assert.Equal(t, 22, f.Minimal.Workload.Orders)
}

func TestExploreStopsAtTheBudget(t *testing.T) {
	items, err := Enumerate(testTarget(), Options{Seed: 1, Combos: 500})
	require.NoError(t, err)
	fr := &fakeRunner{failAbove: time.Hour, delay: 5 * time.Millisecond}
	cfg := exploreConfig(t, items)
	cfg.Parallel, cfg.Budget = 2, 40*time.Millisecond
	rep := Explore(context.Background(), fr, items, cfg)
	assert.NotEmpty(t, rep.Runs)
	assert.Less(t, len(rep.Runs), len(items))
	assert.False(t, rep.Exhausted)
	assert.Empty(t, rep.Findings)
	for i, r := range rep.Runs {
		assert.Equal(t, i, r.Index, "the plan's first runs, in order")
	}
}

func TestExploreStopsAtTheFirstViolation(t *testing.T) {
	items, err := Enumerate(testTarget(), Options{Seed: 1, Hits: 2, Combos: 30})
	require.NoError(t, err)
	whole := Explore(context.Background(), &fakeRunner{failAbove: 4 * time.Second}, items, exploreConfig(t, items))
	require.NotEmpty(t, whole.Findings)
	first := whole.Findings[0].Runs[0]

	cfg := exploreConfig(t, items)
	cfg.Parallel, cfg.StopAtFirst, cfg.ShrinkBudget = 1, true, 0
	rep := Explore(context.Background(), &fakeRunner{failAbove: 4 * time.Second}, items, cfg)
	require.Len(t, rep.Findings, 1)
	assert.Equal(t, first, rep.Findings[0].Runs[0], "the same first failing run")
	// One run at a time: at most the run handed out as the violation came in.
	assert.LessOrEqual(t, len(rep.Runs), first+2)
	assert.Less(t, len(rep.Runs), len(whole.Runs))
	assert.False(t, rep.Exhausted)
}

func TestMerge(t *testing.T) {
	items, err := Enumerate(testTarget(), Options{Seed: 4, Hits: 2, Combos: 20})
	require.NoError(t, err)
	whole := Explore(context.Background(), &fakeRunner{failAbove: 4 * time.Second}, items, exploreConfig(t, items))

	var shards []*Report
	for i := 1; i <= 2; i++ {
		cfg := exploreConfig(t, items)
		cfg.Shard = Shard{Index: i, Count: 2}
		part := cfg.Shard.Of(items)
		shards = append(shards, Explore(context.Background(), &fakeRunner{failAbove: 4 * time.Second}, part, cfg))
	}
	// Through their files, as the merge job reads them.
	dir := t.TempDir()
	var loaded []*Report
	for i, r := range shards {
		path := filepath.Join(dir, string(rune('a'+i))+".json")
		require.NoError(t, WriteReport(path, r))
		back, err := LoadReport(path)
		require.NoError(t, err)
		loaded = append(loaded, back)
	}
	merged, err := Merge([]*Report{loaded[1], loaded[0]})
	require.NoError(t, err)
	assert.Equal(t, []Shard{{1, 2}, {2, 2}}, merged.Shards)
	assert.Equal(t, len(items), merged.Planned)
	assert.True(t, merged.Exhausted)
	require.Len(t, merged.Runs, len(whole.Runs))
	for i := range whole.Runs {
		assert.Equal(t, whole.Runs[i].Index, merged.Runs[i].Index)
		assert.Equal(t, whole.Runs[i].Describe, merged.Runs[i].Describe)
	}
	assert.Equal(t, whole.Coverage, merged.Coverage, "the coverage of the shards is that of the whole")
	require.Len(t, merged.Findings, 1)
	assert.Equal(t, whole.Findings[0].Runs, merged.Findings[0].Runs)
	assert.Len(t, merged.Findings[0].Minimal.Faults, 1)

	// One shard alone: merged, with the other noted missing.
	one, err := Merge(loaded[:1])
	require.NoError(t, err)
	assert.False(t, one.Exhausted)
	assert.Contains(t, strings.Join(one.Notes, " "), "shards 2/2 missing")

	_, err = Merge([]*Report{loaded[0], loaded[0]})
	assert.ErrorContains(t, err, "shard 1/2 given twice")
	other := *loaded[1]
	other.Seed = 99
	_, err = Merge([]*Report{loaded[0], &other})
	assert.ErrorContains(t, err, "seed 99, not 1")
	_, err = Merge([]*Report{loaded[0], whole})
	assert.ErrorContains(t, err, "shard count 1, not 2")
	_, err = Merge([]*Report{whole, loaded[0]})
	assert.ErrorContains(t, err, "not sharded")
	_, err = Merge(nil)
	assert.Error(t, err)
}

func TestWriteAllAndPage(t *testing.T) {
	items, err := Enumerate(testTarget(), Options{Seed: 1, Hits: 1, Combos: -1})
	require.NoError(t, err)
	cfg := exploreConfig(t, items)
	cfg.Target = `<script>alert("x")</script>`
	rep := Explore(context.Background(), &fakeRunner{failAbove: 4 * time.Second}, items, cfg)
	dir := t.TempDir()
	require.NoError(t, WriteAll(dir, rep))

	require.Len(t, rep.Findings, 1)
	file := rep.Findings[0].File
	assert.Regexp(t, `^schedule-stale-write-relay-[0-9a-f]{6}\.json$`, file, "named by its signature")
	for _, name := range []string{ReportFile, PageFile, file, strings.TrimSuffix(file, ".json") + ".original.json"} {
		assert.FileExists(t, filepath.Join(dir, name))
	}
	s, err := LoadSchedule(filepath.Join(dir, file))
	require.NoError(t, err)
	assert.Equal(t, rep.Findings[0].Minimal, s)

	page, err := os.ReadFile(filepath.Join(dir, PageFile))
	require.NoError(t, err)
	html := string(page)
	assert.NotContains(t, html, "<script", "escaped, and no script of its own")
	assert.Contains(t, html, "&lt;script&gt;")
	assert.Contains(t, html, "a &lt;stale&gt; write")
	assert.NotContains(t, html, "http://")
	assert.NotContains(t, html, "https://")
	for _, want := range []string{protocol.RelayAfterClaim, "unexplored", "not offered", "original", "minimal", "faultline run --schedule " + file + " --variant no-fencing",
		"stale-write; faults on relay", "failed 5 of 5", `id="finding-` + strings.TrimSuffix(strings.TrimPrefix(file, "schedule-"), ".json")} {
		assert.Contains(t, html, want)
	}
}

// A run faultline could not judge is named on the page, escaped.
func TestPageNamesRunsWithoutAVerdict(t *testing.T) {
	rep := &Report{Target: "t", Variant: "correct", Runs: []Record{
		{Index: 0, Verdict: result.Pass},
		{Index: 1, Verdict: result.Fail, Reason: `observe: event log line 20: invalid character '<t>'`},
	}}
	dir := t.TempDir()
	require.NoError(t, WriteAll(dir, rep))
	page, err := os.ReadFile(filepath.Join(dir, PageFile))
	require.NoError(t, err)
	html := string(page)
	assert.Contains(t, html, "1 run(s) ended without a verdict")
	assert.Contains(t, html, "#1: fail: observe: event log line 20: invalid character &#39;&lt;t&gt;&#39;")
	assert.NotContains(t, html, "<t>")
}

// A run whose faults happened but that faultline could not judge is run
// again, up to Retries times, and says why its earlier attempts showed
// nothing; a run whose fault did not happen is the exploration's answer
// about that window and is not.
func TestExploreRunsAnUnjudgedRunAgain(t *testing.T) {
	broken := pauseAt("relay-1", protocol.RelayAfterConfirm, 1, 10*time.Second)
	unreached := pauseAt("relay-1", protocol.RelayAfterClaim, 1, 10*time.Second)
	for _, tc := range []struct {
		name      string
		fault     fault.Fault
		retries   int
		failFirst int // attempts that end unjudged
		runs      int
		verdict   string
		attempts  int
	}{
		{name: "unjudged once, then judged", fault: broken, retries: 2, failFirst: 1, runs: 2, verdict: result.Fail, attempts: 2},
		{name: "unjudged every time", fault: broken, retries: 2, failFirst: 9, runs: 3, verdict: result.Indeterminate, attempts: 3},
		{name: "no retries", fault: broken, retries: 0, failFirst: 1, runs: 1, verdict: result.Indeterminate},
		{name: "judged at once", fault: broken, retries: 2, runs: 1, verdict: result.Fail},
		{name: "window not opened", fault: unreached, retries: 2, failFirst: 9, runs: 1, verdict: result.Indeterminate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items := []Item{{Index: 0, Faults: []fault.Fault{tc.fault}, Size: 1}}
			n := 0
			fr := &fakeRunner{failAbove: 4 * time.Second, unjudged: func(name string) string {
				if !strings.HasPrefix(name, "explore-") {
					return ""
				}
				n++
				if n <= tc.failFirst {
					return "link relay-1.amqp carries no traffic <" + strconv.Itoa(n) + ">"
				}
				return ""
			}}
			cfg := exploreConfig(t, items)
			cfg.Retries, cfg.ShrinkBudget = tc.retries, 0
			rep := Explore(context.Background(), fr, items, cfg)
			require.Len(t, rep.Runs, 1)
			rec := rep.Runs[0]
			var explored []string
			for _, name := range fr.names {
				if strings.HasPrefix(name, "explore-") {
					explored = append(explored, name)
				}
			}
			assert.Len(t, explored, tc.runs, "%v", explored)
			assert.Equal(t, tc.verdict, rec.Verdict, rec.Reason)
			assert.Equal(t, tc.attempts, rec.Attempts)
			assert.Len(t, rec.Earlier, max(tc.attempts-1, 0))
			for i, why := range rec.Earlier {
				assert.Contains(t, why, "<"+strconv.Itoa(i+1)+">")
			}
			if tc.verdict == result.Fail && tc.fault == broken {
				assert.Contains(t, rec.Violations, "stale-write")
				// The finding's example is the judged attempt's violation.
				require.Len(t, rep.Findings, 1)
				require.NotNil(t, rep.Findings[0].Example)
				assert.Equal(t, "a <stale> write", rep.Findings[0].Example.Message)
			}
		})
	}
}

// A failing run whose schedule never fails again is not the finding: the
// next failing run of the kind is shrunk instead.
func TestExploreTriesTheNextFailingRun(t *testing.T) {
	items := []Item{
		{Index: 0, Faults: []fault.Fault{pauseAt("relay-1", protocol.RelayAfterConfirm, 1, 10*time.Second)}, Size: 1},
		{Index: 1, Faults: []fault.Fault{pauseAt("relay-2", protocol.RelayAfterConfirm, 1, 10*time.Second)}, Size: 1},
	}
	// relay-1's pause failed once, while exploring, and never again.
	fr := &fakeRunner{failAbove: 4 * time.Second, flaky: func(name string, c fault.Crash) bool {
		return c.Process == "relay-1" && !strings.HasPrefix(name, "explore-")
	}}
	rep := Explore(context.Background(), fr, items, exploreConfig(t, items))
	require.Len(t, rep.Findings, 1)
	f := rep.Findings[0]
	assert.Equal(t, []int{0, 1}, f.Runs)
	assert.Equal(t, "explore run #1", f.Original.Origin)
	assert.Equal(t, history.Ref("relay-2"), f.Minimal.Faults[0].(fault.Crash).Process)
	assert.Contains(t, f.Confirmed, "5 of 5 runs confirming")
}

// --first stops only at a violation that fails again: one that passes
// when its schedule is run again (a window only just opened) lets the
// exploration go on to the next.
func TestExploreFirstGoesOnPastAViolationThatDoesNotHoldUp(t *testing.T) {
	items := []Item{
		{Index: 0, Faults: []fault.Fault{pauseAt("relay-1", protocol.RelayAfterConfirm, 1, 10*time.Second)}, Size: 1},
		{Index: 1, Faults: []fault.Fault{pauseAt("relay-2", protocol.RelayAfterConfirm, 1, 10*time.Second)}, Size: 1},
		{Index: 2, Faults: []fault.Fault{pauseAt("relay-2", protocol.RelayAfterConfirm, 2, 10*time.Second)}, Size: 1},
		{Index: 3, Faults: []fault.Fault{pauseAt("relay-2", protocol.RelayAfterConfirm, 3, 10*time.Second)}, Size: 1},
	}
	// relay-1's pause fails while exploring and never again.
	fr := &fakeRunner{failAbove: 4 * time.Second, flaky: func(name string, c fault.Crash) bool {
		return c.Process == "relay-1" && !strings.HasPrefix(name, "explore-")
	}}
	cfg := exploreConfig(t, items)
	cfg.Parallel, cfg.StopAtFirst, cfg.StopKind, cfg.ShrinkBudget = 1, true, "stale-write", 0
	rep := Explore(context.Background(), fr, items, cfg)
	require.GreaterOrEqual(t, len(rep.Runs), 2, "went on past run #0")
	assert.LessOrEqual(t, len(rep.Runs), 3, "stopped at run #1, whose violation held up")
	assert.Equal(t, []string{"stale-write"}, rep.Runs[0].Violations, "run #0 is still recorded")
	assert.False(t, rep.Runs[0].HeldUp)
	assert.True(t, rep.Runs[1].HeldUp)
	assert.Equal(t, 2*cfg.Repeats, rep.Rechecks, "runs #0 and #1 were rechecked")
	require.Len(t, rep.Findings, 1)
	assert.Equal(t, "explore run #1", rep.Findings[0].Original.Origin, "the run that held up is shrunk first")
}

// The groups of the kind looked for are shrunk first; the others keep
// their order, and no group is lost or made up.
func TestLookedForFirst(t *testing.T) {
	g := func(kind, touched string) Group {
		return Group{Signature: Signature{Kind: kind, Touched: []string{touched}}}
	}
	tests := []struct {
		groups []Group
		kind   string
		want   []Group
	}{
		{[]Group{g("lost", "relay"), g("phantom", "order")}, "phantom", []Group{g("phantom", "order"), g("lost", "relay")}},
		{[]Group{g("a", "x"), g("b", "x"), g("c", "x"), g("c", "y"), g("d", "x")}, "c", []Group{g("c", "x"), g("c", "y"), g("a", "x"), g("b", "x"), g("d", "x")}},
		{[]Group{g("lost", "relay"), g("phantom", "order")}, "lost", []Group{g("lost", "relay"), g("phantom", "order")}},
		{[]Group{g("lost", "relay")}, "stale-write", []Group{g("lost", "relay")}},
		{[]Group{g("lost", "relay"), g("phantom", "order")}, "", []Group{g("lost", "relay"), g("phantom", "order")}},
		{nil, "lost", []Group{}},
	}
	for _, tt := range tests {
		groups := slices.Clone(tt.groups)
		assert.Equal(t, tt.want, lookedForFirst(groups, tt.kind), "first %q", tt.kind)
		assert.Equal(t, tt.groups, groups, "the groups given are left as they are")
	}
}

// Failing runs are grouped by signature: kind, stages, the processes and
// links touched (by role), the unroutable queue. Within a group, the runs
// are shrunk in order: one that held up when rechecked first, then the
// fewest faults, then the earliest. Groups come by kind, then the fewest
// touched first.
func TestFailures(t *testing.T) {
	crash := func(p history.Ref) Spec {
		return mustSpec(fault.Crash{Process: p, Point: protocol.ConsumerAfterReceive, Action: crashpoint.Kill, Hit: 1})
	}
	unbind := mustSpec(fault.Unbind{})
	lost := func(touched []string, unroutable bool, stages ...result.Stage) Signature {
		return Signature{Kind: "lost", Stages: stages, Touched: touched, Unroutable: unroutable}
	}
	consumer := lost([]string{"consumer"}, false)
	queue := lost(nil, true)
	runs := []Record{
		{Index: 0, Faults: []Spec{crash("consumer"), crash("relay-1")}, Signatures: []Signature{lost([]string{"consumer", "relay"}, false)}},
		{Index: 1, Faults: []Spec{crash("consumer")}, Signatures: []Signature{consumer, {Kind: "phantom", Touched: []string{"consumer"}}}},
		{Index: 2, Faults: []Spec{unbind}, Signatures: []Signature{queue}},
		{Index: 3, Faults: []Spec{crash("consumer"), unbind}, Signatures: []Signature{consumer}, HeldUp: true},
		{Index: 4, Faults: []Spec{crash("consumer")}, Signatures: []Signature{consumer}},
		{Index: 5, Faults: []Spec{crash("consumer")}},
		{Index: 6, Faults: []Spec{unbind}, Signatures: []Signature{queue}},
		{Index: 7, Faults: []Spec{unbind}, Signatures: []Signature{lost(nil, true, result.StageRoutedNowhere)}},
	}
	var got []string
	for _, g := range Failures(runs) {
		var order []string
		for _, r := range g.Runs {
			order = append(order, strconv.Itoa(r.Index))
		}
		got = append(got, g.Signature.Key()+" "+strings.Join(order, ","))
	}
	assert.Equal(t, []string{
		"lost||consumer| 3,1,4",
		"lost|||unroutable 2,6",
		"lost|routed-nowhere||unroutable 7",
		"lost||consumer,relay| 0",
		"phantom||consumer| 1",
	}, got)
}

// A record written before signatures were gets one per kind from its
// faults: the ones that happened, by role.
func TestRecordSigs(t *testing.T) {
	r := Record{Faults: []Spec{
		mustSpec(fault.Crash{Process: "relay-2", Point: protocol.RelayAfterClaim, Action: crashpoint.Kill, Hit: 1}),
		mustSpec(fault.Toxic{Link: "consumer.pg", Toxic: proxies.Timeout{}}),
		mustSpec(fault.LinkDown{Link: "relay-1.amqp"}),
		mustSpec(fault.Unbind{}),
	}, Hit: []bool{true, true, false, true}, Violations: []string{"lost", "stuck-row"}}
	assert.Equal(t, []Signature{
		{Kind: "lost", Touched: []string{"consumer.pg", "relay"}, Unroutable: true},
		{Kind: "stuck-row", Touched: []string{"consumer.pg", "relay"}, Unroutable: true},
	}, r.Sigs())
	assert.Empty(t, Record{Faults: r.Faults}.Sigs(), "no violation, no signature")
}
