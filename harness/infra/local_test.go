package infra

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/ports"
	"github.com/faultline-dev/faultline/harness/testctx"
)

// testLog sends progress lines to the test log.
type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startsCtx bounds a test that starts services `starts` times. Each start
// is bounded inside the provider (startTimeout), so the test's bound is the
// sum of those, not a guess at how fast a loaded machine boots: in the
// clean-clone CI, beside the scenarios, one broker took 68 s and the next
// more than a 3-minute bound had left. It ends before go test's own
// deadline too (testctx.BeforeDeadline).
func startsCtx(t *testing.T, starts int) context.Context {
	ctx, cancel := context.WithTimeout(testctx.BeforeDeadline(t), time.Duration(starts)*startTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestLocal starts one local infrastructure and runs everything against it
// in order (the broker restart last), then checks that Stop leaves nothing.
func TestLocal(t *testing.T) {
	ctx := startsCtx(t, 5) // postgres, rabbitmq, postgres's and the broker's restarts, the broker's boot again

	l, err := StartLocal(ctx, LocalOptions{Log: testLog{t}, KeepDir: os.Getenv("FL_KEEP") != ""})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Stop(context.Background()) })

	assert.Equal(t, "local", l.Name())
	assert.True(t, l.CanRestartBroker())
	assert.Equal(t, "127.0.0.1:"+strconv.Itoa(l.pgPort), l.PostgresAddr())
	assert.Equal(t, "postgres://postgres:"+l.pgPass+"@"+l.PostgresAddr()+"/orders?sslmode=disable", l.PostgresURL("orders"))
	assert.Equal(t, "amqp://"+l.rmqUser+":"+l.rmqPass+"@"+l.AMQPAddr()+"/%2F", l.AMQPURL("/"))
	assert.Equal(t, "amqp://"+l.rmqUser+":"+l.rmqPass+"@"+l.AMQPAddr()+"/s-1", l.AMQPURL("s-1"))
	assert.ElementsMatch(t, []string{l.pgPass, l.rmqPass}, l.Secrets())

	t.Run("services are locked", func(t *testing.T) { testLocked(ctx, t, l) })
	testContract(ctx, t, l, "loc")
	t.Run("a replica is apart", func(t *testing.T) { testReplica(ctx, t, l) })
	t.Run("postgres crash keeps commits and slots", func(t *testing.T) { testPostgresCrash(ctx, t, l) })
	t.Run("restart keeps quorum message", func(t *testing.T) { testRestart(ctx, t, l) })
	t.Run("a failed first boot starts again from an empty database", func(t *testing.T) { testBootAgain(ctx, t, l) })

	// Stop: every process gone, no port listening, no folder.
	pids := l.pids()
	require.NotEmpty(t, pids)
	if os.Geteuid() == 0 {
		for _, pid := range pids {
			uid, err := procUID(pid)
			if err == nil {
				assert.NotEqual(t, 0, uid, "pid %d runs as root", pid)
			}
		}
	}
	dir, bound := l.Dir(), l.ports()
	require.Len(t, bound, 5)
	for _, p := range bound {
		// Below the ephemeral range: no client's outgoing connection can
		// take a service's port between its choice and its bind.
		assert.GreaterOrEqual(t, p, ports.From, "service port %d", p)
		assert.Less(t, p, 32768, "service port %d", p)
	}
	require.DirExists(t, dir)
	require.NoError(t, l.Stop(ctx))
	for _, pid := range pids {
		assert.False(t, alive(pid, 0), "pid %d still alive after Stop", pid)
	}
	for _, p := range bound {
		c, err := net.DialTimeout("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), time.Second)
		if err == nil {
			c.Close()
		}
		assert.Error(t, err, "port %d still listens", p)
	}
	assert.NoDirExists(t, dir)
	assert.NoError(t, l.Stop(ctx), "Stop is idempotent")
	assert.Error(t, l.StartBroker(ctx), "no broker after Stop")
}

// testLocked checks that only the run's credentials open the services:
// PostgreSQL asks every connection for the password, over TCP and over its
// unix socket, whose folder only its user may enter; RabbitMQ has no guest
// on AMQP or on the management API; and the password file is gone.
func testLocked(ctx context.Context, t *testing.T, l *Local) {
	for _, pw := range []string{l.pgPass, l.rmqUser, l.rmqPass} {
		require.Regexp(t, `^(faultline-)?[0-9a-f]{12,}$`, pw)
	}
	assert.GreaterOrEqual(t, len(l.pgPass), 48, "24 random bytes, hex")
	assert.GreaterOrEqual(t, len(l.rmqPass), 48, "24 random bytes, hex")
	assert.NotEqual(t, l.pgPass, l.rmqPass)

	tcp := func(userinfo string) string {
		return "postgres://" + userinfo + "@" + l.PostgresAddr() + "/postgres?sslmode=disable"
	}
	socket := func(password string) string {
		dsn := fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", l.socketDir(), l.pgPort)
		if password != "" {
			dsn += " password=" + password
		}
		return dsn
	}
	pgCases := []struct {
		name, conn string
		ok         bool
	}{
		{"TCP without a password", tcp("postgres"), false},
		{"TCP with a wrong password", tcp("postgres:postgres"), false},
		{"TCP with the run's password", tcp("postgres:" + l.pgPass), true},
		{"socket without a password", socket(""), false},
		{"socket with a wrong password", socket("postgres"), false},
		{"socket with the run's password", socket(l.pgPass), true},
	}
	for _, tc := range pgCases {
		t.Run("postgres "+tc.name, func(t *testing.T) {
			cfg, err := pgx.ParseConfig(tc.conn)
			require.NoError(t, err)
			cfg.Fallbacks = nil // no second try over another socket or without TLS
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if !tc.ok {
				require.Error(t, err)
				assert.ErrorContains(t, err, "password")
				return
			}
			require.NoError(t, err)
			defer conn.Close(ctx)
			var methods []string
			require.NoError(t, conn.QueryRow(ctx, `SELECT array_agg(DISTINCT auth_method) FROM pg_hba_file_rules`).Scan(&methods))
			assert.Equal(t, []string{"scram-sha-256"}, methods, "every pg_hba line asks for the password")
		})
	}

	for _, tc := range []struct {
		path string
		mode os.FileMode
	}{
		{l.socketDir(), 0o700},
		{filepath.Join(l.dir, "pg"), 0o700},
		{l.dir, 0o700},
		{filepath.Join(l.dir, "rmq", "rabbitmq.conf"), 0o600},
	} {
		st, err := os.Stat(tc.path)
		if assert.NoError(t, err) {
			assert.Equal(t, tc.mode, st.Mode().Perm(), "mode of %s", tc.path)
		}
	}
	_, err := os.Stat(filepath.Join(l.dir, "pg.pwfile"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the password file is removed after initdb")
	// No file but the broker's configuration holds a password in clear.
	err = filepath.WalkDir(l.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&os.ModeSocket != 0 || !d.Type().IsRegular() {
			return nil // a socket, or a file gone meanwhile
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		assert.NotContains(t, string(b), l.pgPass, "%s holds the PostgreSQL password", path)
		if path != filepath.Join(l.dir, "rmq", "rabbitmq.conf") {
			assert.NotContains(t, string(b), l.rmqPass, "%s holds the RabbitMQ password", path)
		}
		return nil
	})
	require.NoError(t, err)

	amqpURL := func(user, pass string) string {
		return "amqp://" + user + ":" + pass + "@" + l.AMQPAddr() + "/"
	}
	rmqCases := []struct {
		name, user, pass string
		ok               bool
	}{
		{"guest", "guest", "guest", false},
		{"the run's user, wrong password", l.rmqUser, "guest", false},
		{"the run's user", l.rmqUser, l.rmqPass, true},
	}
	for _, tc := range rmqCases {
		t.Run("rabbitmq "+tc.name, func(t *testing.T) {
			conn, err := amqp.DialConfig(amqpURL(tc.user, tc.pass), amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
			if tc.ok {
				require.NoError(t, err, "AMQP")
				_ = conn.Close()
			} else {
				require.Error(t, err, "AMQP")
				assert.ErrorIs(t, err, amqp.ErrCredentials)
			}

			api := mgmtAPI{base: l.ManagementURL(), user: tc.user, pass: tc.pass, http: l.http}
			var who struct {
				Name string `json:"name"`
			}
			code, err := api.do(ctx, http.MethodGet, "/api/whoami", nil, &who, http.StatusOK, http.StatusUnauthorized)
			require.NoError(t, err, "management API")
			if !tc.ok {
				assert.Equal(t, http.StatusUnauthorized, code, "management API")
				return
			}
			assert.Equal(t, http.StatusOK, code, "management API")
			assert.Equal(t, l.rmqUser, who.Name)
			assert.NoError(t, api.check(ctx), "the run's user is an administrator")
			var users []struct {
				Name string `json:"name"`
			}
			_, err = api.do(ctx, http.MethodGet, "/api/users", nil, &users, http.StatusOK)
			require.NoError(t, err)
			require.Len(t, users, 1, "one user: no guest")
			assert.Equal(t, l.rmqUser, users[0].Name)
		})
	}
}

func publish(ctx context.Context, t *testing.T, ch *amqp.Channel, queue, body string) {
	t.Helper()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent,
		Body:         []byte(body),
	})
	require.NoError(t, err)
	ok, err := dc.WaitContext(ctx)
	require.NoError(t, err)
	require.True(t, ok, "publish to %s nacked", queue)
}

// testPostgresCrash crashes the server with a committed row and a
// logical slot in it, and starts it again: both are there, on the same
// address and credentials, served by a new postmaster.
func testPostgresCrash(ctx context.Context, t *testing.T, l *Local) {
	require.NoError(t, l.CreateDatabase(ctx, "crash"))
	t.Cleanup(func() { _ = l.DropDatabase(context.WithoutCancel(ctx), "crash") })
	conn, err := pgx.Connect(ctx, l.PostgresURL("crash"))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE TABLE kept (id int PRIMARY KEY); INSERT INTO kept VALUES (1)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT pg_create_logical_replication_slot('crash_slot', 'pgoutput')`)
	require.NoError(t, err)
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.WithoutCancel(ctx), l.PostgresURL("crash")); err == nil {
			_, _ = c.Exec(context.WithoutCancel(ctx), `SELECT pg_drop_replication_slot('crash_slot')`)
			_ = c.Close(context.WithoutCancel(ctx))
		}
	})
	before := l.pg.pid

	require.NoError(t, l.CrashPostgres(ctx))
	_, err = conn.Exec(ctx, `SELECT 1`)
	assert.Error(t, err, "the session died with the server")
	_ = conn.Close(ctx)
	assert.Error(t, dialOK(ctx, l.pgPort), "nothing listens while it is down")
	assert.NoError(t, l.CrashPostgres(ctx), "crashing a crashed server is fine")

	require.NoError(t, l.StartPostgres(ctx))
	assert.Error(t, l.StartPostgres(ctx), "a running server is not started twice")
	assert.NotEqual(t, before, l.pg.pid, "a new postmaster")
	conn, err = pgx.Connect(ctx, l.PostgresURL("crash"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var id int
	require.NoError(t, conn.QueryRow(ctx, `SELECT id FROM kept`).Scan(&id))
	assert.Equal(t, 1, id, "the committed row survived")
	var slots int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'crash_slot'`).Scan(&slots))
	assert.Equal(t, 1, slots, "the slot survived")
}

func testRestart(ctx context.Context, t *testing.T, l *Local) {
	oldPid := l.nodes[0].rabbit.pid
	testRestartKeepsQuorumMessage(ctx, t, l, "restart")
	assert.False(t, alive(oldPid, 0), "old node is gone")

	assert.NoError(t, l.StopBroker(ctx))
	assert.NoError(t, l.StopBroker(ctx), "stopping a stopped broker is fine")
	assert.Error(t, dialOK(ctx, l.nodes[0].amqpPort))
	assert.NoError(t, dialOK(ctx, l.nodes[0].epmdPort), "epmd survives a broker crash")
}

// testBootAgain spoils the stopped node's database (every entry replaced
// by a file of garbage, so its boot stops at once) and checks that a first
// boot starts it again from an empty one.
func testBootAgain(ctx context.Context, t *testing.T, l *Local) {
	n := l.nodes[0]
	require.False(t, n.running(), "testRestart leaves the broker stopped")
	db := filepath.Join(n.dir, "mnesia")
	entries, err := os.ReadDir(db)
	require.NoError(t, err)
	require.NotEmpty(t, entries, "the node wrote its database")
	for _, e := range entries {
		p := filepath.Join(db, e.Name())
		require.NoError(t, os.RemoveAll(p))
		require.NoError(t, os.WriteFile(p, []byte("not a database\n"), 0o644))
	}
	var log strings.Builder
	logw := l.logw
	l.logw = io.MultiWriter(logw, &log)
	t.Cleanup(func() { l.logw = logw })

	require.NoError(t, l.bootNode(ctx, n))
	assert.Contains(t, log.String(), "node "+n.name+" did not start", "the first boot failed")
	assert.Contains(t, log.String(), "node "+n.name+" starts again from an empty database")
	assert.NoError(t, l.amqpOK(ctx, n), "the node answers")
	for _, e := range entries {
		fi, err := os.Stat(filepath.Join(db, e.Name()))
		if err == nil {
			assert.False(t, fi.Mode().IsRegular() && fi.Size() == int64(len("not a database\n")), "%s still the garbage", e.Name())
		}
	}
}

func procUID(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("no Uid in /proc/%d/status", pid)
}

// TestSweepStale fakes folders left by dead and live runs, each with a
// sleeping "child", and checks which the sweep removes and whom it kills.
func TestSweepStale(t *testing.T) {
	self, err := readProc(os.Getpid())
	require.NoError(t, err)
	deadOwner := fmt.Sprintf("%d %d\n", os.Getpid(), self.start+1) // our pid, another start time: reused
	liveOwner := fmt.Sprintf("%d %d\n", os.Getpid(), self.start)

	tests := []struct {
		name      string
		owner     string // owner.pid content; "" for none
		old       bool   // folder modified two minutes ago
		keep      bool
		recorded  bool // the child's group is in a pid file (else found by its working directory)
		wantSwept bool
	}{
		{name: "dead owner, recorded child", owner: deadOwner, recorded: true, wantSwept: true},
		{name: "dead owner, child found by cwd", owner: deadOwner, wantSwept: true},
		{name: "owner pid never existed", owner: "4194304 0\n", recorded: true, wantSwept: true},
		{name: "live owner", owner: liveOwner, recorded: true},
		{name: "dead owner, KeepDir", owner: deadOwner, keep: true, recorded: true},
		{name: "no owner yet, fresh", recorded: true},
		{name: "no owner, old", old: true, recorded: true, wantSwept: true},
	}
	root, err := filepath.EvalSymlinks(t.TempDir()) // the sweep reports resolved paths
	require.NoError(t, err)
	type fake struct {
		dir  string
		cmd  *exec.Cmd
		done chan error
	}
	fakes := make([]fake, len(tests))
	for i, tc := range tests {
		dir, err := os.MkdirTemp(root, dirPattern)
		require.NoError(t, err)
		cmd := exec.Command("sleep", "300")
		cmd.Dir = dir
		if tc.recorded {
			cmd.Dir = root // not in the folder: only the pid file can find it
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-done })
		if tc.recorded {
			p, err := readProc(cmd.Process.Pid)
			require.NoError(t, err)
			require.NoError(t, writePidFile(filepath.Join(dir, "postgres.pid"), p.pid, p.start))
		}
		if tc.owner != "" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, ownerFile), []byte(tc.owner), 0o644))
		}
		if tc.keep {
			require.NoError(t, os.WriteFile(filepath.Join(dir, keepFile), nil, 0o644))
		}
		if tc.old {
			old := time.Now().Add(-2 * time.Minute)
			require.NoError(t, os.Chtimes(dir, old, old))
		}
		fakes[i] = fake{dir: dir, cmd: cmd, done: done}
	}

	removed := sweepStale(root, t.Logf)

	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fakes[i]
			if tc.wantSwept {
				assert.Contains(t, removed, f.dir)
				assert.NoDirExists(t, f.dir)
				assert.NoDirExists(t, f.dir)
				select {
				case err := <-f.done:
					f.done <- err // for the cleanup
					assert.ErrorContains(t, err, "killed")
				case <-time.After(5 * time.Second):
					t.Error("child still running")
				}
				return
			}
			assert.NotContains(t, removed, f.dir)
			assert.DirExists(t, f.dir)
			assert.True(t, alive(f.cmd.Process.Pid, 0), "child of a kept folder was killed")
		})
	}
}

// TestWaitReady checks the readiness poll: success, a child that dies
// first (fail at once, with its output), and an ending context.
func TestWaitReady(t *testing.T) {
	errNotYet := fmt.Errorf("not yet")
	tests := []struct {
		name    string
		script  string
		probe   func(context.Context) error
		timeout time.Duration
		wantErr []string // substrings; none: success
	}{
		{name: "ready", script: "sleep 30", probe: func(context.Context) error { return nil }},
		{name: "child exits first", script: "echo boom >&2; exit 3",
			probe:   func(context.Context) error { return errNotYet },
			wantErr: []string{"exited", "exit status 3", "boom"}},
		{name: "context ends", script: "echo still starting; sleep 30",
			probe: func(context.Context) error { return errNotYet }, timeout: 300 * time.Millisecond,
			wantErr: []string{"deadline exceeded", "not yet", "still starting"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c, err := spawn(dir, "svc", []string{"/bin/sh", "-c", tc.script}, os.Environ(), nil)
			require.NoError(t, err)
			defer func() { c.kill(syscall.SIGKILL); <-c.done }()
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			t0 := time.Now()
			err = waitReady(ctx, c, "svc", tc.probe)
			assert.Less(t, time.Since(t0), 5*time.Second)
			if len(tc.wantErr) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range tc.wantErr {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}

// TestKilledOwner runs StartLocal in a child test binary, SIGKILLs that
// binary (no Stop runs), and checks that the kernel took the services along
// and that the next sweep removes the folder.
func TestKilledOwner(t *testing.T) {
	if os.Getenv("FAULTLINE_INFRA_HELPER") == "1" {
		helperStartAndBlock()
		return
	}
	ctx := startsCtx(t, 2) // the child's postgres and rabbitmq
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKilledOwner$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FAULTLINE_INFRA_HELPER=1")
	cmd.Stderr = testLog{t}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	var dir string
	var pids []int
	sc := bufio.NewScanner(out)
	for (dir == "" || pids == nil) && sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "DIR":
			dir = f[1]
		case len(f) > 1 && f[0] == "PIDS":
			for _, s := range f[1:] {
				pid, err := strconv.Atoi(s)
				require.NoError(t, err)
				pids = append(pids, pid)
			}
		}
	}
	require.NotEmpty(t, dir, "helper did not start the infrastructure")
	require.NotEmpty(t, pids)

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	assert.Eventually(t, func() bool {
		for _, pid := range pids {
			if alive(pid, 0) {
				return false
			}
		}
		return true
	}, 10*time.Second, 50*time.Millisecond, "services outlived their killed owner")
	require.DirExists(t, dir, "nothing cleaned up (no Stop ran)")

	removed := sweepStale(filepath.Dir(dir), t.Logf)
	assert.Contains(t, removed, dir)
	assert.NoDirExists(t, dir)
}

// helperStartAndBlock is the child side of TestKilledOwner.
func helperStartAndBlock() {
	l, err := StartLocal(context.Background(), LocalOptions{Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var b strings.Builder
	for _, pid := range l.pids() {
		fmt.Fprintf(&b, " %d", pid)
	}
	fmt.Printf("DIR %s\nPIDS%s\n", l.Dir(), b.String())
	time.Sleep(time.Minute)
	os.Exit(2)
}

// testReplica: a replica has its own services, ports and passwords, and
// its Stop leaves the original running and nothing of its own behind.
func testReplica(ctx context.Context, t *testing.T, l *Local) {
	require.NoError(t, l.CreateVHost(ctx, "before-replica"), "the original answers")
	require.NoError(t, l.DeleteVHost(ctx, "before-replica"))
	in, err := l.Replicate(ctx)
	require.NoError(t, err)
	require.NoError(t, l.CreateVHost(ctx, "beside-replica"), "the original answers beside it")
	require.NoError(t, l.DeleteVHost(ctx, "beside-replica"))
	r := in.(*Local)
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	assert.NotEqual(t, l.Dir(), r.Dir())
	for _, p := range r.ports() {
		assert.NotContains(t, l.ports(), p, "a replica's port is its own")
	}
	assert.NotEqual(t, l.Secrets(), r.Secrets())
	require.NoError(t, r.CreateVHost(ctx, "apart"))
	_, err = l.Queue(ctx, "apart", "q")
	require.Error(t, err, "the vhost exists on the replica's broker only")
	assert.Contains(t, err.Error(), "apart")
	dir, bound := r.Dir(), r.ports()
	require.NoError(t, r.Stop(ctx))
	assert.NoDirExists(t, dir)
	for _, p := range bound {
		c, err := net.DialTimeout("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), time.Second)
		if err == nil {
			c.Close()
		}
		assert.Error(t, err, "port %d still listens", p)
	}
	require.NoError(t, l.CreateVHost(ctx, "after-replica"), "the original still answers")
	require.NoError(t, l.DeleteVHost(ctx, "after-replica"))
}
