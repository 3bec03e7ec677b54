package ports

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The allocator never hands out a port twice, nor one in the kernel's
// ephemeral range (where port-0 listeners land), nor one that is taken.
func TestPortsAreUniqueAndBelowTheEphemeralRange(t *testing.T) {
	p := New()
	defer p.Close()
	taken, err := net.Listen("tcp", Loopback(p.next))
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
	assert.Equal(t, 200, p.heldCount())
}

// Two allocators that probe the same ports first (two harnesses in one
// process, or the same pid range in two) still never share one, and a
// freed port can be reserved again.
func TestAllocatorsNeverShareAPort(t *testing.T) {
	a, b := New(), New()
	defer a.Close()
	defer b.Close()
	b.next = a.next
	pa, err := a.Port()
	require.NoError(t, err)
	pb, err := b.Port()
	require.NoError(t, err)
	assert.NotEqual(t, pa, pb)

	a.Free(pa)
	assert.Equal(t, 0, a.heldCount())
	b.next = pa
	again, err := b.Port()
	require.NoError(t, err)
	assert.Equal(t, pa, again, "a freed port is free again")
}

// A port held by Listen is never closed in between: the listener is the
// reservation's socket, and closing it ends the reservation.
func TestListenHandsOverTheBoundSocket(t *testing.T) {
	a := New()
	defer a.Close()
	ln, err := a.Listen()
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	_, err = net.Listen("tcp", Loopback(port))
	require.Error(t, err, "the port is bound while reserved")
	require.Equal(t, 1, a.heldCount())
	require.NoError(t, ln.Close())
	assert.Equal(t, 0, a.heldCount())
}

const childEnv = "FAULTLINE_PORTS_TEST_CHILD"

// A reservation holds across processes: ports another process holds are
// never handed out here, and its reservations end when it dies.
func TestReservationsHoldAcrossProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		return // run as the child below: see TestMain
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), childEnv+"=50")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	theirs := map[int]bool{}
	var first int
	for i, f := range strings.Fields(line) {
		n, err := strconv.Atoi(f)
		require.NoError(t, err)
		theirs[n] = true
		if i == 0 {
			first = n
		}
	}
	require.Len(t, theirs, 50)

	a := New()
	defer a.Close()
	a.next = first // probe exactly the child's ports first
	for range 50 {
		p, err := a.Port()
		require.NoError(t, err)
		assert.False(t, theirs[p], "port %d is held by another process", p)
	}
	a.Close()

	require.NoError(t, stdin.Close()) // the child exits
	require.NoError(t, cmd.Wait())
	b := New()
	defer b.Close()
	b.next = first
	p, err := b.Port()
	require.NoError(t, err)
	assert.Equal(t, first, p, "a dead process's reservation is gone")
}

func TestMain(m *testing.M) {
	if n, _ := strconv.Atoi(os.Getenv(childEnv)); n > 0 {
		// The child: reserve n consecutive-as-possible ports, print them,
		// and hold them until stdin closes.
		a := New()
		var out []string
		for range n {
			p, err := a.Port()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			out = append(out, strconv.Itoa(p))
		}
		fmt.Println(strings.Join(out, " "))
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}
	os.Exit(m.Run())
}
