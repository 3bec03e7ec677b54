package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain gives the commands the reference pipeline as their default
// target: go test runs them in cmd/faultline, where referenceTarget, a
// path relative to the source tree's root, is not. A test sets
// FAULTLINE_TARGET itself to see the default.
func TestMain(m *testing.M) {
	// Started again as the CLI by a test that kills it (killed_test.go).
	if os.Getenv(asCLI) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv("FAULTLINE_TARGET") == "" {
		ref, err := filepath.Abs(filepath.Join("..", "..", referenceTarget))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := os.Setenv("FAULTLINE_TARGET", ref); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// Without --target and FAULTLINE_TARGET, the reference pipeline is the
// target anywhere in faultline's source tree, and outside it (with no
// faultline.yaml on the way up) every command says where it looked; bench
// too, which never reads FAULTLINE_TARGET nor a team's file.
func TestDefaultTargetIsTheReferenceOnlyInTheSourceTree(t *testing.T) {
	t.Setenv("FAULTLINE_TARGET", "")
	for _, dir := range []string{filepath.Join("..", ".."), "."} {
		t.Run(dir, func(t *testing.T) {
			t.Chdir(dir)
			tg, err := loadTarget("")
			require.NoError(t, err)
			assert.Equal(t, "reference", tg.Name)
		})
	}

	outside := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(outside, ".git"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, targetFileName), []byte("a team's"), 0o644))
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"list"}, {"run", "broker-nack"}, {"gate"}, {"explore"}, {"check-target"}} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, run(context.Background(), args, &out, &errOut), "%v", args)
		assert.Contains(t, errOut.String(), "no target file: --target not given, FAULTLINE_TARGET not set, no faultline.yaml (looked in ", "%v", args)
		assert.Contains(t, errOut.String(), "run 'faultline init' to write one, or pass --target PATH", "%v", args)
	}
	t.Chdir(outside)
	var out, errOut bytes.Buffer
	assert.Equal(t, exitUsage, run(context.Background(), []string{"bench"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "no --target given, and not inside faultline's source tree", "bench does not take a team's faultline.yaml")
	assert.Contains(t, errOut.String(), "pass --target PATH to the reference pipeline's target file")
}

// --target is relative to the current folder, wherever that is.
func TestTargetRelativeToTheCurrentFolder(t *testing.T) {
	ref, err := filepath.Abs(filepath.Join("..", "..", "examples", "node-outbox"))
	require.NoError(t, err)
	t.Chdir(filepath.Dir(ref))
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"list", "--target", filepath.Join("node-outbox", "faultline.yaml")}, &out, &errOut), errOut.String())
	assert.Contains(t, out.String(), "target node-outbox")
}

// knownTarget is a target file with one known finding of scenario.
func knownTarget(t *testing.T, scenario string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "faultline.yaml")
	data := `faultline: 1
name: known
databases: [orders]
schema: {created_by: processes}
processes:
  - {name: order, role: producer, command: [./order], ready: {tcp: "{{http_addr}}"}}
workload:
  create: {path: /orders}
topology: {exchange: e, queue: q, routing_keys: [k]}
contract:
  effects: {database: orders, sql: SELECT 1}
known_findings:
  - scenario: ` + scenario + `
    violations: [lost]
    cause: the library registers no basic.return listener
`
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
	return path
}

// list --target shows the file's known findings; one naming a scenario
// the catalogue does not have is refused, by list and by gate before
// anything starts.
func TestKnownFindingsInListAndGate(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"list", "--target", knownTarget(t, "blackbox-unroutable-then-routable")}, &out, &errOut), errOut.String())
	assert.Regexp(t, `\nKNOWN FINDINGS +VIOLATIONS +CAUSE .*\nblackbox-unroutable-then-routable +lost +the library registers no basic.return listener\n`, out.String())

	bad := knownTarget(t, "blackbox-unroutable")
	for _, args := range [][]string{{"list", "--target", bad}, {"gate", "--target", bad, "--out", t.TempDir()}} {
		out.Reset()
		errOut.Reset()
		assert.Equal(t, exitUsage, run(context.Background(), args, &out, &errOut), "%v", args)
		assert.Contains(t, errOut.String(), `faultline.yaml:13: known_findings[blackbox-unroutable].scenario: unknown scenario "blackbox-unroutable" (did you mean blackbox-unroutable-then-routable?)`, "%v", args)
	}
}
