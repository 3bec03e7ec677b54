package runner

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/supervisor"
)

// secretInfra is an infrastructure known only by its password: the runner
// asks a kept run for nothing else. Any other method panics (nil Infra).
type secretInfra struct {
	infra.Infra
	pass string
}

func (s secretInfra) Secrets() []string { return []string{s.pass} }

// TestKeptRunHoldsNoPassword starts a process the way a run does, through
// the run's supervisor, with the URLs in its command line and environment;
// the process echoes them, as a target may; the result quotes a URL in an
// error, as pgx and amqp errors can. The kept folder and the result must
// not hold the password anywhere, while what it masked stays readable.
func TestKeptRunHoldsNoPassword(t *testing.T) {
	const pass = "3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d" // as the local provider makes them
	pgURL := "postgres://postgres:" + pass + "@127.0.0.1:40001/orders?sslmode=disable"
	amqpURL := "amqp://faultline-0a1b2c3d4e5f:" + pass + "@127.0.0.1:40002/run_1"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	dir := filepath.Join(t.TempDir(), "run")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	r := &run{sh: &Shared{Infra: secretInfra{pass: pass}, tracker: &tracker{}}, dir: dir,
		res: &result.Scenario{Name: "redact", Variant: "correct", Verdict: result.Fail}}
	require.NoError(t, r.newSupervisor())
	_, err := r.sup.Start(ctx, supervisor.Spec{
		Name: "relay-1", Role: "relay",
		Command: []string{"/bin/sh", "-c", `echo "args: $1 $2"; echo "env: $DATABASE_URL $AMQP_URL"; echo ready; exec sleep 30`,
			"relay", "--pg", pgURL},
		Env:   []string{"DATABASE_URL=" + pgURL, "AMQP_URL=" + amqpURL, "PGPASSWORD=" + pass},
		Ready: supervisor.Ready{Log: regexp.MustCompile(`^ready$`)},
	})
	require.NoError(t, err)
	r.res.Reason = fmt.Sprintf("relay-1: dial %s: connection refused", amqpURL)
	r.res.Faults = []result.Fault{{Kind: "link-down", Target: "relay-1.pg", Error: "connect host=127.0.0.1 user=postgres password=" + pass}}
	r.res.Invariants = []result.Invariant{{Name: "no-loss", Violations: []result.Violation{{
		Kind: "lost", Message: "lost", Timeline: []string{"relay-1 connected to " + pgURL}}}}}
	r.teardown(ctx) // stops the process, closes supervisor.log
	// Masked as written, not only once the folder is kept: a run under
	// way, or one a crash ends, has its log as it was written.
	live, err := os.ReadFile(filepath.Join(dir, "supervisor.log"))
	require.NoError(t, err)
	assert.NotContains(t, string(live), pass, "supervisor.log as written")
	assert.Contains(t, string(live), "--pg postgres://postgres:xxxxx@127.0.0.1:40001/orders")
	r.finish(true)

	require.Equal(t, dir, r.res.Dir, "kept")
	files := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.Type().IsRegular() {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			files[filepath.Base(path)] = string(b)
		}
		return nil
	}))
	require.Contains(t, files, "supervisor.log")
	require.Contains(t, files, "relay-1.out")
	require.Contains(t, files, "summary.txt")
	for name, content := range files {
		assert.NotContains(t, content, pass, "%s holds the password", name)
	}
	assert.Contains(t, files["supervisor.log"], "spawned pid", "the command line was logged")
	assert.Contains(t, files["supervisor.log"], "--pg postgres://postgres:xxxxx@127.0.0.1:40001/orders", "masked, still readable")
	assert.Contains(t, files["relay-1.out"], "env: postgres://postgres:xxxxx@127.0.0.1:40001/orders?sslmode=disable amqp://faultline-0a1b2c3d4e5f:xxxxx@")
	assert.Contains(t, files["summary.txt"], "amqp://faultline-0a1b2c3d4e5f:xxxxx@127.0.0.1:40002/run_1")

	for _, s := range []string{r.res.Reason, r.res.Faults[0].Error, strings.Join(r.res.Invariants[0].Violations[0].Timeline, "\n")} {
		assert.NotContains(t, s, pass)
		assert.Contains(t, s, "xxxxx")
	}
}
