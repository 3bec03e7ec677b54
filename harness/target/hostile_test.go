package target

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The target file is input from outside: each hostile file below must be
// refused with a problem naming its line (where it has one), at once. A
// regression must fail the test, not hang it: every load runs under a
// deadline.

const loadDeadline = 10 * time.Second

// parseWithin parses data as the file at path, failing the test if that
// takes longer than loadDeadline.
func parseWithin(t *testing.T, path string, data []byte) (*Target, error) {
	t.Helper()
	type result struct {
		tg  *Target
		err error
	}
	done := make(chan result, 1)
	go func() {
		tg, err := Parse(path, data)
		done <- result{tg, err}
	}()
	select {
	case r := <-done:
		return r.tg, r.err
	case <-time.After(loadDeadline):
		t.Fatalf("parse %s: still loading after %s", path, loadDeadline)
		return nil, nil
	}
}

// oneProblem wants err to be *Errors holding exactly one problem, and
// returns it.
func oneProblem(t *testing.T, err error) Problem {
	t.Helper()
	require.Error(t, err)
	var errs *Errors
	require.True(t, errors.As(err, &errs), "want *Errors, got %T: %v", err, err)
	require.Len(t, *errs, 1, "want one problem:\n%v", err)
	return (*errs)[0]
}

func TestHostileFiles(t *testing.T) {
	tests := []struct {
		file    string
		line    int
		message string
	}{
		{"testdata/laughs.yaml", 12, "takes the file past 100000 YAML nodes"},
		{"testdata/merges.yaml", 12, "takes the file past 100000 YAML nodes"},
		{"testdata/cycle.yaml", 11, "alias *p refers to its own anchor"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(tt.file)
			require.NoError(t, err)
			_, err = parseWithin(t, tt.file, data)
			p := oneProblem(t, err)
			assert.Equal(t, tt.line, p.Line, "%v", p)
			assert.Contains(t, p.Message, tt.message)
			assert.Contains(t, err.Error(), fmt.Sprintf("%s:%d: ", tt.file, tt.line))
		})
	}
}

// Anchors and aliases that repeat a part (what teams share between
// processes) stay within the bound: TestAnchorsAndMergeKeys loads them.

func TestFileSize(t *testing.T) {
	big := []byte(minimal + "# " + strings.Repeat("x", MaxFileSize) + "\n")
	_, err := parseWithin(t, "big.yaml", big)
	p := oneProblem(t, err)
	assert.Contains(t, p.Message, "over 1048576 bytes")

	// Load reads no more than one byte past the bound: /dev/zero is
	// endless.
	done := make(chan error, 1)
	go func() {
		_, err := Load("/dev/zero")
		done <- err
	}()
	select {
	case err := <-done:
		p := oneProblem(t, err)
		assert.Contains(t, p.Message, "over 1048576 bytes")
	case <-time.After(loadDeadline):
		t.Fatalf("Load(/dev/zero) still reading after %s", loadDeadline)
	}
}

func TestHostileFields(t *testing.T) {
	tests := []struct {
		name    string
		old     string // replaced in minimal by new
		new     string
		line    int
		field   string
		message string
	}{
		{"name climbs out of --out", "name: minimal", "name: ../../x", 2, "name", `"../../x" is not a pipeline name`},
		{"name is a path", "name: minimal", "name: a/b", 2, "name", "is not a pipeline name"},
		{"name with ..", "name: minimal", "name: a..b", 2, "name", "no ..)"},
		{"name too long", "name: minimal", "name: " + strings.Repeat("a", 64), 2, "name", "at most 63"},
		{"instances out of memory", "    role: producer", "    role: producer\n    instances: 100000000", 9, "processes[0].instances", "100000000 instances: at most 16"},
		{"instances past int", "    role: producer", "    role: producer\n    instances: 99999999999999999999999", 9, "processes[0].instances", "want a whole number"},
		{"instances in all", "  - name: order\n", strings.Repeat("  - {name: r, role: relay, instances: 16, command: [r], ready: {tcp: '{{http_addr}}'}}\n", 1) +
			"  - {name: s, role: consumer, instances: 16, command: [s], ready: {tcp: '{{http_addr}}'}}\n  - name: order\n", 6, "processes", "33 instances in all: at most 32"},
		{"too many processes", "  - name: order\n", processes(16) + "  - name: order\n", 6, "processes", "17 processes: at most 16"},
		{"too many databases", "databases: [orders, inventory]", "databases: [orders, inventory" + databases(15) + "]", 3, "databases", "17 databases: at most 16"},
		{"too many steps", "  create: {path: /orders}", "  create: {path: /orders}\n  steps: [" + strings.Repeat("{path: /x}, ", 33) + "]", 13, "workload.steps", "33 steps: at most 32"},
		{"too many routing keys", "[order.created]", "[" + strings.Repeat("k, ", 257) + "]", 16, "topology.routing_keys", "257 items: at most 256"},
		{"too many env vars", "    role: producer", "    role: producer\n    env: {" + envVars(257) + "}", 9, "processes[0].env", "257 keys: at most 256"},
		{"build timeout a century", "topology:", "build: {command: [make], timeout: 876000h}\ntopology:", 13, "build.timeout", `bad duration "876000h": at most 1h0m0s`},
		{"ready timeout too long", `ready: {tcp: "{{http_addr}}"}`, `ready: {tcp: "{{http_addr}}", timeout: 2h}`, 10, "processes[0].ready.timeout", "at most 1h0m0s"},
		{"lease too long", "topology:", "timing: {lease: 48h}\ntopology:", 13, "timing.lease", "at most 1h0m0s"},
		{"too many known findings", "topology:", "known_findings: [" + strings.Repeat("{scenario: a, violations: [lost], cause: c}, ", 257) + "]\ntopology:", 13, "known_findings", "257 items: at most 256"},
		{"too many kinds in a known finding", "topology:", "known_findings: [{scenario: a, violations: [" + strings.Repeat("lost, ", 257) + "], cause: c}]\ntopology:", 13, "known_findings[0].violations", "257 items: at most 256"},
		{"known finding's cause a novel", "topology:", "known_findings: [{scenario: a, violations: [lost], cause: " + strings.Repeat("x", 2001) + "}]\ntopology:", 13, "known_findings[0].cause", "2001 bytes: at most 2000"},
		{"known finding's cause rewrites the terminal", "topology:", "known_findings: [{scenario: a, violations: [lost], cause: \"red \\e[31m\"}]\ntopology:", 13, "known_findings[0].cause", "control character U+001B at byte 4"},
		{"known finding's scenario a path", "topology:", "known_findings: [{scenario: ../../etc, violations: [lost], cause: c}]\ntopology:", 13, "known_findings[0].scenario", "is not a scenario name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, minimal, tt.old)
			data := strings.Replace(minimal, tt.old, tt.new, 1)
			_, err := parseWithin(t, "faultline.yaml", []byte(data))
			p := oneProblem(t, err)
			assert.Equal(t, tt.line, p.Line, "%v", p)
			assert.Equal(t, tt.field, p.Field, "%v", p)
			assert.Contains(t, p.Message, tt.message)
		})
	}
}

func processes(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {name: p%d, role: producer, command: [p], ready: {tcp: '{{http_addr}}'}}\n", i)
	}
	return b.String()
}

func databases(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, ", db%d", i)
	}
	return b.String()
}

func envVars(n int) string {
	vars := make([]string, n)
	for i := range vars {
		vars[i] = fmt.Sprintf("V%d: x", i)
	}
	return strings.Join(vars, ", ")
}

// Schema files stay inside the target file's folder, symlinks resolved.
func TestSchemaSQLStaysInside(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "team")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "schema"), 0o755))
	outside := filepath.Join(root, "secret.sql")
	require.NoError(t, os.WriteFile(outside, []byte("DROP TABLE x;"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "schema", "orders.sql"), []byte("CREATE TABLE t ();"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "schema", "link.sql")))
	require.NoError(t, os.Symlink(filepath.Join(dir, "schema", "orders.sql"), filepath.Join(dir, "inner.sql")))

	tests := []struct {
		name, file string
		message    string // "" if the file is fine
	}{
		{"relative, inside", "schema/orders.sql", ""},
		{"absolute, inside", filepath.Join(dir, "schema", "orders.sql"), ""},
		{"symlink to a file inside", "inner.sql", ""},
		{"../ escape", "../secret.sql", "outside the target file's folder"},
		{"../ escape through a subfolder", "schema/../../secret.sql", "outside the target file's folder"},
		{"absolute, outside", outside, "outside the target file's folder"},
		{"symlink out", "schema/link.sql", "outside the target file's folder"},
		{"system file", "/etc/passwd", "outside the target file's folder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := strings.Replace(minimal, "databases: [orders, inventory]", "databases: [orders]", 1)
			data = strings.Replace(data, "  created_by: processes", fmt.Sprintf("  sql: {orders: %q}", tt.file), 1)
			data += "contract:\n  effects: {database: orders, sql: SELECT 1}\n"
			tg, err := parseWithin(t, filepath.Join(dir, "faultline.yaml"), []byte(data))
			if tt.message == "" {
				require.NoError(t, err)
				assert.Contains(t, tg.Schema.SQL["orders"], dir)
				return
			}
			p := oneProblem(t, err)
			assert.Equal(t, 5, p.Line, "%v", p)
			assert.Equal(t, "schema.sql.orders", p.Field)
			assert.Contains(t, p.Message, tt.message)
		})
	}
}
