package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
)

// Every usage error is caught before any infrastructure starts: exit 2 and
// a clear message.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage:"},
		{[]string{"explode"}, `unknown command "explode"`},
		{[]string{"run"}, "name at least one scenario"},
		{[]string{"run", "no-such-scenario"}, `unknown scenario "no-such-scenario"`},
		{[]string{"run", "--variant", "nope", "broker-nack"}, `has no variant "nope"`},
		{[]string{"run", "--target", "testdata/nope.yaml", "broker-nack"}, "no such file"},
		{[]string{"gate", "--target", "testdata/broken.yaml"}, "databse: unknown field"},
		{[]string{"gate", "--target", "testdata/broken.yaml"}, `unknown placeholder "pg_url"`},
		{[]string{"init", "a", "b"}, "init takes one path"},
		{[]string{"check-target", "a.yaml", "b.yaml"}, "check-target takes one target file, got 2"},
		{[]string{"check-target", "--infra", "cloud", "testdata/broken.yaml"}, `--infra "cloud": want one of`},
		{[]string{"check-target", "--target", "a.yaml", "b.yaml"}, "check-target takes its target file once: --target a.yaml and b.yaml"},
		{[]string{"list", "--format", "yaml"}, `--format "yaml": want text or json`},
		{[]string{"gate", "--scenarios", "nope"}, `--scenarios: unknown scenario "nope"`},
		{[]string{"gate", "--scenarios", "cluster-relay-node-lost"}, `--scenarios: scenario "cluster-relay-node-lost" is not of profile default`},
		{[]string{"version", "extra"}, "version takes no arguments"},
		{[]string{"help", "explode"}, `unknown command "explode"`},
		{[]string{"run", "--parallel", "0", "broker-nack"}, "--parallel must be at least 1"},
		{[]string{"run", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"run", "broker-nack", "--seed", "x"}, `invalid value "x" for flag -seed`},
		{[]string{"run", "broker-nack", "nope", "--seed", "3"}, `unknown scenario "nope"`},
		{[]string{"gate", "--seeds", "0"}, "--seeds must be between 1 and 100"},
		{[]string{"gate", "--infra", "cloud"}, `--infra "cloud": want one of`},
		{[]string{"gate", "extra"}, `gate takes no arguments`},
		{[]string{"list", "extra"}, "list takes no arguments"},
		{[]string{"bench", "extra"}, "bench takes no arguments"},
		{[]string{"bench", "--relays", "1,x"}, `--relays: "x" is not a number`},
		{[]string{"bench", "--relays", "0"}, "relay instances must be 1..16"},
		{[]string{"bench", "--reps", "0"}, "repetitions must be at least 1"},
		{[]string{"bench", "--only", "relay,warp"}, `unknown figure "warp"`},
		{[]string{"bench", "--infra", "cloud"}, `--infra "cloud": want one of`},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errOut)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Contains(t, errOut.String(), tc.want, "%v", tc.args)
	}
}

// An error that quotes the external provider's URLs, or just one of their
// passwords, reaches the terminal masked.
func TestErrorsHideThePasswordsOfTheEnvironment(t *testing.T) {
	t.Setenv("FAULTLINE_PG_URL", "postgres://postgres:pg-s3cret@db:5432/postgres")
	t.Setenv("FAULTLINE_AMQP_URL", "amqp://fl:mq-s3cret@mq:5672/")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mq-s3cret"}, `unknown command "xxxxx"`},
		{[]string{"run", "--target", "postgres://postgres:other@db/x", "broker-nack"}, "postgres://postgres:xxxxx@db/x"},
		{[]string{"run", "pg-s3cret"}, `unknown scenario "xxxxx"`},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, run(context.Background(), tc.args, &out, &errOut), "%v", tc.args)
		assert.Contains(t, errOut.String(), tc.want, "%v", tc.args)
		for _, secret := range []string{"pg-s3cret", "mq-s3cret", "other"} {
			assert.NotContains(t, errOut.String(), secret, "%v", tc.args)
		}
	}
}

func TestList(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, exitOK, run(context.Background(), []string{"list"}, &out, &errOut))
	for _, want := range []string{"relay.after-confirm", "consumer.before-commit", "relay-pause-past-lease", "random-chaos", "no-fencing", "inbox-own-transaction", "target reference",
		"FAULT KIND", "commit-order", protocol.OutboxCommitOrder, "WINDOW OPENED FROM OUTSIDE", protocol.ClaimPastLease} {
		assert.Contains(t, out.String(), want)
	}
}

func TestBar(t *testing.T) {
	assert.Equal(t, "[--------------------]   0%", bar(0))
	assert.Equal(t, "[##########----------]  50%", bar(0.5))
	assert.Equal(t, "[####################] 100%", bar(1))
}

// init writes a target file that loads, and refuses to overwrite it.
func TestInitWritesATargetFileThatLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faultline.yaml")
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"init", path}, &out, &errOut), errOut.String())
	_, err := target.Load(path)
	require.NoError(t, err)
	errOut.Reset()
	assert.Equal(t, exitUsage, run(context.Background(), []string{"init", path}, &out, &errOut))
	assert.Contains(t, errOut.String(), "exists (use --force")
}

// check-target on a malformed file lists every problem with its line and
// starts nothing: a bad target file, exit 2.
func TestCheckTargetMalformedFile(t *testing.T) {
	for _, args := range [][]string{{"check-target", "testdata/broken.yaml"}, {"check-target", "--target", "testdata/broken.yaml"}} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, run(context.Background(), args, &out, &errOut), "%v", args)
		for _, want := range []string{"broken.yaml:3: databse: unknown field", `broken.yaml:7: processes[0].command[1]: unknown placeholder "pg_url"`, "broken.yaml:8: processes[0].ready", "nothing started"} {
			assert.Contains(t, out.String(), want, "%v", args)
		}
	}
}

// check-target on a well-formed file that is wrong about its pipeline
// starts the pipeline once, reports each seeded mistake with its own clear
// message, and leaves no process of its own behind.
func TestCheckTargetReportsEveryRuntimeProblem(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and RabbitMQ; not in -short")
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"check-target", "testdata/runtime-broken/faultline.yaml"}, &out, &errOut)
	assert.Equal(t, exitViolation, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	for _, want := range []string{
		`topology.queue: the target never declared queue "inventory.no-such-queue"`,
		"relay-1 never became ready", "flag provided but not defined: -no-such-flag",
		`does not serve crash point "order.after-comit"`,
		"contract.facts", "column o.no_such_column does not exist",
		"observe: observe.effects: table reservations does not exist",
	} {
		assert.Contains(t, out.String(), want)
	}
	assert.Contains(t, out.String(), "ok    inventory (consumer) started and became ready", "what holds is said too")
	assert.Empty(t, children(t), "check-target left processes behind")
}

// children are the processes whose parent is this test process.
func children(t *testing.T) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	require.NoError(t, err)
	var out []string
	me := os.Getpid()
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(data[i+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(me) {
			out = append(out, string(data[:i+1]))
		}
	}
	return out
}

// list --target says, per scenario, which settings it requires and which
// it uses if offered, and how it runs on a file that lacks them: on the
// reference's file without retry-budget, the unroutable scenarios run with
// their outage bounded by timing.rides_out, the one whose point is the
// budget is not run, and broker-nack still requires its queue's shape.
func TestListSaysWhatSettingsAScenarioRestsOn(t *testing.T) {
	fixture := filepath.Join("..", "..", "scenarios", "testdata", "no-retry-budget", "faultline.yaml")
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"list", "--target", fixture}, &out, &errOut), errOut.String())
	lines := linesByFirstWord(out.String())
	for _, tc := range []struct{ scenario, want string }{
		{"blackbox-unroutable-then-routable", "retry-budget=30 if offered (not offered): no retry-budget setting: bindings gone for timing.rides_out (1.5s), none may end Failed"},
		{"unroutable-short-outage", "retry-budget=8 if offered (not offered): no retry-budget setting: bindings gone for timing.rides_out (1.5s)"},
		{"unroutable-budget-exhausted", "retry-budget=3 required (NOT offered): not run: the target offers no retry-budget"},
		{"broker-nack", "consumer-channels=1 required (offered), queue-max-length=5 required (offered), retry-budget=40 if offered (not offered)"},
		{"relay-renewal-pause-past-lease", "lease-renewal=400ms required (offered)"},
	} {
		assert.Contains(t, lines[tc.scenario], tc.want, tc.scenario)
	}
	assert.Contains(t, lines["blackbox-unroutable-then-routable"], "outbox audit trail")
	assert.Regexp(t, `^unroutable-short-outage +queue\.unroutable +paced +none-gave-up `, lines["unroutable-short-outage"], "its window by name, its traffic, and the invariant it asks for")
	assert.Regexp(t, `^aggregate-order +aggregate\.overtaken +paced +per-aggregate-order `, lines["aggregate-order"])
}
