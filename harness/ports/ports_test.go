package ports

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The allocator never hands out a port twice, nor one in the kernel's
// ephemeral range (where port-0 listeners land), nor one that is taken.
func TestPortsAreUniqueAndBelowTheEphemeralRange(t *testing.T) {
	p := New(12345)
	taken, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.next))
	require.NoError(t, err)
	defer taken.Close()
	seen := map[string]bool{}
	for range 200 {
		addr, err := p.Addr()
		require.NoError(t, err)
		assert.False(t, seen[addr], "%s handed out twice", addr)
		seen[addr] = true
		assert.NotEqual(t, taken.Addr().String(), addr, "a taken port was handed out")
		_, port, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		n, _ := strconv.Atoi(port)
		assert.Less(t, n, p.hi)
		assert.GreaterOrEqual(t, n, p.lo)
	}
}
