package infra

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"faultline/harness/ports"
)

// testLog sends progress lines to the test log.
type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestLocal starts one local infrastructure and runs everything against it
// in order (the broker restart last), then checks that Stop leaves nothing.
func TestLocal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	l, err := StartLocal(ctx, LocalOptions{Log: testLog{t}, KeepDir: os.Getenv("FL_KEEP") != ""})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Stop(context.Background()) })

	assert.Equal(t, "local", l.Name())
	assert.True(t, l.CanRestartBroker())
	assert.Equal(t, "127.0.0.1:"+strconv.Itoa(l.pgPort), l.PostgresAddr())
	assert.Equal(t, "postgres://postgres@"+l.PostgresAddr()+"/orders?sslmode=disable", l.PostgresURL("orders"))
	assert.Equal(t, "amqp://guest:guest@"+l.AMQPAddr()+"/%2F", l.AMQPURL("/"))
	assert.Equal(t, "amqp://guest:guest@"+l.AMQPAddr()+"/s-1", l.AMQPURL("s-1"))

	testContract(ctx, t, l, "loc")
	t.Run("restart keeps quorum message", func(t *testing.T) { testRestart(ctx, t, l) })

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

func testRestart(ctx context.Context, t *testing.T, l *Local) {
	oldPid := l.rabbit.pid
	testRestartKeepsQuorumMessage(ctx, t, l, "restart")
	assert.False(t, alive(oldPid, 0), "old node is gone")

	assert.NoError(t, l.StopBroker(ctx))
	assert.NoError(t, l.StopBroker(ctx), "stopping a stopped broker is fine")
	assert.Error(t, dialOK(ctx, l.amqpPort))
	assert.NoError(t, dialOK(ctx, l.epmdPort), "epmd survives a broker crash")
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
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
