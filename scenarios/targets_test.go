package scenarios

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
)

// TestOtherTargetsPassTheGate: pipelines faultline did not write the way
// it wrote the reference pass the same gate — every scenario each can take
// passes on its correct pipeline, the variants it lists are caught —
// reached only through their target files:
//
//   - renamed: a copy of the reference with its tables and columns
//     renamed, described only by its own target file. Its programs are the
//     reference's, whose variants TestGateCatchesEveryVariant catches
//     every one; here one variant per violation the checks read through
//     the renamed contract (the effects and inbox, the facts, the audit
//     trail, the outbox's statuses and attempts) is enough to show that
//     those checks can fail through it, and the scenarios that catch them
//     to show that they hold through it on the correct pipeline;
//   - node-outbox: the article's pipeline written again in Node.js, with
//     crash points at three windows only and its broken variants, every
//     one caught.
//
// The two gates run side by side, in the suite's one pool of runs.
func TestOtherTargetsPassTheGate(t *testing.T) {
	if testing.Short() {
		t.Skip("the gate needs the real infrastructure; not in -short")
	}
	for _, other := range []struct {
		path string
		// variants: the variants to run, each by every scenario its
		// target file says catches it; nil: every one.
		variants []string
	}{
		{path: filepath.Join("testdata", "renamed", "faultline.yaml"), variants: []string{
			"commit-then-publish", // lost: the effects, read by message_id
			"publish-then-commit", // phantom: the facts behind the effects
			"no-fencing",          // stale-write: the audit trail of integration_outbox, claimed_by
			"no-lease",            // stuck-row: the statuses queued and in_flight
			"no-inbox",            // duplicate-effect: stock_holds, processed_messages
			"no-backoff",          // gave-up-early: tries and the status dead
		}},
		{path: filepath.Join("..", "examples", "node-outbox", "faultline.yaml")},
	} {
		loaded, err := target.Load(other.path)
		require.NoError(t, err)
		t.Run(loaded.Name, func(t *testing.T) {
			t.Parallel()
			gateOf(t, loaded, other.variants)
		})
	}
}

// readAs is sh attacking its own build of t read another way (a relay
// model, no event logs, a restart policy), its runs stopped when the test
// ends.
func readAs(t *testing.T, sh *runner.Shared, other *target.Target) *runner.Shared {
	cleanup := supervisor.NewCleanup()
	t.Cleanup(func() { _ = cleanup.Run(context.Background()) })
	read, err := sh.WithTarget(t.Context(), other, cleanup)
	require.NoError(t, err)
	return read
}

func gateOf(t *testing.T, other *target.Target, variants []string) {
	cleanup := supervisor.NewCleanup()
	t.Cleanup(func() { _ = cleanup.Run(context.Background()) })
	sh, err := shared.WithTarget(context.Background(), other, cleanup)
	require.NoError(t, err)
	catches, err := catchesIn(other, All())
	require.NoError(t, err)
	scs := All()
	if variants != nil {
		catches = slices.DeleteFunc(catches, func(c gate.Catch) bool { return !slices.Contains(variants, c.Variant) })
		for _, v := range variants {
			require.True(t, slices.ContainsFunc(catches, func(c gate.Catch) bool { return c.Variant == v }), "%s: variant %s is caught by no scenario of the catalogue", other.Name, v)
		}
		// The scenarios that catch them, and no others: what the checks
		// read through the renamed contract is read in each of them.
		scs = slices.DeleteFunc(scs, func(sc runner.Scenario) bool {
			return !slices.ContainsFunc(catches, func(c gate.Catch) bool { return c.Scenario == sc.Name })
		})
	}
	run, err := gate.Run(context.Background(), sh, gate.Plan{Scenarios: scs, Catches: catches, Seeds: []int64{seed}, Parallel: 8, Retries: retries,
		Progress: func(done, total int, res result.Scenario) {
			if !res.Passed() || res.Variant != "correct" {
				t.Logf("%s [%d/%d] %s on %s: %s (%s)", other.Name, done, total, res.Name, res.Variant, res.Verdict, res.Reason)
			}
		}})
	require.NoError(t, err)
	ran := 0
	for _, r := range run.Scenarios {
		if r.Variant == "correct" && r.Verdict != result.NotRun {
			ran++
			assert.Equal(t, correctVerdict(r.Name), r.Verdict, "%s, %s: %s", other.Name, r.Name, r.Reason)
		}
	}
	assert.NotZero(t, ran, "%s: no scenario could run", other.Name)
	for _, v := range run.Variants {
		assert.True(t, v.Caught, "%s: variant %s was not caught with a %s violation by %v", other.Name, v.Name, v.Expected, v.Missed)
	}
	assert.True(t, run.Pass, "%s: the gate did not pass", other.Name)
	t.Logf("%s: %d runs (%d of the catalogue ran on its correct pipeline), pass=%t, in %s", other.Name, len(run.Scenarios), ran, run.Pass, time.Duration(run.DurationMS)*time.Millisecond)
}

// TestWatermillExample: the Watermill pipeline (examples/watermill-outbox,
// built on a published outbox library and speaking none of faultline's
// protocol) is attacked from outside only. Its correct pipeline holds where
// the library's design holds — an outbox row committed after a later one is
// not skipped (the SQL subscriber reads only below the oldest running
// transaction), a producer killed at its commit loses nothing, a consumer
// whose acks are lost applies nothing twice — and loses events where the
// library publishes blind: watermill-amqp registers no basic.return
// listener, so a message unroutable while the queue's bindings are gone is
// confirmed and the forwarder's offset moves past it. That is the known
// finding its target file declares: the gate recognises the run as showing
// it, and passes on these runs.
func TestWatermillExample(t *testing.T) {
	if testing.Short() {
		t.Skip("scenarios need the real infrastructure; not in -short")
	}
	wm, err := target.Load(filepath.Join("..", "examples", "watermill-outbox", "faultline.yaml"))
	require.NoError(t, err)
	known, err := gate.KnownFindingsOf(wm, All())
	require.NoError(t, err)
	const unroutable = "blackbox-unroutable-then-routable"
	require.Len(t, known, 2, "the example declares the one library weakness the gate reproduces deterministically, under both scenarios that open its window")
	for _, k := range known {
		require.Equal(t, []string{"lost"}, k.Violations, k.Scenario)
	}
	// This test runs the black-box one: the gate judges the other too.
	known = slices.DeleteFunc(known, func(k target.KnownFinding) bool { return k.Scenario != unroutable })
	require.Len(t, known, 1)

	cleanup := supervisor.NewCleanup()
	t.Cleanup(func() { _ = cleanup.Run(context.Background()) })
	sh, err := shared.WithTarget(context.Background(), wm, cleanup)
	require.NoError(t, err)
	byName := map[string]runner.Scenario{}
	for _, sc := range All() {
		byName[sc.Name] = sc
	}
	cases := []struct {
		scenario string
		// notOffered: its window does not exist on an offset relay (it
		// publishes in its position's order): not run, with the reason
		notOffered bool
	}{
		{scenario: "blackbox-outbox-commit-order"},
		{scenario: "blackbox-producer-killed-at-commit"},
		{scenario: "blackbox-consumer-acks-dropped"},
		// the relay windows, timed by the offset relay's mark and publishes
		{scenario: "blackbox-relay-killed-at-claim"},
		{scenario: "blackbox-relay-confirmed-not-marked"},
		{scenario: "relay-crash-after-publish"},
		// held up past a lease at its mark, the other relay running
		{scenario: "blackbox-relay-frozen-past-lease"},
		{scenario: "aggregate-order", notOffered: true},
		{scenario: unroutable}, // the known finding: fails with lost events
	}
	runs := make([]result.Scenario, len(cases))
	t.Run("runs", func(t *testing.T) {
		for i, tc := range cases {
			t.Run(tc.scenario, func(t *testing.T) {
				t.Parallel()
				sc, ok := byName[tc.scenario]
				require.True(t, ok, "scenario %s is not in the catalogue", tc.scenario)
				runs[i] = runRetryingOn(t, sh, sc, runner.Options{Seed: seed})
				res := runs[i]
				switch {
				case tc.notOffered:
					require.Equal(t, result.NotRun, res.Verdict, "%s: %s", tc.scenario, res.Reason)
					assert.Contains(t, res.Reason, "not offered")
				case tc.scenario != unroutable:
					assert.Equal(t, result.Pass, res.Verdict, "%s: %s", tc.scenario, res.Reason)
				default:
					require.Equal(t, result.Fail, res.Verdict, "%s: %s", tc.scenario, res.Reason)
					lost := false
					for _, inv := range res.Invariants {
						lost = lost || (inv.Name == check.NoLost && !inv.OK)
					}
					assert.True(t, lost, "%s failed, but not with lost events: %s", tc.scenario, res.Reason)
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	// The gate's judgement of these runs: the unroutable run shows the
	// known finding and nothing else, so they pass together.
	findings := gate.MarkKnown(known, runs)
	require.Len(t, findings, 1)
	assert.Equal(t, result.KnownShown, findings[0].Status, findings[0].Detail)
	require.Len(t, findings[0].Shown, 1)
	figures := findings[0].Shown[0].Figures
	require.Len(t, figures, 1)
	assert.Equal(t, "lost", figures[0].Kind)
	assert.Positive(t, figures[0].Count)
	assert.True(t, runs[len(runs)-1].Known, "%s: %v", unroutable, runs[len(runs)-1].ViolationKinds())
	assert.Equal(t, result.Pass, gate.Decide(result.Run{Scenarios: runs, KnownFindings: findings}, false))
	t.Logf("known finding %s: %s; cause: %s", unroutable, findings[0].Line(), findings[0].Cause)
}

// TestCDCExample: the CDC pipeline (examples/cdc-outbox: a relay that
// tails logical replication with pglogrepl, black-box) holds where its
// position is kept right — the relay killed with its broker cut, its
// replication connection cut with changes streamed, the broker restarted,
// its broker link flapping, the broker's answers lost, the database
// crashed and started again under it — and each of its
// broken relays is caught by the scenario its target file names, with the
// violation it expects: a position confirmed on receipt or on a keepalive
// loses what was committed while the broker was cut; a publish without
// mandatory loses what was unroutable; a stream resumed from the last
// change received skips what was streamed and not published; a status
// that never moves leaves every row behind the slot (stuck-position).
func TestCDCExample(t *testing.T) {
	if testing.Short() {
		t.Skip("scenarios need the real infrastructure; not in -short")
	}
	t.Parallel()
	cdc, err := target.Load(filepath.Join("..", "examples", "cdc-outbox", "faultline.yaml"))
	require.NoError(t, err)
	cleanup := supervisor.NewCleanup()
	t.Cleanup(func() { _ = cleanup.Run(context.Background()) })
	sh, err := shared.WithTarget(context.Background(), cdc, cleanup)
	require.NoError(t, err)
	byName := map[string]runner.Scenario{}
	for _, sc := range append(All(), Production()...) {
		byName[sc.Name] = sc
	}
	catches, err := catchesIn(cdc, All())
	require.NoError(t, err)
	require.Len(t, catches, 5, "each broken relay named with its catcher")
	type run struct{ scenario, variant, expect string }
	runs := []run{{"blackbox-relay-killed-broker-cut", "correct", ""}, {"blackbox-relay-stream-cut", "correct", ""}, {"broker-restart", "correct", ""},
		{"relay-broker-link-flaps", "correct", ""}, {"blackbox-relay-answers-lost", "correct", ""}, {"database-restart", "correct", ""}}
	for _, c := range catches {
		runs = append(runs, run{c.Scenario, c.Variant, c.Expect})
	}
	for _, r := range runs {
		t.Run(r.scenario+"/"+r.variant, func(t *testing.T) {
			t.Parallel()
			sc, ok := byName[r.scenario]
			require.True(t, ok, "scenario %s is not in the catalogue", r.scenario)
			opts := runner.Options{Seed: seed}
			if r.variant != "correct" {
				opts.Variant, opts.Stall = r.variant, gate.VariantStall
			}
			res := runRetryingOn(t, sh, sc, opts)
			if r.variant == "correct" {
				assert.Equal(t, result.Pass, res.Verdict, "%s: %s", r.scenario, res.Reason)
				return
			}
			require.Equal(t, result.Fail, res.Verdict, "%s on %s: %s", r.scenario, r.variant, res.Reason)
			var kinds []string
			for _, inv := range res.Invariants {
				for _, v := range inv.Violations {
					kinds = append(kinds, v.Kind)
				}
			}
			assert.Contains(t, kinds, r.expect, "%s on %s failed, but not with its expected %s: %s", r.scenario, r.variant, r.expect, res.Reason)
		})
	}
}

// TestNodeBuildsIntoItsOwnFolder: two builds of the Node example side by
// side each install their packages in their own folder and leave the
// example's folder alone. `npm ci` empties node_modules before it
// installs; run in the example's folder, one faultline's build took the
// packages from under another's processes (a process started meanwhile was
// never ready).
func TestNodeBuildsIntoItsOwnFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs npm; not in -short")
	}
	t.Parallel()
	node, err := target.Load(filepath.Join("..", "examples", "node-outbox", "faultline.yaml"))
	require.NoError(t, err)
	source := filepath.Join(node.Dir, "node_modules")
	before, sourceErr := os.Stat(source)

	dirs := []string{t.TempDir(), t.TempDir()}
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, dir := range dirs {
		wg.Go(func() { errs[i] = runner.Build(context.Background(), node, dir) })
	}
	wg.Wait()
	for i, dir := range dirs {
		require.NoError(t, errs[i], "build %d", i+1)
		for _, file := range []string{"app/inventory.js", "app/relay.js", "app/order.js", "app/node_modules/amqplib/package.json", "app/node_modules/pg/package.json"} {
			assert.FileExists(t, filepath.Join(dir, file), "build %d", i+1)
		}
		assert.NoDirExists(t, filepath.Join(dir, "app", "test"), "the example's own tests are not copied")
	}
	if sourceErr == nil {
		after, err := os.Stat(source)
		require.NoError(t, err, "the example's own node_modules is still there")
		assert.True(t, os.SameFile(before, after), "the example's own node_modules was not replaced")
		assert.Equal(t, before.ModTime(), after.ModTime(), "the example's own node_modules was not written")
	}
}
