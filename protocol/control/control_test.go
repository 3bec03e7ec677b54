package control_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/protocol/control"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

func TestRequireLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		wantErr string // empty: allowed
	}{
		{addr: "127.0.0.1:0"},
		{addr: "127.0.0.1:8080"},
		{addr: "127.1.2.3:9"},
		{addr: "[::1]:0"},
		{addr: "localhost:0"},
		{addr: "0.0.0.0:80", wantErr: "only loopback"},
		{addr: "10.0.0.1:1", wantErr: "only loopback"},
		{addr: "[::]:80", wantErr: "only loopback"},
		{addr: ":8080", wantErr: "only loopback"},
		{addr: "example.com:80", wantErr: "only loopback"},
		{addr: "localhost.evil.example:80", wantErr: "only loopback"},
		{addr: "garbage", wantErr: `listen address "garbage"`},
		{addr: "127.0.0.1", wantErr: "missing port"},
		{addr: "", wantErr: "missing port"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			err := control.RequireLoopback(tc.addr)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// waitFor polls cond every 10ms until it holds or the bound passes.
func waitFor(t *testing.T, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", bound, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestServe(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "control.jsonl")
	log, err := eventlog.Open(logPath, "relay-1")
	require.NoError(t, err)
	t.Cleanup(func() { _ = log.Close() })
	points := crashpoint.NewSet("relay", log, "relay.after-claim", "relay.after-confirm")

	var failing atomic.Pointer[error]
	health := func(ctx context.Context) error {
		if e := failing.Load(); e != nil {
			return *e
		}
		return nil
	}
	extra := map[string]http.Handler{
		"GET /admin/ping": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "pong") }),
	}

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := control.Serve(ctx, "127.0.0.1:0", log, points, health, extra)
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
	assert.NotEqual(t, "0", port, "the bound port, not the requested one")

	// The bound address is in the event log as a control line.
	es, err := eventlog.ReadFile(logPath)
	require.NoError(t, err)
	var logged []string
	for _, e := range es {
		if e.Event == eventlog.Control {
			logged = append(logged, e.Detail)
			assert.Equal(t, "relay-1", e.Process)
		}
	}
	assert.Equal(t, []string{addr}, logged)

	base := "http://" + addr
	code, body := get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)

	bad := errors.New("database is gone")
	failing.Store(&bad)
	code, body = get(t, base+"/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "unhealthy: database is gone")
	failing.Store(nil)
	code, _ = get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code, "healthy again")

	// Crash points and extra handlers are mounted.
	code, body = get(t, base+"/crashpoints")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "relay.after-confirm")
	code, body = get(t, base+"/admin/ping")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "pong", body)
	code, _ = get(t, base+"/nothing-here")
	assert.Equal(t, http.StatusNotFound, code)

	// When ctx ends the server stops and the port is free again.
	cancel()
	waitFree(t, addr)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/healthz", nil)
	require.NoError(t, err)
	_, err = http.DefaultClient.Do(req)
	assert.Error(t, err, "nothing answers after ctx ended")
}

// waitFree waits until addr can be listened on again: the server is gone.
func waitFree(t *testing.T, addr string) {
	t.Helper()
	waitFor(t, "the control port "+addr+" to be free", 5*time.Second, func() bool {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		_ = ln.Close()
		return true
	})
}

func TestServeHealthNil(t *testing.T) {
	log := eventlog.New(io.Discard, "order")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := control.Serve(ctx, "127.0.0.1:0", log, crashpoint.NewSet("order", log, "order.after-commit"), nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); waitFree(t, addr) })
	code, body := get(t, "http://"+addr+"/healthz")
	assert.Equal(t, http.StatusOK, code, "no health func: healthy")
	assert.Equal(t, "ok\n", body)
}

func TestServeRefuses(t *testing.T) {
	log := eventlog.New(io.Discard, "order")
	points := crashpoint.NewSet("order", log, "order.after-commit")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	_, err := control.Serve(ctx, "0.0.0.0:0", log, points, nil, nil)
	assert.ErrorContains(t, err, "only loopback", "never listens beyond loopback")

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = busy.Close() })
	_, err = control.Serve(ctx, busy.Addr().String(), log, points, nil, nil)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "control listen "+busy.Addr().String()), "%v", err)
}
