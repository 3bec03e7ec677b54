package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/explore"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
)

func writeSchedule(t *testing.T, targetName string) string {
	path := filepath.Join(t.TempDir(), "schedule.json")
	require.NoError(t, explore.WriteSchedule(path, explore.Schedule{Target: targetName, Variant: "no-fencing", Seed: 3, Workload: workload.Steady(),
		Faults: []fault.Fault{fault.Crash{Process: "relay-1", Point: protocol.RelayAfterConfirm, Action: crashpoint.Pause, Hit: 1, Hold: 5 * time.Second}}}))
	return path
}

// Every bad command line of explore, merge and run --schedule is a usage
// error (exit 2) caught before any infrastructure starts.
func TestExploreUsageErrors(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "garbage.json")
	require.NoError(t, os.WriteFile(garbage, []byte(`{"schema":"github.com/faultline-dev/faultline/schedule/v1","target":"reference","workload":{"orders":10},"faults":[{"kind":"meteor"}]}`), 0o644))
	other := writeSchedule(t, "someone-else")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"explore", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"explore", "--shard", "0/2", "--seed", "1"}, `--shard "0/2": want 1 ≤ i ≤ n`},
		{[]string{"explore", "--shard", "3/2", "--seed", "1"}, `--shard "3/2": want 1 ≤ i ≤ n`},
		{[]string{"explore", "--shard", "x", "--seed", "1"}, `--shard "x": want i/n`},
		{[]string{"explore", "--shard", "1/2"}, "--shard needs --seed"},
		{[]string{"explore", "--budget", "0s"}, "--budget must be positive"},
		{[]string{"explore", "--budget", "soon"}, `invalid value "soon" for flag -budget`},
		{[]string{"explore", "--hits", "0"}, "--hits must be 1..100"},
		{[]string{"explore", "--traffic", "tsunami"}, `--traffic "tsunami": want one of paced, burst, relay-backlog, consumer-backlog`},
		{[]string{"explore", "--repeats", "0"}, "--repeats must be at least 1"},
		{[]string{"explore", "--shrink-budget", "-1s"}, "--shrink-budget must not be negative"},
		{[]string{"explore", "extra"}, "explore takes no arguments"},
		{[]string{"explore", "--variant", "nope"}, `has no variant "nope"`},
		{[]string{"explore", "--set", "warp=9"}, `has no setting "warp"`},
		{[]string{"explore", "--set", "novalue"}, "want NAME=VALUE"},
		{[]string{"explore", "--parallel", "0"}, "--parallel must be at least 1"},
		{[]string{"explore", "--target", "testdata/broken.yaml"}, "databse: unknown field"},
		{[]string{"run", "--schedule", filepath.Join(t.TempDir(), "missing.json")}, "read schedule"},
		{[]string{"run", "--schedule", garbage}, `unknown fault kind "meteor"`},
		{[]string{"run", "--schedule", other}, `is of target "someone-else", not of "reference"`},
		{[]string{"run", "--schedule", writeSchedule(t, "reference"), "--variant", "nope"}, `has no variant "nope"`},
		{[]string{"run", "--schedule", writeSchedule(t, "reference"), "--repeat", "0"}, "--repeat must be 1..100"},
		{[]string{"merge"}, "name the report folders"},
		{[]string{"merge", filepath.Join(t.TempDir(), "nowhere")}, "read exploration"},
		{[]string{"merge", "--bogus", "x"}, "flag provided but not defined: -bogus"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errOut)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut.String())
		assert.Contains(t, errOut.String(), tc.want, "%v", tc.args)
	}
}

func TestUsageListsExploreAndMerge(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, exitOK, run(context.Background(), []string{"help"}, &out, &errOut))
	assert.Contains(t, out.String(), "faultline explore [flags]")
	assert.Contains(t, out.String(), "faultline merge [--out DIR] DIR...")
}

func shardReport(i int, seed int64, runs ...explore.Record) *explore.Report {
	offered := explore.Offered{Windows: []explore.OfferedWindow{
		{Name: protocol.RelayAfterConfirm, Role: protocol.Relay, By: []string{"relay"}},
		{Name: protocol.RelayBeforeRenew, Role: protocol.Relay, By: []string{"relay"}},
		{Name: protocol.ProducerAfterCommit, Role: protocol.Producer},
	}, Links: []string{"relay-1.pg"}}
	r := &explore.Report{Schema: explore.Schema, Target: "reference", Variant: "no-fencing", Seed: seed, Hits: 3,
		Shard: explore.Shard{Index: i, Count: 2}, PlanTotal: 4, Planned: 2, Offered: offered,
		Runs: runs, Findings: []explore.Finding{}, Exhausted: true}
	r.Coverage = explore.ComputeCoverage(offered, runs)
	return r
}

func TestMergeCommand(t *testing.T) {
	pause, err := explore.SpecOf(fault.Crash{Process: "relay-1", Point: protocol.RelayAfterConfirm, Action: "pause", Hit: 1, Hold: 5 * time.Second})
	require.NoError(t, err)
	renew, err := explore.SpecOf(fault.Crash{Process: "relay-1", Point: protocol.RelayBeforeRenew, Action: "kill", Hit: 1})
	require.NoError(t, err)
	a := shardReport(1, 7, explore.Record{Index: 0, Faults: []explore.Spec{pause}, Hit: []bool{true}, Verdict: "pass", Describe: "pause"},
		explore.Record{Index: 2, Faults: []explore.Spec{renew}, Hit: []bool{false}, Verdict: "fail", Describe: "kill"})
	b := shardReport(2, 7, explore.Record{Index: 1, Faults: []explore.Spec{pause}, Hit: []bool{true}, Verdict: "pass", Describe: "pause"},
		explore.Record{Index: 3, Faults: []explore.Spec{renew}, Hit: []bool{false}, Verdict: "fail", Describe: "kill"})
	root := t.TempDir()
	for name, r := range map[string]*explore.Report{"shard-1": a, "shard-2": b} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, name), 0o755))
		require.NoError(t, explore.WriteReport(filepath.Join(root, name, explore.ReportFile), r))
	}
	out := filepath.Join(root, "merged")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"merge", "--out", out, filepath.Join(root, "shard-1"), filepath.Join(root, "shard-2", explore.ReportFile)}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	assert.FileExists(t, filepath.Join(out, explore.ReportFile))
	assert.FileExists(t, filepath.Join(out, explore.PageFile))
	merged, err := explore.LoadReport(filepath.Join(out, explore.ReportFile))
	require.NoError(t, err)
	assert.Len(t, merged.Runs, 4)
	assert.Equal(t, []explore.Shard{{Index: 1, Count: 2}, {Index: 2, Count: 2}}, merged.Shards)
	s := stdout.String()
	assert.Contains(t, s, "shard merged 1/2, 2/2: 4 runs of 4 planned")
	assert.Contains(t, s, "windows opened: 1 of 2 offered")
	assert.Regexp(t, `relay\.after-confirm\s+relay\s+relay\s+2\s+2\s+0\s+-\s+opened`, s)
	assert.Regexp(t, `relay\.before-renew\s+relay\s+relay\s+2\s+0\s+2\s+-\s+unexplored \(never opened\)`, s)
	assert.Regexp(t, `producer\.after-commit\s+producer\s+-\s+0\s+0\s+0\s+-\s+not offered`, s)
	assert.Contains(t, s, "no violation found")

	// Shards of different explorations do not merge.
	c := shardReport(2, 8)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "other"), 0o755))
	require.NoError(t, explore.WriteReport(filepath.Join(root, "other", explore.ReportFile), c))
	stderr.Reset()
	code = run(context.Background(), []string{"merge", "--out", filepath.Join(root, "m2"), filepath.Join(root, "shard-1"), filepath.Join(root, "other")}, &stdout, &stderr)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr.String(), "seed 8, not 7")
}

// run --schedule takes the file's seed and variant unless the command line
// gives them, and names the run after the violation the file fails with.
func TestScheduleScenarioDefaults(t *testing.T) {
	path := writeSchedule(t, "reference")
	s, err := explore.LoadSchedule(path)
	require.NoError(t, err)
	s.Violation = "stale-write"
	require.NoError(t, explore.WriteSchedule(path, s))
	tg, err := loadTarget("")
	require.NoError(t, err)
	for _, tc := range []struct {
		args        []string
		seed        int64
		variant     string
		wantSeed    int64
		wantVariant string
	}{
		{nil, 777, "", 3, "no-fencing"},
		{[]string{"--seed", "9"}, 9, "", 9, "no-fencing"},
		{[]string{"--variant", "no-lease"}, 777, "no-lease", 3, "no-lease"},
	} {
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		var c common
		c.flags(fs)
		variant := fs.String("variant", "", "")
		require.NoError(t, fs.Parse(tc.args))
		c.target, c.seed = tg, tc.seed
		sc, kind, err := scheduleScenario(path, fs, &c, variant)
		require.NoError(t, err)
		assert.Equal(t, "schedule-stale-write", sc.Name)
		assert.Equal(t, "stale-write", kind)
		assert.Equal(t, s.Faults, sc.Schedule(c.seed))
		assert.Equal(t, tc.wantSeed, c.seed, "%v", tc.args)
		assert.Equal(t, tc.wantVariant, *variant, "%v", tc.args)
	}
}

// --dry-run prints the plan and starts nothing: each window that opens only
// around something else comes with it (the renewal window with its setting),
// and the outage the relays ride out says that no row may end Failed.
func TestExploreDryRun(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"explore", "--dry-run", "--seed", "4", "--hits", "1"}, &out, &errOut)
	require.Equal(t, exitOK, code, errOut.String())
	s := out.String()
	assert.Regexp(t, `(?m)^#0 `, s)
	assert.Regexp(t, `relay\.before-renew kill@1, armed after 10 orders \+ toxic relay-1\.amqp: latency .*\[set lease-renewal=400ms\]`, s)
	assert.Regexp(t, `relay\.before-retry pause@1, held 5s, armed after 10 orders \+ unbind queue`, s)
	assert.Regexp(t, `unbind queue: binding every routing key removed, restored after 1\.5s, after 20 orders \[none may end Failed\]`, s)
	assert.Contains(t, s, "black-box relay-2: at the commit of relay-2's write #1 (outbox write to Processing)")
	assert.Empty(t, errOut.String(), "no infrastructure, no progress")
}

func TestRunRepeatCounts(t *testing.T) {
	scs := repeated([]runner.Scenario{{Name: "schedule-lost"}}, 3)
	require.Len(t, scs, 3)
	assert.Equal(t, "schedule-lost.2", scs[1].Name)
	lost := result.Invariant{Name: "no-loss", Violations: []result.Violation{{Kind: "lost"}, {Kind: "lost"}}}
	results := []result.Scenario{
		{Name: "schedule-lost.1", Verdict: result.Fail, Invariants: []result.Invariant{lost}},
		{Name: "schedule-lost.2", Verdict: result.Pass},
		{Name: "schedule-lost.3", Verdict: result.Fail, Invariants: []result.Invariant{lost}},
	}
	var out bytes.Buffer
	printRepeats(&out, results, 3)
	assert.Equal(t, "schedule-lost: failed 2 of 3 runs (lost in 2)\n", out.String())
}

// The summary names the runs that ended without a verdict, never counted as
// passed, and says so even when no violation was found.
func TestPrintExploreNamesRunsWithoutAVerdict(t *testing.T) {
	rep := &explore.Report{Target: "reference", Variant: "correct", Runs: []explore.Record{
		{Index: 0, Verdict: result.Pass},
		{Index: 190, Verdict: result.Fail, Reason: "observe: event log line 20: invalid character", Dir: "/tmp/x/runs/explore-0190"},
	}}
	var out bytes.Buffer
	printExplore(&out, rep, "/tmp/x", "")
	s := out.String()
	assert.Contains(t, s, "no violation found")
	assert.Contains(t, s, "1 run(s) ended without a verdict on the pipeline")
	assert.Contains(t, s, "  #190: fail: observe: event log line 20: invalid character\n      /tmp/x/runs/explore-0190\n")
}

// A run on a broken variant is judged by what the variant should show: a
// replayed schedule by the violation it was shrunk for, a catching scenario
// by the variant's kind (every copy under --repeat); a scenario the target
// does not expect to catch it, and the correct pipeline, by nothing.
func TestVariantCatches(t *testing.T) {
	tg, err := loadTarget("")
	require.NoError(t, err)
	catching := runner.Scenario{Name: "relay-pause-past-lease"}
	other := runner.Scenario{Name: "poison-message"}
	sched := runner.Scenario{Name: "schedule-lost"}
	for _, tc := range []struct {
		name      string
		variant   string
		picked    []runner.Scenario
		scheduled map[string]string
		repeat    int
		want      []gate.Catch
	}{
		{"correct pipeline", "correct", []runner.Scenario{catching}, nil, 1, nil},
		{"no variant", "", []runner.Scenario{catching}, nil, 1, nil},
		{"unknown variant", "no-such", []runner.Scenario{catching}, nil, 1, nil},
		{"catching and other scenario", "no-fencing", []runner.Scenario{catching, other}, nil, 1,
			[]gate.Catch{{Variant: "no-fencing", Scenario: "relay-pause-past-lease", Expect: "stale-write", Guard: "claim id in every status write"}}},
		{"schedule keeps its own kind", "no-fencing", []runner.Scenario{sched}, map[string]string{"schedule-lost": "lost"}, 1,
			[]gate.Catch{{Variant: "no-fencing", Scenario: "schedule-lost", Expect: "lost", Guard: "claim id in every status write"}}},
		{"schedule without a kind takes the variant's", "no-lease", []runner.Scenario{{Name: "schedule"}}, map[string]string{"schedule": ""}, 1,
			[]gate.Catch{{Variant: "no-lease", Scenario: "schedule", Expect: "stuck-row", Guard: "lease expiry"}}},
		{"every copy of a repeat", "no-fencing", []runner.Scenario{catching}, nil, 2,
			[]gate.Catch{
				{Variant: "no-fencing", Scenario: "relay-pause-past-lease.1", Expect: "stale-write", Guard: "claim id in every status write"},
				{Variant: "no-fencing", Scenario: "relay-pause-past-lease.2", Expect: "stale-write", Guard: "claim id in every status write"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, variantCatches(tg, tc.variant, tc.picked, tc.scheduled, tc.repeat))
		})
	}
}
