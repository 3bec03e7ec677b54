package main

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/infra"
)

// asCLI, set to 1, makes this test binary the faultline command.
const asCLI = "FAULTLINE_TEST_AS_CLI"

// TestKilledRunLeavesNoSlotBehind: a run of the CDC example (a relay that
// tails logical replication: its run's database holds a replication slot
// and a publication) on servers faultline does not own, faultline killed
// with SIGKILL mid-run: the slot is left on the server, and the next
// faultline to start there drops it, with the run's databases and vhost.
func TestKilledRunLeavesNoSlotBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real infrastructure; not in -short")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	// The team's servers: a local provider's, which this test owns.
	servers, err := infra.StartLocal(ctx, infra.LocalOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = servers.Stop(context.Background()) })
	amqpURL, err := url.Parse(servers.AMQPURL("/"))
	require.NoError(t, err)
	mgmt, err := url.Parse(servers.ManagementURL())
	require.NoError(t, err)
	mgmt.User = amqpURL.User
	opts := infra.ExternalOptions{PGURL: servers.PostgresURL("postgres"), AMQPURL: servers.AMQPURL("/"), ManagementURL: mgmt.String()}

	out, err := os.Create(filepath.Join(t.TempDir(), "faultline.out"))
	require.NoError(t, err)
	defer out.Close()
	cli := exec.CommandContext(ctx, os.Args[0], "run", "--infra", "external",
		"--target", filepath.Join("..", "..", "examples", "cdc-outbox", "faultline.yaml"),
		"--seed", "1", "--out", t.TempDir(), "consumer-db-down")
	cli.Env = append(os.Environ(), asCLI+"=1", "FAULTLINE_TARGET=",
		infra.EnvPGURL+"="+opts.PGURL, infra.EnvAMQPURL+"="+opts.AMQPURL, infra.EnvManagementURL+"="+opts.ManagementURL)
	cli.Stdout, cli.Stderr = out, out
	require.NoError(t, cli.Start())
	exited := make(chan error, 1)
	go func() { exited <- cli.Wait() }()

	admin, err := pgx.Connect(ctx, servers.PostgresURL("postgres"))
	require.NoError(t, err)
	defer admin.Close(context.Background())
	// count is for the test's goroutine (t) and for a wait's (a CollectT).
	count := func(t require.TestingT, sql string) int {
		var n int
		require.NoError(t, admin.QueryRow(ctx, sql).Scan(&n))
		return n
	}
	const slots = `SELECT count(*) FROM pg_replication_slots`
	// A slot being created is ephemeral until its snapshot is built (it
	// waits for the transactions running then): its session dying drops
	// it. Streamed from (its walsender past START_REPLICATION), it is
	// persistent and outlives the run.
	const streamed = `SELECT count(*) FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid
WHERE r.state IN ('catchup', 'streaming')`
	const runDatabases = `SELECT count(*) FROM pg_database WHERE datname LIKE 'fl\_%'`
	var ended bool
	var endErr error
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		if !ended {
			select {
			case endErr = <-exited:
				ended = true
			default:
			}
		}
		assert.True(c, ended || count(c, streamed) > 0)
	}, 5*time.Minute, 100*time.Millisecond, "the run's relay streams from its replication slot")
	if ended {
		b, _ := os.ReadFile(out.Name())
		require.Failf(t, "faultline ended before its relay made its slot", "%v\n%s", endErr, b)
	}

	require.NoError(t, cli.Process.Signal(syscall.SIGKILL))
	<-exited
	require.Positive(t, count(t, slots), "the killed run's slot is left on the server")
	require.Positive(t, count(t, runDatabases), "and its databases")

	// Its session to the server ends with it; the next faultline to
	// start there removes what it left.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Zero(c, count(c, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'faultline (holds its runs'' databases)'`))
	}, time.Minute, 50*time.Millisecond, "the killed faultline's session ends")
	next, err := infra.StartExternal(ctx, opts)
	require.NoError(t, err)
	defer next.Stop(context.Background())
	assert.Zero(t, count(t, slots), "no slot of the killed run is left")
	assert.Zero(t, count(t, runDatabases), "no database of the killed run is left (its publication was in one)")
}
