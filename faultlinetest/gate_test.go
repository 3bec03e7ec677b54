package faultlinetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/scenarios"
)

// reference is the reference pipeline's target file, from this package's
// folder.
const reference = "../system/faultline.yaml"

func TestNewConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     string
		opts    []Option
		wantErr string
		check   func(t *testing.T, c config)
	}{
		{name: "defaults are the gate's", check: func(t *testing.T, c config) {
			assert.Equal(t, 2, c.retries)
			assert.Equal(t, 8, c.parallel)
			assert.Empty(t, c.infra)
			assert.Len(t, c.picked, len(scenarios.All()))
		}},
		{name: "FAULTLINE_SEED is the default seed", env: "42", check: func(t *testing.T, c config) {
			assert.Equal(t, int64(42), c.seed)
		}},
		{name: "Seed wins over FAULTLINE_SEED", env: "42", opts: []Option{Seed(7)}, check: func(t *testing.T, c config) {
			assert.Equal(t, int64(7), c.seed)
		}},
		{name: "options are applied", opts: []Option{Retries(0), Parallel(3), Infra("local"), Profile(scenarios.ProfileProduction), ReportDir("out")},
			check: func(t *testing.T, c config) {
				assert.Equal(t, 0, c.retries)
				assert.Equal(t, 3, c.parallel)
				assert.Equal(t, "local", c.infra)
				assert.Equal(t, "out", c.reportDir)
				assert.Len(t, c.picked, len(scenarios.Every()))
			}},
		{name: "bad FAULTLINE_SEED", env: "soon", wantErr: `FAULTLINE_SEED="soon": want an integer`},
		{name: "too many retries", opts: []Option{Retries(11)}, wantErr: "Retries must be between 0 and 10, got 11"},
		{name: "no parallel run", opts: []Option{Parallel(0)}, wantErr: "Parallel must be at least 1, got 0"},
		{name: "unknown infra", opts: []Option{Infra("cloud")}, wantErr: `Infra "cloud": want one of`},
		{name: "unknown profile", opts: []Option{Profile("staging")}, wantErr: `Profile: unknown profile "staging"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FAULTLINE_SEED", tc.env)
			c, err := newConfig(tc.opts)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

func TestNewConfigNamesEveryBadOption(t *testing.T) {
	_, err := newConfig([]Option{Retries(-1), Parallel(0)})
	require.Error(t, err)
	assert.Equal(t, 2, len(strings.Split(err.Error(), "\n")), err.Error())
}

func TestJobsOfReference(t *testing.T) {
	tgt, err := loadTarget(reference)
	require.NoError(t, err)
	for _, tc := range []struct {
		name     string
		opts     []Option
		variants []string // expected among the subtests
		absent   []string // left out: caught only by another profile's scenarios
		weights  map[string]int
	}{
		{name: "default profile", variants: []string{"variant/no-lease", "variant/no-inbox", "variant/nack-as-success"},
			absent: []string{"variant/single-node", "variant/classic-queue"}, weights: map[string]int{"variant/no-inbox": 5, "variant/no-lease": 2}},
		{name: "production profile", opts: []Option{Profile(scenarios.ProfileProduction)}, variants: []string{"variant/single-node", "variant/classic-queue"}},
		{name: "weight bounded by Parallel", opts: []Option{Parallel(3)}, variants: []string{"variant/no-inbox"}, weights: map[string]int{"variant/no-inbox": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := newConfig(tc.opts)
			require.NoError(t, err)
			jobs, err := jobsOf(tgt, cfg)
			require.NoError(t, err)
			names := map[string]job{}
			var order []string
			for _, j := range jobs {
				names[j.name] = j
				order = append(order, j.name)
			}
			for _, sc := range cfg.picked {
				j, ok := names[sc.Name]
				if assert.True(t, ok, "no subtest for scenario %s", sc.Name) {
					assert.Equal(t, 1, j.weight, sc.Name)
				}
			}
			for _, v := range tc.variants {
				assert.Contains(t, names, v)
			}
			for _, v := range tc.absent {
				assert.NotContains(t, names, v)
			}
			for name, w := range tc.weights {
				assert.Equal(t, w, names[name].weight, name)
			}
			// The broker's restart goes first, before any variant.
			assert.Equal(t, "broker-restart", order[0])
			firstVariant := slices.IndexFunc(order, func(n string) bool { return strings.HasPrefix(n, VariantPrefix) })
			for _, n := range order[:firstVariant] {
				assert.True(t, names[n].sc.Exclusive, "%s runs before the variants but is not exclusive", n)
			}
		})
	}
}

func TestJobsOfUnknownScenario(t *testing.T) {
	cfg, err := newConfig(nil)
	require.NoError(t, err)
	tgt := &target.Target{Path: "faultline.yaml", Variants: []target.Variant{{Name: "no-lease", Expect: "stuck-row", CaughtBy: []string{"relay-crash-after-clam"}, Line: 9}}}
	_, err = jobsOf(tgt, cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `faultline.yaml:9: variants[no-lease].caught_by: unknown scenario "relay-crash-after-clam"`)
}

// lost is a run that lost n events.
func lost(name string, n int) result.Scenario {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "evt-" + string(rune('a'+i))
	}
	return result.Scenario{Name: name, Variant: "correct", Seed: 5, Verdict: result.Fail, Reason: "invariant broken: no-loss: 3 events lost",
		Counts:     result.Counts{Lost: n},
		Invariants: []result.Invariant{{Name: "no-loss", Detail: "3 events lost", Violations: []result.Violation{{Kind: "lost", EventIDs: ids, Message: "published, never delivered"}}}},
		Dir:        "/tmp/runs/x"}
}

// correctRun is the gate's run of one scenario alone, as gate.Run decides it.
func correctRun(res result.Scenario, known ...target.KnownFinding) result.Run {
	res.Variant = "correct"
	out := result.Run{Scenarios: []result.Scenario{res}}
	out.KnownFindings = gate.MarkKnown(known, out.Scenarios)
	out.Verdict = gate.Decide(out, false)
	return out
}

func TestJudgeCorrect(t *testing.T) {
	finding := target.KnownFinding{Scenario: "broker-nack", Violations: []string{"lost"}, Cause: "the library marks a nack as sent"}
	for _, tc := range []struct {
		name string
		out  result.Run
		want outcome
		says []string
	}{
		{name: "pass", out: correctRun(result.Scenario{Name: "broker-nack", Seed: 5, Verdict: result.Pass}), want: passed, says: []string{"broker-nack seed 5: pass"}},
		{name: "documented limit", out: correctRun(result.Scenario{Name: "inbox-retention-replay", Verdict: result.Limit, Reason: "documented limit: exactly-once"}),
			want: passed, says: []string{"documented limit: exactly-once"}},
		{name: "violation", out: correctRun(lost("broker-nack", 3)), want: failed,
			says: []string{"broker-nack seed 5: violation: invariant broken: no-loss", "lost (3 events): published, never delivered", "logs and timeline kept in /tmp/runs/x"}},
		{name: "indeterminate through the retries", out: correctRun(result.Scenario{Name: "broker-nack", Seed: 7, Verdict: result.Indeterminate, Attempt: 3, Reason: "fault never happened: nack\nmore"}),
			want: noVerdict, says: []string{"no verdict: broker-nack seed 7 stayed indeterminate through 3 attempts: fault never happened: nack"}},
		{name: "not offered", out: correctRun(result.Scenario{Name: "broker-nack", Verdict: result.NotRun, Reason: "needs the setting queue-max-length"}),
			want: notRun, says: []string{"not run: needs the setting queue-max-length"}},
		{name: "known finding shown", out: correctRun(lost("broker-nack", 3), finding), want: passed, says: []string{"known finding shown (lost)", "seed 5: lost 3"}},
		{name: "known finding no longer shown", out: correctRun(result.Scenario{Name: "broker-nack", Seed: 5, Verdict: result.Pass}, finding), want: failed,
			says: []string{"known finding not reproduced: broker-nack no longer shows lost"}},
		{name: "known finding's scenario not run", out: correctRun(result.Scenario{Name: "broker-nack", Verdict: result.NotRun, Reason: "needs queue-max-length"}, finding), want: failed,
			says: []string{"known finding not reproduced", "needs queue-max-length"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := judgeCorrect(tc.out)
			assert.Equal(t, tc.want, got.outcome, got.message)
			for _, s := range tc.says {
				assert.Contains(t, got.message, s)
			}
		})
	}
}

// variantRun is the gate's run of one variant through its catching
// scenarios, as gate.Run decides it.
func variantRun(runs ...result.Scenario) result.Run {
	var catches []gate.Catch
	for i := range runs {
		runs[i].Variant = "no-lease"
		catches = append(catches, gate.Catch{Variant: "no-lease", Scenario: runs[i].Name, Expect: "stuck-row", Guard: "lease expiry"})
	}
	out := result.Run{Scenarios: runs, Variants: gate.Verdicts(catches, runs)}
	out.Verdict = gate.Decide(out, true)
	return out
}

func stuck(name string) result.Scenario {
	return result.Scenario{Name: name, Verdict: result.Fail, Seed: 5,
		Invariants: []result.Invariant{{Name: "no-stuck-row", Violations: []result.Violation{{Kind: "stuck-row", EventIDs: []string{"e1"}}}}}}
}

func TestJudgeVariant(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  result.Run
		want outcome
		says []string
	}{
		{name: "caught by one of its scenarios", out: variantRun(stuck("relay-crash-after-claim"), result.Scenario{Name: "blackbox-relay-killed-at-claim", Verdict: result.Pass}),
			want: passed, says: []string{"variant no-lease caught with stuck-row by relay-crash-after-claim"}},
		{name: "missed", out: variantRun(lost("relay-crash-after-claim", 2), result.Scenario{Name: "blackbox-relay-killed-at-claim", Seed: 5, Verdict: result.Pass}),
			want: failed, says: []string{"variant no-lease (guard: lease expiry) not caught: expected stuck-row",
				"relay-crash-after-claim seed 5 showed lost", "blackbox-relay-killed-at-claim seed 5 showed no violation (pass)"}},
		{name: "no catching scenario could run", out: variantRun(result.Scenario{Name: "relay-crash-after-claim", Verdict: result.NotRun, Reason: "needs relay.after-claim"}),
			want: failed, says: []string{"relay-crash-after-claim not run: needs relay.after-claim"}},
		{name: "indeterminate through the retries", out: variantRun(result.Scenario{Name: "relay-crash-after-claim", Seed: 6, Verdict: result.Indeterminate, Attempt: 3, Reason: "evidence not seen"}),
			want: noVerdict, says: []string{"no verdict: variant no-lease", "relay-crash-after-claim seed 6 through 3 attempts: evidence not seen"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := judgeVariant(tc.out)
			assert.Equal(t, tc.want, got.outcome, got.message)
			for _, s := range tc.says {
				assert.Contains(t, got.message, s)
			}
		})
	}
}

// childEnv marks this test binary started again by a test below, to run
// TestGateChild's Gate with the flags that test gives it.
const childEnv = "FAULTLINETEST_CHILD_REPORT"

// TestGateChild is Gate in a test binary started by the tests below (the
// os/exec helper-process pattern): it does nothing in a plain run, where
// childEnv is unset. FAULTLINETEST_CHILD_TARGET names its target file.
func TestGateChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		return
	}
	Gate(t, os.Getenv("FAULTLINETEST_CHILD_TARGET"), ReportDir(dir), Infra("external"))
}

// child runs TestGateChild in this test binary with args, on the target
// file targetPath with its report folder report, and returns its output
// and its error (nil: it passed).
func child(t *testing.T, targetPath, report string, args ...string) (string, error) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), exe, append([]string{"-test.v", "-test.count=1"}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"="+report, "FAULTLINETEST_CHILD_TARGET="+targetPath,
		// were anything started, it would be the external provider with
		// nothing to reach: it would fail at once, never start a server.
		"FAULTLINE_PG_URL=", "FAULTLINE_AMQP_URL=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestGateSkipsInShort(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report")
	out, err := child(t, reference, report, "-test.run", "^TestGateChild$", "-test.short")
	require.NoError(t, err, out)
	assert.Contains(t, out, "--- SKIP: TestGateChild")
	assert.Contains(t, out, "skipped in -short")
	assert.NoDirExists(t, report)
}

// A -run that leaves every subtest out starts nothing and writes nothing.
func TestGateRunFilterStartsNothing(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report")
	out, err := child(t, reference, report, "-test.run", "^TestGateChild$/^no-such-scenario$")
	require.NoError(t, err, out)
	assert.Contains(t, out, "--- PASS: TestGateChild")
	assert.Contains(t, out, "no subtest ran (-run left them all out): nothing started")
	assert.NotContains(t, out, "starting PostgreSQL")
	assert.NoDirExists(t, report)
}

func TestGateBadTargetFails(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "faultline.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("faultline: 1\nname: broken\n"), 0o644))
	report := filepath.Join(t.TempDir(), "report")
	out, err := child(t, bad, report, "-test.run", "^TestGateChild$")
	require.Error(t, err, out)
	assert.Contains(t, out, "--- FAIL: TestGateChild")
	assert.Contains(t, out, "faultline: target file "+bad+" has")
	assert.NotContains(t, out, "starting PostgreSQL")
	assert.NoDirExists(t, report)
}
