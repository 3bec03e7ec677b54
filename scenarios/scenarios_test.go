package scenarios

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
)

// shared is the one infrastructure of this test binary, set by TestMain.
var shared *runner.Shared

// tgt is the target under attack: FAULTLINE_TARGET, else the reference
// pipeline's target file.
var tgt *target.Target

// seed is FAULTLINE_SEED, or one drawn for this run (printed, so a failing
// schedule can be reproduced).
var seed int64

// gateParallel is faultline gate's default --parallel.
const gateParallel = 8

func TestMain(m *testing.M) {
	flag.Parse()
	// Scenarios mostly wait (leases, backoffs): run more of them at once
	// than the default GOMAXPROCS, unless -parallel was given.
	if !flagGiven("test.parallel") {
		_ = flag.Set("test.parallel", "10")
	}
	var err error
	if seed, err = seedFromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	path := os.Getenv("FAULTLINE_TARGET")
	if path == "" {
		path = filepath.Join("..", "system", "faultline.yaml")
	}
	if tgt, err = target.Load(path); err != nil {
		fmt.Fprintln(os.Stderr, "faultline scenarios:", err)
		os.Exit(2)
	}
	if testing.Short() {
		os.Exit(m.Run())
	}
	fmt.Fprintf(os.Stderr, "faultline scenarios: target %s (%s), seed %d (reproduce with FAULTLINE_SEED=%d)\n", tgt.Name, tgt.Path, seed, seed)
	cleanup := supervisor.NewCleanup()
	stop := cleanup.OnSignal(nil)
	ctx := context.Background()
	// A failing run keeps its logs for evidence: under reports/, where a
	// run's output belongs, not in a temporary folder nobody removes. The
	// folder is removed at the end when no run kept anything in it.
	runs, err := filepath.Abs(filepath.Join("..", "reports", fmt.Sprintf("test-runs-%s-%d", time.Now().Format("20060102-150405"), os.Getpid())))
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultline scenarios: runs folder:", err)
		os.Exit(2)
	}
	// The tests run gates side by side: together they run no more
	// pipelines at once than one gate does (its default --parallel).
	shared, err = runner.StartShared(ctx, runner.SharedOptions{Root: runs, Log: os.Stderr, Target: tgt, MaxRuns: gateParallel}, cleanup)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultline scenarios:", err)
		_ = cleanup.Run(ctx)
		os.Exit(1)
	}
	code := m.Run()
	_ = cleanup.Run(ctx)
	stop()
	os.Exit(code)
}

func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

func seedFromEnv() (int64, error) {
	v := os.Getenv("FAULTLINE_SEED")
	if v == "" {
		return time.Now().UnixNano() % 1_000_000, nil
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("FAULTLINE_SEED=%q: want an integer", v)
	}
	return s, nil
}

// TestScenarios runs every scenario of the catalogue on the correct
// pipeline; each passes only with its evidence. -run TestScenarios/NAME
// picks one.
func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("scenarios need the real infrastructure; not in -short")
	}
	for _, sc := range All() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			res := runRetrying(t, sc, seed)
			if res.Verdict == result.NotRun {
				// The infrastructure provider cannot do what the scenario
				// needs (e.g. restart a broker it does not own): not run,
				// never passed.
				t.Skipf("not run (%s provider, target %s): %s", shared.Infra.Name(), tgt.Name, res.Reason)
			}
			assert.Equal(t, correctVerdict(sc.Name), res.Verdict, "scenario %s failed: %s", sc.Name, res.Reason)
		})
	}
}

// retries is how many times a test runs a scenario again after an
// indeterminate run, as the gate does by default.
const retries = 2

// runRetrying runs sc on the correct pipeline and, while it ends
// indeterminate (its window never opened, the infrastructure erred), again
// with the next seed, up to retries times: an indeterminate run shows
// nothing, so it is never a pass, and it is reported each time.
func runRetrying(t *testing.T, sc runner.Scenario, seed int64) result.Scenario {
	t.Helper()
	return runRetryingOn(t, shared, sc, runner.Options{Seed: seed})
}

// runRetryingOn is runRetrying on the infrastructure sh (its target), with
// opts (a variant, a convergence bound) from opts.Seed on.
func runRetryingOn(t *testing.T, sh *runner.Shared, sc runner.Scenario, opts runner.Options) result.Scenario {
	t.Helper()
	return runRetryingUntil(t, sh, sc, opts, indeterminate)
}

// indeterminate says why res cannot be judged: it is indeterminate ("" if
// it is not).
func indeterminate(res result.Scenario) string {
	if res.Verdict == result.Indeterminate {
		return "indeterminate (" + res.Reason + ")"
	}
	return ""
}

// runRetryingUntil runs sc until again says nothing (why the attempt
// cannot be judged), at most retries times more, as runRetryingOn does for
// an indeterminate verdict.
func runRetryingUntil(t *testing.T, sh *runner.Shared, sc runner.Scenario, opts runner.Options, again func(result.Scenario) string) result.Scenario {
	t.Helper()
	seed := opts.Seed
	res := sh.Run(context.Background(), sc, opts)
	report(t, res)
	for n := 1; n <= retries; n++ {
		why := again(res)
		if why == "" {
			break
		}
		t.Logf("%s seed %d: %s: running it again with seed %d", sc.Name, res.Seed, why, seed+int64(n))
		if res.Dir != "" {
			t.Cleanup(func() { _ = os.RemoveAll(res.Dir) }) // superseded: the last attempt's logs are what counts
		}
		opts.Seed = seed + int64(n)
		res = sh.Run(context.Background(), sc, opts)
		report(t, res)
	}
	return res
}

// report logs what the run measured, and for a failure where its logs are.
func report(t *testing.T, res result.Scenario) {
	t.Helper()
	c := res.Counts
	t.Logf("%s seed %d: %s in %dms; orders %d events %d published %d delivered %d dup-published %d dup-delivered %d absorbed %d lost %d phantom %d dup-effects %d fenced %d recovery %dms",
		res.Name, res.Seed, res.Verdict, res.DurationMS, c.Orders, c.Events, c.Published, c.Delivered, c.DuplicatesPublished, c.DuplicatesDelivered,
		c.DuplicatesAbsorbed, c.Lost, c.Phantom, c.DuplicateEffects, c.FencedWrites, res.RecoveryMS)
	for _, f := range res.Faults {
		t.Logf("  fault %s %s %s: hit=%t %s", f.Kind, f.Target, f.Detail, f.Hit, f.Error)
	}
	for _, e := range res.Evidence {
		t.Logf("  evidence %q: seen=%t (%s)", e.Name, e.Seen, e.Detail)
	}
	if res.Passed() {
		return
	}
	for _, line := range res.Failed() {
		t.Logf("  FAILED: %s", line)
	}
	for _, v := range res.Violations() {
		t.Logf("  violation %s: %s\n    %s", v.Kind, v.Message, strings.Join(v.Timeline, "\n    "))
	}
	if res.Dir != "" {
		t.Logf("  logs and timeline kept in %s", res.Dir)
	}
}

// TestCatalogue: every scenario the design asks for is there, with evidence.
func TestCatalogue(t *testing.T) {
	want := []string{
		"producer-crash-after-commit", "relay-crash-after-claim", "relay-crash-after-publish", "relay-crash-after-confirm",
		"relay-pause-past-lease", "relay-db-slow-past-lease", "amqp-reset-before-confirm", "unroutable-then-routable",
		"unroutable-budget-exhausted", "broker-nack", "broker-restart", "consumer-crash-after-receive",
		"consumer-crash-after-commit", "consumer-crash-before-commit", "producer-crash-before-commit", "consumer-db-down", "relay-db-down", "poison-message", "aggregate-order",
		"relay-crash-during-renewal", "inbox-retention-replay", "random-chaos",
		"consumer-db-cut-during-commit", "producer-db-cut-during-commit", "relay-pause-before-retry-past-lease", "relay-renewal-pause-past-lease", "unroutable-short-outage",
		"blackbox-producer-killed-at-commit", "blackbox-relay-killed-at-claim", "blackbox-relay-frozen-past-lease", "blackbox-relay-db-slow-past-lease",
		"blackbox-relay-confirmed-not-marked", "blackbox-relay-answers-lost", "blackbox-consumer-acks-dropped", "blackbox-consumer-db-cut-with-deliveries",
		"blackbox-consumer-db-cut-mid-transaction", "blackbox-unroutable-then-routable", "blackbox-poison-message",
		"blackbox-outbox-commit-order",
		"relay-backlog-crash-after-publish", "relay-backlog-amqp-reset-in-flight", "relay-backlog-unroutable", "relay-backlog-nack-storm", "consumer-backlog-crash-after-receive", "two-consumers-crash-after-receive",
		"poison-in-backlog", "broker-restart-over-backlog", "burst-producer-crash-after-commit", "sustained-relay-crash-after-confirm",
	}
	for _, name := range want {
		sc, err := Lookup(name)
		if assert.NoError(t, err) {
			assert.NotEmpty(t, sc.Schedule(1), "%s injects no fault", name)
		}
	}
	_, err := Lookup("no-such-scenario")
	assert.ErrorContains(t, err, `unknown scenario "no-such-scenario"`)
	for _, sc := range append(All(), Production()...) {
		for seed := int64(1); seed <= 10; seed++ {
			assert.NoError(t, fault.CheckOrder(sc.Schedule(seed)), "%s, seed %d", sc.Name, seed)
		}
	}
	for _, sc := range All() {
		assert.NoError(t, check.ValidateOptional(sc.Invariants), "%s asks for an invariant the checker has no optional one of", sc.Name)
		for _, spec := range sc.Traffic() {
			assert.NoError(t, spec.Validate(), "%s: traffic %s", sc.Name, spec.ProfileName())
		}
		if sc.Window != "" {
			_, known := protocol.DescribeWindow(sc.Window)
			assert.True(t, known, "%s names window %q, which the protocol does not define", sc.Name, sc.Window)
		}
	}
}

// TestSameSeedSameSchedule: a seed fixes the schedule; another seed may not.
func TestSameSeedSameSchedule(t *testing.T) {
	for _, sc := range All() {
		a, b := sc.Schedule(42), sc.Schedule(42)
		require.Len(t, b, len(a))
		for i := range a {
			assert.Equal(t, a[i].Describe(), b[i].Describe(), sc.Name)
		}
	}
	chaos, err := Lookup("random-chaos")
	require.NoError(t, err)
	differs := false
	for s := int64(1); s < 20 && !differs; s++ {
		differs = fmt.Sprint(describeAll(chaos.Schedule(0))) != fmt.Sprint(describeAll(chaos.Schedule(s)))
	}
	assert.True(t, differs, "random-chaos gives the same schedule for every seed")
}

func describeAll(fs []fault.Fault) []result.Fault {
	var out []result.Fault
	for _, f := range fs {
		out = append(out, f.Describe())
	}
	return out
}

// TestGateCatchesEveryVariant runs the catching scenarios on every broken
// variant: each must be reported with the violation its missing guard
// causes. A harness that cannot catch a broken guard proves nothing.
func TestGateCatchesEveryVariant(t *testing.T) {
	if testing.Short() {
		t.Skip("the gate needs the real infrastructure; not in -short")
	}
	t.Parallel()
	catches, err := catchesIn(tgt, All())
	require.NoError(t, err)
	run, err := gate.Run(context.Background(), shared, gate.Plan{
		Scenarios: All(), Catches: catches, Seeds: []int64{seed}, Parallel: 6, VariantsOnly: true, Retries: retries,
		Progress: func(done, total int, res result.Scenario) {
			t.Logf("[%d/%d] %s on %s: %s (%s)", done, total, res.Name, res.Variant, res.Verdict, res.Reason)
		},
	})
	require.NoError(t, err)
	require.NotEmpty(t, run.Variants)
	for _, v := range run.Variants {
		assert.True(t, v.Caught, "variant %s (guard: %s) was not caught with a %s violation by %v", v.Name, v.Guard, v.Expected, v.Missed)
	}
	for _, r := range run.Scenarios {
		if r.Dir != "" && !assert.NotEqual(t, result.NotRun, r.Verdict) {
			t.Logf("%s on %s kept its logs in %s", r.Name, r.Variant, r.Dir)
		}
	}
}

// TestTargetCatchesNameKnownScenarios: every scenario the target file names
// in a variant's caught_by is in the catalogue.
func TestTargetCatchesNameKnownScenarios(t *testing.T) {
	catches, err := catchesIn(tgt, All())
	require.NoError(t, err)
	assert.NotEmpty(t, catches)
}

// TestHarnessNeverImportsATarget: the harness and the scenarios reach a
// pipeline only through its target file and the protocol.
func TestHarnessNeverImportsATarget(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../harness/...", ".").CombinedOutput()
	require.NoError(t, err, string(out))
	for _, pkg := range strings.Fields(string(out)) {
		assert.False(t, strings.HasPrefix(pkg, "github.com/faultline-dev/faultline/system"), "harness or scenarios depend on %s", pkg)
		assert.False(t, strings.HasPrefix(pkg, "github.com/faultline-dev/faultline/examples"), "harness or scenarios depend on %s", pkg)
	}
}

// TestEndToEnd: 200 orders through HTTP, two relays, one consumer, no
// fault: 200 reservations, every outbox row Published, the queue empty.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real infrastructure; not in -short")
	}
	t.Parallel()
	res := runRetrying(t, runner.Scenario{
		Name: "end-to-end", Window: "none",
		Workload: workload.Spec{Orders: 200, Concurrency: 8},
	}, seed)
	require.Equal(t, result.Pass, res.Verdict, res.Reason)
	c := res.Counts
	assert.Equal(t, 200, c.Orders)
	assert.Equal(t, 200, c.Reservations)
	assert.Equal(t, 0, c.StuckRows)
	assert.Equal(t, 0, c.Failed)
	assert.GreaterOrEqual(t, c.Confirmed, 200)
	for _, inv := range res.Invariants {
		if inv.Name == check.LeaseKept {
			// The reference's relays log their claims and nothing in this
			// run reads the outbox's audit trail: it is not installed.
			assert.True(t, inv.NotChecked, "%s: %s", inv.Name, inv.Detail)
			assert.Contains(t, inv.Detail, "did not install the outbox's audit trail")
			continue
		}
		assert.True(t, inv.OK, "%s: %s", inv.Name, inv.Detail)
	}
}

// TestHarnessPanicMakesOneRunIndeterminate: a bug of the harness inside one
// run (here an evidence check that panics) makes that run indeterminate —
// it shows nothing about the pipeline — with the panic as its reason and
// its stack in the run's folder; the gate runs it again, lists both
// attempts, and finishes the others.
func TestHarnessPanicMakesOneRunIndeterminate(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real infrastructure; not in -short")
	}
	t.Parallel()
	small := workload.Spec{Orders: 20, Concurrency: 2}
	plan := gate.Plan{
		Scenarios: []runner.Scenario{
			{Name: "panics", Window: "none", Workload: small, Evidence: []check.Evidence{
				check.Custom("a check with a bug", func(*history.Record) (bool, string) { panic("a bug in a check") }),
			}},
			{Name: "fine", Window: "none", Workload: small},
		},
		Seeds: []int64{seed}, Parallel: 2, Retries: 1,
	}
	run, err := gate.Run(context.Background(), shared, plan)
	require.NoError(t, err)
	require.Len(t, run.Scenarios, 2)
	byName := map[string]result.Scenario{}
	for _, r := range append(run.Retried, run.Scenarios...) {
		if r.Dir != "" {
			t.Cleanup(func() { _ = os.RemoveAll(r.Dir) }) // the panic is this test's, not the pipeline's
		}
	}
	for _, r := range run.Scenarios {
		byName[r.Name] = r
	}
	panics := byName["panics"]
	assert.Equal(t, result.Indeterminate, panics.Verdict)
	assert.Contains(t, panics.Reason, "harness panic in run: a bug in a check")
	assert.Equal(t, 2, panics.Attempt)
	assert.Equal(t, seed+1, panics.Seed, "run again with the next seed")
	if assert.NotEmpty(t, panics.Dir, "an indeterminate run keeps its folder") {
		stack, err := os.ReadFile(filepath.Join(panics.Dir, "panic-run.txt"))
		if assert.NoError(t, err) {
			assert.Contains(t, string(stack), "a bug in a check")
			assert.Contains(t, string(stack), "goroutine", "the stack is kept")
		}
	}
	if assert.Len(t, run.Retried, 1) {
		assert.Equal(t, 1, run.Retried[0].Attempt)
		assert.Equal(t, seed, run.Retried[0].Seed)
		assert.Equal(t, result.Indeterminate, run.Retried[0].Verdict)
	}
	assert.Equal(t, result.Pass, byName["fine"].Verdict, byName["fine"].Reason)
	assert.Equal(t, result.Indeterminate, run.Verdict)
	assert.False(t, run.Pass)
}
