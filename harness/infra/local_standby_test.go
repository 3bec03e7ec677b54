package infra

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLSN(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0/0", 0, true},
		{"0/16B3748", 0x16B3748, true},
		{"1/0", 1 << 32, true},
		{"FFFFFFFF/FFFFFFFF", 1<<64 - 1, true},
		{"", 0, false},
		{"16B3748", 0, false},
		{"0/x", 0, false},
		{"1FFFFFFFF/0", 0, false},
	} {
		got, err := parseLSN(tc.in)
		if !tc.ok {
			assert.Error(t, err, "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}

func TestStartLocalRejectsUnknownStandby(t *testing.T) {
	_, err := StartLocal(context.Background(), LocalOptions{Standby: "semi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "semi")
}

// replicatedStarts is how many services startReplicated starts: the
// primary, the standby and the broker.
const replicatedStarts = 3

// startReplicated starts a local infrastructure with a standby and logs
// its start-up.
func startReplicated(ctx context.Context, t *testing.T, mode string) *LocalReplicated {
	begin := time.Now()
	l, err := StartLocal(ctx, LocalOptions{Log: testLog{t}, Standby: mode, KeepDir: os.Getenv("FL_KEEP") != ""})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	r, ok := l.Replicated()
	require.True(t, ok)
	times := l.StartTimes()
	t.Logf("measured: start-up with a %s standby: postgres %s (standby part %s), rabbitmq %s, total %s",
		mode, times["postgres"].Round(time.Millisecond), times["postgres-standby"].Round(time.Millisecond),
		times["rabbitmq"].Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
	assert.Equal(t, mode == StandbySync, r.Synchronous())
	assert.Len(t, l.Secrets(), 3, "the replication role's password is a secret")
	var _ Replicated = r
	return r
}

// standbyURL is a superuser URL on the standby (read-only until promoted).
func (r *LocalReplicated) standbyURL(db string) string { return r.urlOn(r.rep.port, db) }

func connect(ctx context.Context, t *testing.T, url string) *pgx.Conn {
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func count(ctx context.Context, t *testing.T, conn *pgx.Conn, where string) int {
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM t WHERE `+where).Scan(&n))
	return n
}

// pss sums the proportional set size (shared memory split among its
// sharers) of the processes working in dir, in KiB.
func pss(dir string) int64 {
	var total int64
	for _, p := range strays(dir, nil) {
		f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", p.pid))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				total += kb
			}
		}
		f.Close()
	}
	return total
}

// TestLocalStandbyAsync: what an asynchronous standby has at a failover.
// Rows replicated before it are there; rows committed on the primary while
// replication was held are not (the documented limit, measured in
// LostBytes).
func TestLocalStandbyAsync(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL twice and RabbitMQ")
	}
	for _, tc := range []struct {
		name string
		held int // rows committed on the primary while replication is held
	}{
		{name: "rows committed while held are lost", held: 50},
		{name: "caught up loses nothing", held: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := startsCtx(t, replicatedStarts)
			r := startReplicated(ctx, t, StandbyAsync)
			require.NoError(t, r.CreateDatabase(ctx, "rep"))
			primary := connect(ctx, t, r.PostgresURL("rep"))
			_, err := primary.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
			require.NoError(t, err)
			_, err = primary.Exec(ctx, `INSERT INTO t SELECT i, repeat('x', 100) FROM generate_series(1, 100) i`)
			require.NoError(t, err)
			require.NoError(t, r.ReleaseReplication(ctx), "catch up")
			standby := connect(ctx, t, r.standbyURL("rep"))
			assert.Equal(t, 100, count(ctx, t, standby, "true"), "replicated")
			_, err = standby.Exec(ctx, `INSERT INTO t VALUES (0, 'standby')`)
			assert.Error(t, err, "the standby is read-only")

			if tc.held > 0 {
				require.NoError(t, r.HoldReplication(ctx))
				_, err = primary.Exec(ctx, `INSERT INTO t SELECT i, repeat('y', 100) FROM generate_series(1001, 1000 + $1::int) i`, tc.held)
				require.NoError(t, err, "the primary commits while held")
				assert.Equal(t, 100+tc.held, count(ctx, t, primary, "true"))
				assert.Equal(t, 100, count(ctx, t, standby, "true"), "the standby falls behind")
			}
			mem := map[string]int64{"primary": pss(filepath.Join(r.Dir(), "pg")), "standby": pss(r.rep.dataDir)}
			t.Logf("measured: PSS primary %d KiB, standby %d KiB", mem["primary"], mem["standby"])

			oldAddr := r.PostgresAddr()
			f, err := r.Failover(ctx)
			require.NoError(t, err)
			t.Logf("measured: failover %+v", f)
			assert.Equal(t, oldAddr, r.PostgresAddr(), "the primary's address stays: its front leads to the promoted server now")
			assert.Equal(t, "127.0.0.1:"+strconv.Itoa(r.rep.port), r.rep.front.target())
			pg, _ := r.LinkUpstreams()
			assert.Equal(t, r.PostgresAddr(), pg)
			if tc.held > 0 {
				assert.Positive(t, f.LostBytes, "the held commits are WAL the standby never got")
			} else {
				assert.Zero(t, f.LostBytes, "nothing committed after the catch-up")
			}
			assert.Positive(t, f.Took)

			promoted := connect(ctx, t, r.PostgresURL("rep"))
			_, err = promoted.Exec(ctx, `INSERT INTO t VALUES (5000, 'after')`)
			require.NoError(t, err, "the promoted server accepts writes")
			assert.Equal(t, 100, count(ctx, t, promoted, "id <= 100"), "replicated rows survive")
			assert.Equal(t, 0, count(ctx, t, promoted, "id BETWEEN 1001 AND 2000"), "rows committed while held are lost")
			require.NoError(t, r.CreateDatabase(ctx, "after"), "databases go to the promoted server")
			require.NoError(t, r.DropDatabase(ctx, "after"))

			_, err = r.Failover(ctx)
			assert.ErrorIs(t, err, errPromoted, "a second failover has no standby")
			assert.ErrorIs(t, r.HoldReplication(ctx), errPromoted)
			assert.ErrorIs(t, r.ReleaseReplication(ctx), errPromoted)
			promoted.Close(ctx)
			standby.Close(ctx)

			checkStopped(ctx, t, r)
		})
	}
}

// TestLocalStandbySync: with a synchronous standby held, a commit waits;
// a client that cancels the wait gets a warning, not an error, and its
// commit is visible on the primary though the standby never got it.
func TestLocalStandbySync(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL twice and RabbitMQ")
	}
	ctx := startsCtx(t, replicatedStarts)
	r := startReplicated(ctx, t, StandbySync)
	require.NoError(t, r.CreateDatabase(ctx, "rep"))
	primary := connect(ctx, t, r.PostgresURL("rep"))
	_, err := primary.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	require.NoError(t, err, "commits go through while the standby streams")
	var names, commit string
	require.NoError(t, primary.QueryRow(ctx, `SELECT current_setting('synchronous_standby_names'), current_setting('synchronous_commit')`).Scan(&names, &commit))
	assert.Equal(t, standbyAppName, names)
	assert.Equal(t, "on", commit)
	// synchronous_commit=on waits for the standby's flush, not its replay.
	require.NoError(t, r.ReleaseReplication(ctx), "catch up")
	standby := connect(ctx, t, r.standbyURL("rep"))
	assert.Equal(t, 0, count(ctx, t, standby, "true"), "the table is on the standby")

	require.NoError(t, r.HoldReplication(ctx))
	cancelSQL := func(fn string) func(t *testing.T, _ *pgx.Conn, pid uint32) {
		return func(t *testing.T, _ *pgx.Conn, pid uint32) {
			var ok bool
			require.NoError(t, primary.QueryRow(ctx, `SELECT `+fn+`($1)`, int64(pid)).Scan(&ok))
			require.True(t, ok)
		}
	}
	cases := []struct {
		name    string
		setup   string                                      // run on the committing session first
		waitFor time.Duration                               // how long the commit must have waited before it is ended
		end     func(t *testing.T, c *pgx.Conn, pid uint32) // ends the commit's wait for the standby
		wantErr bool                                        // the client gets an error
		notice  string
	}{
		{name: "pg_cancel_backend", end: cancelSQL("pg_cancel_backend"),
			notice: "canceling wait for synchronous replication due to user request"},
		{name: "the client's cancel request", end: func(t *testing.T, c *pgx.Conn, _ uint32) {
			require.NoError(t, c.PgConn().CancelRequest(ctx))
		}, notice: "canceling wait for synchronous replication due to user request"},
		{name: "pg_terminate_backend", end: cancelSQL("pg_terminate_backend"), wantErr: true,
			notice: "canceling the wait for synchronous replication and terminating connection"},
		// PostgreSQL disarms statement_timeout before it commits: the wait
		// outlives the timeout, and only a cancel ends it.
		{name: "statement_timeout does not end the wait", setup: `SET statement_timeout = '200ms'`,
			waitFor: time.Second, end: cancelSQL("pg_cancel_backend"),
			notice: "canceling wait for synchronous replication due to user request"},
	}
	for i, tc := range cases {
		id := i + 1
		t.Run(tc.name, func(t *testing.T) {
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
			if tc.setup != "" {
				_, err = conn.Exec(ctx, tc.setup)
				require.NoError(t, err)
			}
			pid := conn.PgConn().PID()
			done := make(chan error, 1)
			go func() {
				_, err := conn.Exec(ctx, `INSERT INTO t VALUES ($1, 'held')`, id)
				done <- err
			}()
			// The commit waits for the standby: its backend shows the
			// SyncRep wait (for at least waitFor), the row is not visible
			// yet, and the statement has not returned.
			require.Eventually(t, func() bool {
				var waiting bool
				err := primary.QueryRow(ctx, `SELECT wait_event = 'SyncRep' AND clock_timestamp() - query_start >= $2::interval
					FROM pg_stat_activity WHERE pid = $1`, int64(pid), tc.waitFor.String()).Scan(&waiting)
				return err == nil && waiting
			}, 10*time.Second, 20*time.Millisecond, "the commit waits for the held standby")
			assert.Equal(t, 0, count(ctx, t, primary, fmt.Sprintf("id = %d", id)), "invisible while it waits")
			select {
			case err := <-done:
				t.Fatalf("the commit returned while the standby is held: %v", err)
			default:
			}
			tc.end(t, conn, pid)
			select {
			case err := <-done:
				if tc.wantErr {
					require.Error(t, err, "the client is told the statement failed")
				} else {
					require.NoError(t, err, "a cancelled wait is no error: the commit happened")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the commit did not return")
			}
			mu.Lock()
			assert.Contains(t, strings.Join(notices, "\n"), tc.notice)
			assert.Contains(t, strings.Join(notices, "\n"), "already committed locally")
			mu.Unlock()
			assert.Equal(t, 1, count(ctx, t, primary, fmt.Sprintf("id = %d", id)), "visible on the primary")
			assert.Equal(t, 0, count(ctx, t, standby, fmt.Sprintf("id = %d", id)), "not on the held standby")
		})
	}

	require.NoError(t, r.ReleaseReplication(ctx))
	assert.Equal(t, len(cases), count(ctx, t, standby, "true"), "the standby catches up once released")
	f, err := r.Failover(ctx)
	require.NoError(t, err)
	t.Logf("measured: failover %+v", f)
	assert.Zero(t, f.LostBytes, "a synchronous standby that caught up has every commit")
	promoted := connect(ctx, t, r.PostgresURL("rep"))
	_, err = promoted.Exec(ctx, `INSERT INTO t VALUES (100, 'after')`)
	require.NoError(t, err, "the promoted server commits without waiting for a standby")
	assert.Equal(t, len(cases)+1, count(ctx, t, promoted, "true"))
	promoted.Close(ctx)
	standby.Close(ctx)
	primary.Close(ctx)

	checkStopped(ctx, t, r)
}

// TestLocalStandbyReplicate: a replica of a Local with a standby has a
// standby of the same kind, and its own servers.
func TestLocalStandbyReplicate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL six times and RabbitMQ four times")
	}
	ctx := startsCtx(t, 2*replicatedStarts+2*2)
	r := startReplicated(ctx, t, StandbySync)
	replica, err := r.Replicate(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = replica.Stop(context.Background()) })
	rr, ok := replica.(*LocalReplicated)
	require.True(t, ok, "a replica of a replicated Local is replicated: %T", replica)
	assert.True(t, rr.Synchronous())
	assert.NotEqual(t, r.PostgresAddr(), rr.PostgresAddr())
	assert.NotEqual(t, r.rep.port, rr.rep.port)
	require.NoError(t, rr.CreateDatabase(ctx, "apart"), "commits on the replica's own synchronous pair")
	checkStopped(ctx, t, rr)

	plain, err := StartLocal(ctx, LocalOptions{Log: testLog{t}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Stop(context.Background()) })
	_, ok = plain.Replicated()
	assert.False(t, ok, "no standby, not Replicated")
	var asInfra Infra = plain
	_, ok = asInfra.(Replicated)
	assert.False(t, ok, "a Local without a standby does not pass for Replicated")
	plainReplica, err := plain.Replicate(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = plainReplica.Stop(context.Background()) })
	_, ok = plainReplica.(Replicated)
	assert.False(t, ok, "nor does its replica")
}

// checkStopped stops r and checks that nothing of it is left: no process
// (the killed primary's included), no listening port (the forwarder's
// included), no folder.
func checkStopped(ctx context.Context, t *testing.T, r *LocalReplicated) {
	pids := r.pids()
	require.NotEmpty(t, pids)
	dir, bound := r.Dir(), append(r.ports(), 0)
	_, fport, err := splitHostPort(r.rep.fwd.Addr())
	require.NoError(t, err)
	bound[len(bound)-1] = fport
	require.Len(t, bound, 7, "5 services, the standby and the forwarder")
	require.DirExists(t, filepath.Join(dir, "pg"), "the killed primary's data")
	require.NoError(t, r.Stop(ctx))
	for _, pid := range pids {
		assert.False(t, alive(pid, 0), "pid %d still alive after Stop", pid)
	}
	assert.Empty(t, strays(dir, nil), "no process works in the folder")
	for _, p := range bound {
		c, err := net.DialTimeout("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), time.Second)
		if err == nil {
			c.Close()
		}
		assert.Error(t, err, "port %d still listens", p)
	}
	assert.NoDirExists(t, dir)
}
