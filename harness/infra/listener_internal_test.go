package infra

import (
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A port still listening after Stop is a leak only if the listener is ours.
func TestListenerPidFindsTheOwner(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	pid, ok := listenerPid(port)
	require.True(t, ok)
	assert.Equal(t, os.Getpid(), pid)

	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.NoError(t, checkPortsClosed([]int{port}, t.TempDir()), "someone else's listener, not a leak")
	assert.ErrorContains(t, checkPortsClosed([]int{port}, wd), "still listen after stop", "a listener working in the folder is ours")
}
