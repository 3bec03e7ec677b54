package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/explore"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/version"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/scenarios"
)

// Every help goes to stdout with exit 0: the global one, and each
// command's, asked for as `help CMD`, `CMD --help` or `CMD -h`.
func TestHelpGoesToStdout(t *testing.T) {
	for _, c := range commands() {
		if c.name == "help" {
			continue
		}
		for _, args := range [][]string{{"help", c.name}, {c.name, "--help"}, {c.name, "-h"}} {
			var out, errOut bytes.Buffer
			assert.Equal(t, exitOK, run(context.Background(), args, &out, &errOut), "%v", args)
			assert.Empty(t, errOut.String(), "%v", args)
			assert.True(t, strings.HasPrefix(out.String(), strings.TrimSpace("usage: faultline "+c.name+" "+c.synopsis)+"\n"), "%v: %q", args, out.String())
			assert.Contains(t, out.String(), c.summary, "%v", args)
		}
	}
	var gate bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"help", "gate"}, &gate, &bytes.Buffer{}))
	assert.Contains(t, gate.String(), "-scenarios string", "the command's flags")
	assert.NotContains(t, gate.String(), "faultline list [--target", "a command's help, not the global one")

	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"help", "help"}} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitOK, run(context.Background(), args, &out, &errOut), "%v", args)
		assert.Empty(t, errOut.String(), "%v", args)
		for _, c := range commands() {
			assert.Contains(t, out.String(), "  faultline "+c.name, "%v", args)
		}
		assert.Contains(t, out.String(), "3 no verdict", "%v", args)
	}
}

// A bad flag, a bad value or an unknown command is said in one line on
// stderr, with one line of hint; nothing on stdout; exit 2.
func TestBadUsageIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		line, hint string
	}{
		{[]string{"gate", "--bogus"}, "faultline: gate: flag provided but not defined: -bogus", "run 'faultline help gate' for its usage"},
		{[]string{"list", "--bogus"}, "faultline: list: flag provided but not defined: -bogus", "run 'faultline help list' for its usage"},
		{[]string{"run", "broker-nack", "--seed", "x"}, `faultline: run: invalid value "x" for flag -seed: parse error`, "run 'faultline help run' for its usage"},
		{[]string{"gate", "--seeds", "0"}, "faultline: --seeds must be between 1 and 100, got 0", "run 'faultline help gate' for its usage"},
		{[]string{"explode"}, `faultline: unknown command "explode"`, "run 'faultline help' for the commands"},
		{[]string{"help", "explode"}, `faultline: unknown command "explode"`, "run 'faultline help' for the commands"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, run(context.Background(), tc.args, &out, &errOut), "%v", tc.args)
		assert.Empty(t, out.String(), "%v", tc.args)
		assert.Equal(t, tc.line+"\n"+tc.hint+"\n", errOut.String(), "%v", tc.args)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitOK, run(context.Background(), args, &out, &errOut), "%v", args)
		assert.Equal(t, "faultline "+version.String()+"\n", out.String(), "%v", args)
		assert.Empty(t, errOut.String())
	}
}

// The exit statuses of the contract: 0 held, 1 a violation, 2 bad usage or
// a bad target file, 3 no verdict, 130 interrupted; whatever the command.
func TestExitStatuses(t *testing.T) {
	unjudged := &explore.Report{Runs: []explore.Record{{Index: 0, Verdict: result.NotRun}}}
	for _, tc := range []struct {
		name   string
		err    error
		status int
		said   string
	}{
		{"held", nil, exitOK, ""},
		{"help", errHelp, exitOK, ""},
		{"violation", errViolation, exitViolation, ""},
		{"a gate with a fail", verdictErr(result.Run{Verdict: result.Fail}), exitViolation, ""},
		{"a gate with a variant not caught", verdictErr(result.Run{Verdict: result.Pass, Pass: false}), exitViolation, ""},
		{"bad usage", usagef("--parallel must be at least 1"), exitUsage, "--parallel must be at least 1"},
		{"bad target file", targetErrorf("target file x.yaml has 1 problem(s)"), exitUsage, "x.yaml has 1 problem(s)"},
		{"check-target's listed problems", errBadTarget, exitUsage, ""},
		{"indeterminate runs", verdictErr(result.Run{Verdict: result.Indeterminate}), exitNoVerdict, ""},
		{"an exploration with runs unjudged", exploreVerdict(unjudged), exitNoVerdict, "ended without a verdict"},
		{"an infrastructure error", fmt.Errorf("start postgres: %w", errors.New("initdb failed")), exitNoVerdict, "start postgres: initdb failed"},
		{"interrupted", verdictErr(result.Run{Interrupted: true}), exitInterrupted, "interrupted"},
		{"a start cut short", fmt.Errorf("%w: %w", errInterrupted, errors.New("start postgres: context canceled")), exitInterrupted, "context canceled"},
	} {
		var errOut bytes.Buffer
		assert.Equal(t, tc.status, exitStatus(tc.err, "gate", &errOut), tc.name)
		if tc.said != "" {
			assert.Contains(t, errOut.String(), tc.said, tc.name)
		}
		if tc.status == exitOK || tc.status == exitViolation {
			assert.Empty(t, errOut.String(), "%s: the report says it", tc.name)
		}
	}
	assert.Equal(t, 3, exitNoVerdict)
	assert.Equal(t, 130, exitInterrupted)
}

// list --format json holds what the text listing shows: every scenario of
// every profile, whether it runs on the target (and why not), the windows
// and who offers them, the variants.
func TestListJSON(t *testing.T) {
	fixture := filepath.Join("..", "..", "scenarios", "testdata", "no-retry-budget", "faultline.yaml")
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"list", "--format", "json", "--target", fixture}, &out, &errOut), errOut.String())
	var got listing
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&got))
	assert.Equal(t, listSchema, got.Schema)

	var text bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"list", "--target", fixture}, &text, &errOut))
	assert.Contains(t, text.String(), "target "+got.Target.Name+" ("+got.Target.Path+")")
	tg, err := loadTarget(fixture)
	require.NoError(t, err)
	assert.Equal(t, tg.RelayModel(), got.Target.RelayModel)

	assert.Len(t, got.Windows, len(protocol.Windows()))
	byWindow := map[string]listWindow{}
	for _, w := range got.Windows {
		byWindow[w.Name] = w
	}
	assert.Equal(t, []string{"relay"}, byWindow[protocol.RelayAfterConfirm].OfferedBy)
	assert.Len(t, got.OutsideWindows, len(protocol.OutsideWindows()))

	assert.Len(t, got.Scenarios, len(scenarios.All())+len(scenarios.Production()))
	by := map[string]listScenario{}
	for _, s := range got.Scenarios {
		by[s.Name] = s
		assert.Contains(t, text.String(), s.Name, "every scenario of the JSON is in the text")
		assert.Contains(t, []string{"offered", "not-run"}, s.Status, s.Name)
		assert.Equal(t, s.Status == "not-run", s.Reason != "", "%s: a reason exactly when not run", s.Name)
	}
	assert.Equal(t, workload.Burst, by["burst-producer-crash-after-commit"].Traffic, "a scenario's traffic profile")
	assert.Equal(t, listScenario{Name: "unroutable-budget-exhausted", Profile: scenarios.ProfileDefault, Traffic: workload.Paced, Window: protocol.QueueUnroutable,
		Description: by["unroutable-budget-exhausted"].Description, AlsoChecks: by["unroutable-budget-exhausted"].AlsoChecks, Needs: by["unroutable-budget-exhausted"].Needs,
		Settings: []listSetting{{Name: "retry-budget", Value: "3", Required: true}}, Relay: by["unroutable-budget-exhausted"].Relay,
		Status: "not-run", Reason: "the target offers no retry-budget"}, by["unroutable-budget-exhausted"])
	assert.Equal(t, "offered", by["broker-nack"].Status)
	assert.Contains(t, by["broker-nack"].Settings, listSetting{Name: "retry-budget", Value: "40", Offered: false})
	assert.Contains(t, by["blackbox-unroutable-then-routable"].How, "bindings gone for timing.rides_out (1.5s)")
	assert.Equal(t, scenarios.ProfileProduction, by["cluster-relay-node-lost"].Profile)
	assert.Equal(t, []string{"none-gave-up"}, by["unroutable-short-outage"].AlsoChecks)
	assert.NotNil(t, by["amqp-reset-before-confirm"].AlsoChecks, "lists are [] not null")

	require.Len(t, got.Variants, len(tg.Variants))
	for i, v := range tg.Variants {
		assert.Equal(t, listVariant{Name: v.Name, Guard: v.Guard, Expect: v.Expect, CaughtBy: v.CaughtBy}, got.Variants[i])
	}
	assert.NotNil(t, got.KnownFindings)
}

// docs/cli.md has a section per command naming each of its flags, and
// the exit statuses as the code has them.
func TestDocsNameEveryFlag(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	require.NoError(t, err)
	doc := string(data)
	for _, c := range commands() {
		if c.name == "help" {
			continue
		}
		start := strings.Index(doc, "\n### faultline "+c.name+"\n")
		require.GreaterOrEqual(t, start, 0, "no section for %s", c.name)
		section := doc[start+1:]
		if end := strings.Index(section[1:], "\n### "); end >= 0 {
			section = section[:end+1]
		}
		var help bytes.Buffer
		require.Equal(t, exitOK, run(context.Background(), []string{c.name, "--help"}, &help, &bytes.Buffer{}))
		for _, line := range strings.Split(help.String(), "\n") {
			if !strings.HasPrefix(line, "  -") {
				continue
			}
			name := strings.Fields(line)[0][1:]
			assert.Contains(t, section, "`--"+name, "docs/cli.md: faultline %s --%s", c.name, name)
		}
	}
	for status, meaning := range map[int]string{exitOK: "everything held", exitViolation: "a violation", exitUsage: "bad usage", exitNoVerdict: "no verdict", exitInterrupted: "interrupted"} {
		assert.Regexp(t, fmt.Sprintf(`\n\| %d \| [^\n]*%s`, status, meaning), doc)
	}
}
