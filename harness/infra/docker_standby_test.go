package infra

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDockerStandby starts the docker provider and, beside it, a primary
// with an asynchronous standby, then one with a synchronous standby: what
// each has at a failover, as TestLocalStandbyAsync and
// TestLocalStandbySync measure it, and that the processes' way to "the
// primary" (a link of the provider's Toxiproxy to LinkUpstreams, and
// PostgresAddr) leads to the promoted server after it. Then each pair is
// stopped: its containers, its network and its link are gone.
func TestDockerStandby(t *testing.T) {
	skipWithoutDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	opts, err := DockerOptionsFromEnv(nil)
	require.NoError(t, err)
	opts.Log = testLog{t}
	opts.ToxiproxyPorts = 4
	d, err := StartDocker(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Stop(context.Background()) })

	t.Run("async: rows committed while held are lost", func(t *testing.T) {
		r := startDockerReplicated(ctx, t, d, false)
		require.NoError(t, r.CreateDatabase(ctx, "rep"))
		primary := connect(ctx, t, r.PostgresURL("rep"))
		_, err := primary.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
		require.NoError(t, err)
		_, err = primary.Exec(ctx, `INSERT INTO t SELECT i, repeat('x', 100) FROM generate_series(1, 100) i`)
		require.NoError(t, err)
		require.NoError(t, r.ReleaseReplication(ctx), "catch up")
		standby := connect(ctx, t, r.urlOn(r.sbAddr, "rep"))
		assert.Equal(t, 100, count(ctx, t, standby, "true"), "replicated")
		_, err = standby.Exec(ctx, `INSERT INTO t VALUES (0, 'standby')`)
		assert.Error(t, err, "the standby is read-only")

		// A process's link, made before the failover, as the runner makes
		// it: to LinkUpstreams' PostgreSQL, through the provider's Toxiproxy.
		viaLink := linkedURL(ctx, t, d, "dockrep.async.pg", r, "rep")
		assert.False(t, inRecovery(ctx, t, viaLink), "the link leads to the primary")

		require.NoError(t, r.HoldReplication(ctx))
		_, err = primary.Exec(ctx, `INSERT INTO t SELECT i, repeat('y', 100) FROM generate_series(1001, 1050) i`)
		require.NoError(t, err, "the primary commits while held")
		assert.Equal(t, 150, count(ctx, t, primary, "true"))
		assert.Equal(t, 100, count(ctx, t, standby, "true"), "the standby falls behind")

		oldAddr := r.PostgresAddr()
		f, err := r.Failover(ctx)
		require.NoError(t, err)
		t.Logf("FIGURE docker failover (async, 50 rows held): %+v", f)
		assert.Positive(t, f.LostBytes, "the held commits are WAL the standby never got")
		assert.Positive(t, f.Took)
		assert.Equal(t, oldAddr, r.PostgresAddr(), "the primary's address stays: its front leads to the promoted server")
		assert.Equal(t, r.sbAddr, r.front.target())

		promoted := connect(ctx, t, r.PostgresURL("rep"))
		_, err = promoted.Exec(ctx, `INSERT INTO t VALUES (5000, 'after')`)
		require.NoError(t, err, "the promoted server accepts writes")
		assert.Equal(t, 100, count(ctx, t, promoted, "id <= 100"), "replicated rows survive")
		assert.Equal(t, 0, count(ctx, t, promoted, "id BETWEEN 1001 AND 2000"), "rows committed while held are lost")
		require.NoError(t, r.CreateDatabase(ctx, "after"), "databases go to the promoted server")
		require.NoError(t, r.DropDatabase(ctx, "after"))
		// The link made before the failover reaches the promoted server:
		// the alias moved to it.
		via := connect(ctx, t, viaLink)
		assert.False(t, inRecovery(ctx, t, viaLink), "the promoted server is no standby")
		assert.Equal(t, 1, count(ctx, t, via, "id = 5000"), "the link leads to the promoted server")

		_, err = r.Failover(ctx)
		assert.ErrorIs(t, err, errPromoted, "a second failover has no standby")
		assert.ErrorIs(t, r.HoldReplication(ctx), errPromoted)
		assert.ErrorIs(t, r.ReleaseReplication(ctx), errPromoted)
		for _, c := range []*pgx.Conn{via, promoted, standby, primary} {
			c.Close(ctx)
		}
		checkDockerReplicatedStopped(ctx, t, d, r)
	})

	t.Run("sync: a cancelled wait commits locally, a caught-up failover loses nothing", func(t *testing.T) {
		r := startDockerReplicated(ctx, t, d, true)
		require.NoError(t, r.CreateDatabase(ctx, "rep"))
		primary := connect(ctx, t, r.PostgresURL("rep"))
		_, err := primary.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
		require.NoError(t, err, "commits go through while the standby streams")
		var names, commit string
		require.NoError(t, primary.QueryRow(ctx, `SELECT current_setting('synchronous_standby_names'), current_setting('synchronous_commit')`).Scan(&names, &commit))
		assert.Equal(t, standbyAppName, names)
		assert.Equal(t, "on", commit)
		require.NoError(t, r.ReleaseReplication(ctx), "catch up")
		standby := connect(ctx, t, r.urlOn(r.sbAddr, "rep"))
		assert.Equal(t, 0, count(ctx, t, standby, "true"), "the table is on the standby")

		require.NoError(t, r.HoldReplication(ctx))
		cfg, err := pgx.ParseConfig(r.PostgresURL("rep"))
		require.NoError(t, err)
		var mu sync.Mutex
		var notices []string
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			mu.Lock()
			defer mu.Unlock()
			notices = append(notices, n.Severity+": "+n.Message+" "+n.Detail)
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		pid := conn.PgConn().PID()
		done := make(chan error, 1)
		go func() {
			_, err := conn.Exec(ctx, `INSERT INTO t VALUES (1, 'held')`)
			done <- err
		}()
		require.Eventually(t, func() bool {
			var waiting bool
			err := primary.QueryRow(ctx, `SELECT wait_event = 'SyncRep' FROM pg_stat_activity WHERE pid = $1`, int64(pid)).Scan(&waiting)
			return err == nil && waiting
		}, 10*time.Second, 20*time.Millisecond, "the commit waits for the held standby")
		assert.Equal(t, 0, count(ctx, t, primary, "id = 1"), "invisible while it waits")
		var ok bool
		require.NoError(t, primary.QueryRow(ctx, `SELECT pg_cancel_backend($1)`, int64(pid)).Scan(&ok))
		require.True(t, ok)
		select {
		case err := <-done:
			require.NoError(t, err, "a cancelled wait is no error: the commit happened")
		case <-time.After(30 * time.Second):
			t.Fatal("the commit did not return")
		}
		mu.Lock()
		assert.Contains(t, strings.Join(notices, "\n"), "already committed locally")
		mu.Unlock()
		assert.Equal(t, 1, count(ctx, t, primary, "id = 1"), "visible on the primary")
		assert.Equal(t, 0, count(ctx, t, standby, "id = 1"), "not on the held standby")

		require.NoError(t, r.ReleaseReplication(ctx))
		assert.Equal(t, 1, count(ctx, t, standby, "true"), "the standby catches up once released")
		f, err := r.Failover(ctx)
		require.NoError(t, err)
		t.Logf("FIGURE docker failover (sync, caught up): %+v", f)
		assert.Zero(t, f.LostBytes, "a synchronous standby that caught up has every commit")
		promoted := connect(ctx, t, r.PostgresURL("rep"))
		_, err = promoted.Exec(ctx, `INSERT INTO t VALUES (100, 'after')`)
		require.NoError(t, err, "the promoted server commits without waiting for a standby")
		assert.Equal(t, 2, count(ctx, t, promoted, "true"))
		for _, c := range []*pgx.Conn{promoted, standby, primary, conn} {
			c.Close(ctx)
		}
		checkDockerReplicatedStopped(ctx, t, d, r)
	})
}

// startDockerReplicated starts a pair beside d and logs its start-up.
func startDockerReplicated(ctx context.Context, t *testing.T, d *Docker, synchronous bool) *DockerReplicated {
	begin := time.Now()
	rep, err := d.StartReplicated(ctx, synchronous)
	require.NoError(t, err)
	r := rep.(*DockerReplicated)
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	t.Logf("FIGURE docker replicated start (synchronous %t): %s", synchronous, time.Since(begin).Round(100*time.Millisecond))
	assert.Equal(t, synchronous, r.Synchronous())
	assert.Contains(t, r.Secrets(), r.replPass, "the replication role's password is a secret")
	pg, amqp := r.LinkUpstreams()
	assert.Equal(t, "postgres-"+r.id+":5432", pg)
	_, parentAMQP := d.LinkUpstreams()
	assert.Equal(t, parentAMQP, amqp, "the provider's broker")
	assert.False(t, r.CanRestartBroker())
	return r
}

// linkedURL is r's PostgresURL for db through a new link of d's Toxiproxy
// to r's LinkUpstreams, removed at the end of t.
func linkedURL(ctx context.Context, t *testing.T, d *Docker, name string, r *DockerReplicated, db string) string {
	pg, _ := r.LinkUpstreams()
	l, err := d.Toxiproxy().AddLink(ctx, name, pg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Toxiproxy().RemoveLink(context.Background(), name) })
	u, err := url.Parse(r.PostgresURL(db))
	require.NoError(t, err)
	u.Host = l.Addr()
	return u.String()
}

func inRecovery(ctx context.Context, t *testing.T, url string) bool {
	conn := connect(ctx, t, url)
	defer conn.Close(ctx)
	var rec bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&rec))
	return rec
}

// checkDockerReplicatedStopped stops r and checks that its containers,
// its network and its link are gone, and that the provider's Toxiproxy
// is on the provider's network only again.
func checkDockerReplicatedStopped(ctx context.Context, t *testing.T, d *Docker, r *DockerReplicated) {
	ids := []string{r.primaryC.GetContainerID(), r.standbyC.GetContainerID()}
	nw, link := r.frontNet.ID, r.repl.Name()
	begin := time.Now()
	require.NoError(t, r.Stop(ctx))
	t.Logf("FIGURE docker replicated stop: %s", time.Since(begin).Round(10*time.Millisecond))
	api, err := client.New(client.FromEnv)
	require.NoError(t, err)
	defer api.Close()
	for _, id := range ids {
		_, err := api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		assert.Error(t, err, "container %.12s removed", id)
	}
	_, err = api.NetworkInspect(ctx, nw, client.NetworkInspectOptions{})
	assert.Error(t, err, "front network removed")
	toxi, err := d.toxiC.Inspect(ctx)
	require.NoError(t, err)
	var nets []string
	for name := range toxi.NetworkSettings.Networks {
		nets = append(nets, name)
	}
	assert.Equal(t, []string{d.network.Name}, nets, "toxiproxy is on the provider's network only")
	left, err := d.toxi.Client().Proxies()
	require.NoError(t, err)
	assert.NotContains(t, left, link, "replication link removed")
}
