package proxies

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closedAddr returns an address on 127.0.0.1 nothing listens on for the
// rest of the test: a socket bound to the port and never listening holds
// it, so a connection there is refused at once. A port listened on and
// closed again can be taken by another process of a busy `make test`
// meanwhile; a dial then connects and waits for data that never comes (seen:
// an i/o timeout after 10 s).
func closedAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// dialUnreachable dials a link whose upstream is down and reads until the
// server closes the connection, which it does after logging that it could
// not reach the upstream (as during a broker restart).
func dialUnreachable(t *testing.T, s *Server, name string) {
	t.Helper()
	l := addLink(t, s, name, closedAddr(t))
	c := dial(t, l.Addr())
	_, err := io.ReadAll(c)
	require.NoError(t, err)
}

func logLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []map[string]any
	for line := range strings.Lines(string(data)) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "not a JSON line: %q", line)
		out = append(out, m)
	}
	return out
}

func messages(lines []map[string]any) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l["level"].(string)+": "+l["message"].(string))
	}
	return out
}

func TestServerLogGoesToItsFileWithErrorsOnly(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "toxiproxy.log")
	var notes bytes.Buffer
	s, err := StartServer(t.Context(), serverBin, &notes, WithLogFile(path))
	require.NoError(t, err)
	dialUnreachable(t, s, "unreachable")
	require.NoError(t, s.Stop()) // the file is complete once the server is gone

	lines := logLines(t, path)
	assert.Equal(t, []string{"error: Unable to open connection to upstream"}, messages(lines),
		"errors are kept, the info lines (Started proxy, Accepted client) are not")
	assert.Empty(t, notes.String(), "nothing of the server's goes to log")
}

func TestServerLogLevelCanBeRaised(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "toxiproxy.log")
	s, err := StartServer(t.Context(), serverBin, nil, WithLogFile(path), WithLogLevel("info"))
	require.NoError(t, err)
	dialUnreachable(t, s, "unreachable")
	require.NoError(t, s.Stop())

	got := messages(logLines(t, path))
	assert.Contains(t, got, "info: Started proxy")
	assert.Contains(t, got, "info: Accepted client")
	assert.Contains(t, got, "error: Unable to open connection to upstream")
}

func TestServerWithoutLogFileWritesNowhere(t *testing.T) {
	t.Parallel()
	var notes bytes.Buffer
	s, err := StartServer(t.Context(), serverBin, &notes, WithLogLevel("info"))
	require.NoError(t, err)
	dialUnreachable(t, s, "unreachable")
	require.NoError(t, s.Stop())
	assert.Empty(t, notes.String())
}

func TestServerLogFileIsAppendedTo(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "toxiproxy.log")
	require.NoError(t, os.WriteFile(path, []byte(`{"level":"error","message":"before"}`+"\n"), 0o644))
	s, err := StartServer(t.Context(), serverBin, nil, WithLogFile(path))
	require.NoError(t, err)
	dialUnreachable(t, s, "unreachable")
	require.NoError(t, s.Stop())
	assert.Equal(t, []string{"error: before", "error: Unable to open connection to upstream"}, messages(logLines(t, path)))
}

func TestStartServerRejectsUnknownLogLevel(t *testing.T) {
	t.Parallel()
	_, err := StartServer(t.Context(), serverBin, nil, WithLogLevel("loud"))
	assert.ErrorContains(t, err, `log level "loud"`)
}

func TestStartServerFailsForUnwritableLogFile(t *testing.T) {
	t.Parallel()
	_, err := StartServer(t.Context(), serverBin, nil, WithLogFile(filepath.Join(t.TempDir(), "no", "such", "dir", "x.log")))
	assert.ErrorContains(t, err, "log file")
}

// A server that exits at once: its output is in the file and in the error,
// and log is told of each attempt made again.
func TestEarlyExitKeepsTheServerOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-server")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho listen: address already in use >&2\nexit 3\n"), 0o755))
	path := filepath.Join(dir, "toxiproxy.log")
	var notes bytes.Buffer

	_, err := StartServer(t.Context(), bin, &notes, WithLogFile(path))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exited before its API answered: exit status 3; its last output: listen: address already in use")

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("listen: address already in use\n", startAttempts), string(data))
	assert.Equal(t, startAttempts-1, strings.Count(notes.String(), "starting it again on another port\n"), notes.String())
}

func TestTailKeepsTheLastBytes(t *testing.T) {
	var tl tail
	for range 1000 {
		_, _ = tl.Write([]byte("0123456789\n"))
	}
	_, _ = tl.Write([]byte("last line\n"))
	got := tl.String()
	assert.True(t, strings.HasSuffix(got, "0123456789 | last line"), got)
	assert.LessOrEqual(t, len(got), tailSize*2)
}
