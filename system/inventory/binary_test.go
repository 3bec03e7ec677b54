package inventory_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/crashpoint"
)

// buildBinary builds system/cmd/inventory into a temporary folder.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "inventory")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/faultline-dev/faultline/system/cmd/inventory").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

func TestBadFlagsExitTwo(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	ok := []string{"--db-url", "postgres://postgres@127.0.0.1:1/x?sslmode=disable", "--amqp-url", "amqp://guest:guest@127.0.0.1:1/"}
	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"prefetch 1", append([]string{"--prefetch", "1"}, ok...), nil, "--prefetch must be > 1"},
		{"negative retention", append([]string{"--inbox-retention", "-1h"}, ok...), nil, "--inbox-retention must not be negative"},
		{"db url not a URL", []string{"--db-url", "not a url", "--amqp-url", ok[3]}, nil, "--db-url: not a PostgreSQL URL"},
		{"amqp url not a URL", []string{"--db-url", ok[1], "--amqp-url", "http://example"}, nil, "--amqp-url: not an AMQP URL"},
		{"missing urls", nil, nil, "--db-url is required"},
		{"amqp urls bad entry", []string{"--db-url", ok[1], "--amqp-urls", ok[3] + ",http://example"}, nil, "--amqp-urls: address 2 is not an AMQP URL"},
		{"heartbeat 0", append([]string{"--amqp-heartbeat", "0s"}, ok...), nil, "--amqp-heartbeat must be > 0"},
		{"tx-batch 0", append([]string{"--tx-batch", "0"}, ok...), nil, "--tx-batch must be >= 1"},
		{"control not loopback", append([]string{"--control-addr", "0.0.0.0:0"}, ok...), nil, "only loopback"},
		{"not a duration", append([]string{"--cleanup-interval", "soon"}, ok...), nil, "invalid value"},
		{"bad env value", ok, []string{"INVENTORY_PREFETCH=many"}, "INVENTORY_PREFETCH"},
		{"unknown flag", append([]string{"--no-such-flag"}, ok...), nil, "no-such-flag"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), bin, tc.args...)
			cmd.Env = append(os.Environ(), tc.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "want an exit status, got %v", err)
			assert.Equal(t, 2, exit.ExitCode(), stderr.String())
			assert.Contains(t, stderr.String(), tc.want)
		})
	}
	t.Run("help", func(t *testing.T) {
		t.Parallel()
		out, err := exec.CommandContext(t.Context(), bin, "--help").CombinedOutput()
		require.NoError(t, err, "--help exits 0")
		for _, flag := range []string{"db-url", "amqp-url", "amqp-urls", "amqp-heartbeat", "instance", "consumer-name", "prefetch", "tx-batch", "inbox-retention",
			"cleanup-interval", "queue-max-length", "event-log", "control-addr", "reconnect-max", "INVENTORY_"} {
			assert.Contains(t, string(out), flag)
		}
	})
}

// A real SIGKILL at each crash point of the consumer: after restart the
// broker redelivers, and the event takes effect exactly once. SIGTERM then
// stops the process cleanly.
func TestCrashPointsAsProcess(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	cases := []struct {
		point     string
		committed bool // the crash came after the commit: the redelivery is a duplicate
	}{
		{crashpoint.InventoryAfterReceive, false},
		{crashpoint.InventoryAfterCommit, true},
	}
	for _, tc := range cases {
		t.Run(tc.point, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			start := func(arming string) *exec.Cmd { return e.startBinary(bin, crashpoint.EnvVar+"="+arming) }

			first := start(tc.point + "=kill@1")
			e.waitConnected(1)
			e.publish(event("evt-crash", "order-1", 1))
			status := waitExit(t, first)
			require.Equal(t, syscall.SIGKILL, status.Signal(), "killed by the crash point")
			es := e.events()
			require.Equal(t, 1, count(es, eventlog.CrashPoint, ""))
			assert.Equal(t, 0, count(es, eventlog.Acked, "evt-crash"), "the crash came before the ack")
			assert.Equal(t, boolInt(tc.committed), count(es, eventlog.Reserved, "evt-crash"))

			second := start("")
			e.waitConnected(2)
			es = e.waitCount(eventlog.Acked, "evt-crash", 1)
			e.waitDrained()
			assert.Equal(t, []string{"evt-crash"}, e.reservations(), "exactly one reservation")
			var redelivered []eventlog.Entry
			for _, x := range es {
				if x.Event == eventlog.Delivered && x.Redelivered {
					redelivered = append(redelivered, x)
				}
			}
			assert.Len(t, redelivered, 1, "the broker redelivered it")
			assert.Equal(t, boolInt(tc.committed), count(es, eventlog.Duplicate, "evt-crash"), "absorbed by the inbox")

			require.NoError(t, second.Process.Signal(syscall.SIGTERM))
			status = waitExit(t, second)
			assert.Equal(t, 0, status.ExitStatus(), "SIGTERM is a clean exit")
		})
	}
}

func waitExit(t *testing.T, cmd *exec.Cmd) syscall.WaitStatus {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("process %d did not exit within %s", cmd.Process.Pid, waitTimeout)
	}
	return cmd.ProcessState.Sys().(syscall.WaitStatus)
}

// startBinary runs the inventory binary on the test's database, vhost and
// event log (one worker, short reconnects) with extra environment, and
// kills it when the test ends; a failed test shows its stderr.
func (e *env) startBinary(bin string, extraEnv ...string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(append(os.Environ(),
		"INVENTORY_DB_URL="+e.dbURL(), "INVENTORY_AMQP_URL="+e.amqpURL(),
		"INVENTORY_EVENT_LOG="+e.logPath, "INVENTORY_RECONNECT_MAX=200ms", "INVENTORY_WORKERS=1"), extraEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(e.t, cmd.Start())
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if e.t.Failed() {
			e.t.Logf("stderr of pid %d:\n%s", cmd.Process.Pid, stderr.String())
		}
	})
	return cmd
}

// waitConnected waits until the log holds n AMQP connections of the consumer.
func (e *env) waitConnected(n int) {
	e.t.Helper()
	e.waitFor("consumer connected", func(es []eventlog.Entry) bool { return countAMQPConnected(es) >= n })
}

func countAMQPConnected(es []eventlog.Entry) int {
	n := 0
	for _, x := range es {
		if x.Event == eventlog.Connected && strings.HasPrefix(x.Detail, "amqp") {
			n++
		}
	}
	return n
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
