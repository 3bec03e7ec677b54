package toxiserver

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMainRejectsABadCommandLine(t *testing.T) {
	for _, args := range [][]string{
		nil,                       // no -port
		{"-port", "http"},         // not a number
		{"-port", "1", "extra"},   // an argument
		{"-port", "1", "-config"}, // a flag it does not take
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, Main(args, &stdout, &stderr), "%q", args)
		assert.NotEmpty(t, stderr.String(), "%q", args)
		assert.Empty(t, stdout.String(), "%q", args)
	}
}

// This test binary, started with the marker, is the server: on a port that
// is taken it logs why and exits 1 without running a test.
func TestMarkerMakesTheBinaryTheServer(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	_, port, err := net.SplitHostPort(taken.Addr().String())
	require.NoError(t, err)

	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), exe, "-host", "127.0.0.1", "-port", port)
	cmd.Env = append(os.Environ(), Marker+"=1", "LOG_LEVEL=info")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, 1, exit.ExitCode(), "%s", out)
	assert.Contains(t, string(out), "Starting HTTP server on endpoint 127.0.0.1:"+port)
	assert.Contains(t, string(out), "address already in use")
	assert.NotContains(t, string(out), "PASS", "the tests ran in the server process")
}
