package proxies

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStartServerAnswersOnLoopback(t *testing.T) {
	t.Parallel()
	s := startServer(t)

	host, port, err := net.SplitHostPort(s.APIAddr())
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
	assert.NotEqual(t, "0", port)

	proxies, err := s.Client().Proxies()
	require.NoError(t, err)
	assert.Empty(t, proxies)
}

func TestStopLeavesNoProcess(t *testing.T) {
	t.Parallel()
	s, err := StartServer(t.Context(), serverBin, t.Output())
	require.NoError(t, err)
	pid := s.cmd.Process.Pid
	require.NoError(t, syscall.Kill(pid, 0), "server process should be running")

	require.NoError(t, s.Stop())

	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "server process should be gone")
	_, err = s.Client().Proxies()
	assert.Error(t, err, "API should be gone")
	assert.NoError(t, s.Stop(), "Stop should be idempotent")
}

func TestStopReportsServerThatExitedOnItsOwn(t *testing.T) {
	t.Parallel()
	s, err := StartServer(t.Context(), serverBin, t.Output())
	require.NoError(t, err)

	require.NoError(t, syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL))
	<-s.exited

	err = s.Stop()
	assert.ErrorContains(t, err, "already exited")
}

func TestStartServerFailsForMissingBinary(t *testing.T) {
	t.Parallel()
	_, err := StartServer(t.Context(), filepath.Join(t.TempDir(), "nope"), nil)
	assert.ErrorContains(t, err, "start toxiproxy server")
}

func TestCanceledContextStopsCallsBeforeTheyStart(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, err := s.AddLink(ctx, "canceled", echoServer(t))
	assert.ErrorIs(t, err, context.Canceled)

	proxies, err := s.Client().Proxies()
	require.NoError(t, err)
	assert.Empty(t, proxies, "a canceled call must not reach the server")

	_, err = StartServer(ctx, serverBin, nil)
	assert.ErrorIs(t, err, context.Canceled)
}

// helperEnv, when set to 1, makes the test binary a child for
// TestServerDiesWithItsParent.
const helperEnv = "FAULTLINE_PROXIES_HELPER"

func TestServerDiesWithItsParent(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	child := exec.CommandContext(t.Context(), exe, "-test.run=^TestHelperStartServerAndBlock$", "-test.count=1")
	child.Env = append(os.Environ(), helperEnv+"=1")
	child.Stderr = t.Output()
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	pid := readServerPID(t, out)
	require.True(t, processAlive(t, pid), "server should run while its parent does")

	require.NoError(t, child.Process.Kill())
	_ = child.Wait()

	deadline := time.Now().Add(guard)
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	for processAlive(t, pid) {
		require.True(t, time.Now().Before(deadline), "server %d outlived its parent", pid)
		<-ticker.C
	}
}

// TestHelperStartServerAndBlock is the child of TestServerDiesWithItsParent:
// it starts a server, prints its pid and blocks until killed.
func TestHelperStartServerAndBlock(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper process for TestServerDiesWithItsParent")
	}
	s := startServer(t)
	fmt.Printf("server-pid %d\n", s.cmd.Process.Pid)
	<-t.Context().Done()
}

func readServerPID(t *testing.T, out io.Reader) int {
	t.Helper()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "server-pid "); ok {
			pid, err := strconv.Atoi(rest)
			require.NoError(t, err)
			return pid
		}
	}
	require.FailNow(t, "child did not print the server pid", "scan error: %v", sc.Err())
	return 0
}

// processAlive reports whether pid exists and is not a zombie (an orphaned
// zombie waits for whoever reaps orphans here; it is dead all the same).
func processAlive(t *testing.T, pid int) bool {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return false
	}
	require.NoError(t, err)
	// Format: pid (comm) state ...; comm may hold spaces and parentheses.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	require.NotEmpty(t, fields)
	return fields[0] != "Z" && fields[0] != "X"
}

// A request the server closed its connection under (Toxiproxy's API closes
// a kept-alive connection idle for 10 s; a POST sent on it then fails with
// EOF) is sent once more; other errors are returned as they are.
func TestCallSendsAgainARequestItsConnectionWasClosedUnder(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // no answer: the client reads EOF
			}
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	post := func() (int, error) {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader("{}"))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	code, err := call(t.Context(), post)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, code)
	assert.Equal(t, int32(2), requests.Load(), "sent twice: once closed under it, once answered")

	tests := []struct {
		name string
		err  error
	}{
		{"an EOF decoding an answer", io.EOF},
		{"an error of the API", errors.New("CreateProxy: HTTP 409: proxy already exists")},
		{"a refused connection", &url.Error{Op: "Post", URL: srv.URL, Err: syscall.ECONNREFUSED}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			_, err := call(t.Context(), func() (struct{}, error) { calls++; return struct{}{}, tc.err })
			assert.ErrorIs(t, err, tc.err)
			assert.Equal(t, 1, calls, "not sent again")
		})
	}
}
