package proxies

import (
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLinkPassesBytes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	upstream := echoServer(t)
	l := addLink(t, s, "s01.relay-1.amqp", upstream)

	assert.Equal(t, "s01.relay-1.amqp", l.Name())
	assert.Equal(t, upstream, l.Upstream())
	host, port, err := net.SplitHostPort(l.Addr())
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
	assert.NotEqual(t, "0", port, "Addr must be the port actually listened on")

	c := dial(t, l.Addr())
	msg := payload(64 << 10)
	assert.Equal(t, msg, roundTrip(t, c, msg))
}

func TestAddLinkRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	upstream := echoServer(t)

	for _, name := range []string{"", "a b", "relay/1", "café", "x?y"} {
		_, err := s.AddLink(t.Context(), name, upstream)
		assert.ErrorContains(t, err, "name", "name %q", name)
	}
	for _, up := range []string{"", "localhost", "127.0.0.1:"} {
		_, err := s.AddLink(t.Context(), "ok", up)
		assert.ErrorContains(t, err, "upstream must be host:port", "upstream %q", up)
	}

	addLink(t, s, "dup", upstream)
	_, err := s.AddLink(t.Context(), "dup", upstream)
	assert.ErrorContains(t, err, "add link dup")
}

func TestRemoveLinkClosesItsConnectionsAndPort(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	l := addLink(t, s, "s01.order.pg", echoServer(t))
	c := dial(t, l.Addr())
	roundTrip(t, c, []byte("hello"))

	require.NoError(t, s.RemoveLink(t.Context(), l.Name()))

	_, err := c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "established connection should be closed")
	_, err = dialErr(t, l.Addr())
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.Error(t, s.RemoveLink(t.Context(), l.Name()), "removing a missing link")
}

func TestDownDropsConnectionsAndRefusesDialsUntilUp(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	l := addLink(t, s, "s01.inventory.amqp", echoServer(t))
	c := dial(t, l.Addr())
	roundTrip(t, c, []byte("before"))

	require.NoError(t, l.Down(t.Context()))
	require.NoError(t, l.Down(t.Context()), "Down is idempotent")

	_, err := c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "established connection should be closed (FIN)")
	_, err = dialErr(t, l.Addr())
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "new dials should be refused")

	require.NoError(t, l.Up(t.Context()))
	require.NoError(t, l.Up(t.Context()), "Up is idempotent")

	c2 := dial(t, l.Addr())
	assert.Equal(t, []byte("after"), roundTrip(t, c2, []byte("after")))
}

func TestUpFailsWhileThePortIsTaken(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	l := addLink(t, s, "s01.relay-1.pg", echoServer(t))
	require.NoError(t, l.Down(t.Context()))

	squatter, err := net.Listen("tcp", l.Addr())
	require.NoError(t, err)
	err = l.Up(t.Context())
	assert.ErrorContains(t, err, "link s01.relay-1.pg up on "+l.Addr())

	require.NoError(t, squatter.Close())
	require.NoError(t, l.Up(t.Context()))
	c := dial(t, l.Addr())
	assert.Equal(t, []byte("back"), roundTrip(t, c, []byte("back")))
}

func TestLatencyDelaysData(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	l := addLink(t, s, "s01.relay-1.pg", echoServer(t))
	const latency = 150 * time.Millisecond
	a, err := l.Add(t.Context(), Latency{Latency: latency})
	require.NoError(t, err)
	assert.Equal(t, "latency_downstream_1", a.Name())
	assert.Equal(t, Latency{Latency: latency}, a.Toxic())

	c := dial(t, l.Addr())
	start := time.Now()
	roundTrip(t, c, []byte("ping"))
	assert.GreaterOrEqual(t, time.Since(start), latency)

	require.NoError(t, a.Remove(t.Context()))
	toxics, err := s.Client().Proxies()
	require.NoError(t, err)
	assert.Empty(t, toxics[l.Name()].ActiveToxics)
	assert.Error(t, a.Remove(t.Context()), "removing a removed toxic")
}

func TestLatencyOnBothStreamsAddsUpAndRemoveAllClears(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	l := addLink(t, s, "s01.relay-2.amqp", echoServer(t))
	c := dial(t, l.Addr())
	roundTrip(t, c, []byte("warm"))

	// Added to an established connection: toxics act on it too.
	_, err := l.Add(t.Context(), Latency{Latency: 100 * time.Millisecond, Stream: Upstream})
	require.NoError(t, err)
	_, err = l.Add(t.Context(), Latency{Latency: 100 * time.Millisecond, Stream: Downstream})
	require.NoError(t, err)

	start := time.Now()
	roundTrip(t, c, []byte("ping"))
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)

	require.NoError(t, l.RemoveAll(t.Context()))
	proxies, err := s.Client().Proxies()
	require.NoError(t, err)
	assert.Empty(t, proxies[l.Name()].ActiveToxics)
	assert.Equal(t, []byte("pong"), roundTrip(t, c, []byte("pong")))
}

func TestTimeoutDropsDataThenCloses(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	l := addLink(t, s, "s01.order.pg", echoServer(t))
	const timeout = 300 * time.Millisecond
	_, err := l.Add(t.Context(), Timeout{Timeout: timeout})
	require.NoError(t, err)

	c := dial(t, l.Addr())
	start := time.Now()
	_, err = c.Write([]byte("ping"))
	require.NoError(t, err)
	n, err := c.Read(make([]byte, 16))

	assert.ErrorIs(t, err, io.EOF, "connection should be closed")
	assert.Zero(t, n, "data should be dropped")
	assert.GreaterOrEqual(t, time.Since(start), timeout)
}

func TestTimeoutZeroStallsUntilRemovedThenCloses(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	l := addLink(t, s, "s01.order.pg", echoServer(t))
	a, err := l.Add(t.Context(), Timeout{})
	require.NoError(t, err)

	c := dial(t, l.Addr())
	_, err = c.Write([]byte("ping"))
	require.NoError(t, err)
	// A stall is the absence of an event: look for one for a while.
	require.NoError(t, c.SetReadDeadline(time.Now().Add(500*time.Millisecond)))
	_, err = c.Read(make([]byte, 16))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "connection should stall, neither data nor close")

	require.NoError(t, c.SetReadDeadline(time.Now().Add(guard)))
	require.NoError(t, a.Remove(t.Context()))
	n, err := c.Read(make([]byte, 16))
	assert.ErrorIs(t, err, io.EOF, "removing the timeout toxic closes the connection")
	assert.Zero(t, n)
}

func TestResetPeerResetsNewConnections(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	l := addLink(t, s, "s01.inventory.pg", echoServer(t))
	const timeout = 200 * time.Millisecond
	_, err := l.Add(t.Context(), ResetPeer{Timeout: timeout})
	require.NoError(t, err)

	c := dial(t, l.Addr())
	start := time.Now()
	_, err = c.Write([]byte("ping"))
	require.NoError(t, err)
	_, err = io.ReadAll(c)

	assert.ErrorIs(t, err, syscall.ECONNRESET)
	assert.GreaterOrEqual(t, time.Since(start), timeout)
}

func TestResetPeerOnEstablishedConnectionOnlyCloses(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	l := addLink(t, s, "s01.inventory.pg", echoServer(t))
	c := dial(t, l.Addr())
	roundTrip(t, c, []byte("warm"))

	_, err := l.Add(t.Context(), ResetPeer{})
	require.NoError(t, err)
	_, err = c.Write([]byte("ping"))
	require.NoError(t, err)
	_, err = io.ReadAll(c)

	// toxiproxy v2.5.0 sets SO_LINGER 0 only when a connection starts.
	assert.NoError(t, err, "an older connection gets a FIN, not a reset")
}

func TestLimitDataClosesAfterBytes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	l := addLink(t, s, "s01.relay-1.amqp", echoServer(t))
	_, err := l.Add(t.Context(), LimitData{Bytes: 10})
	require.NoError(t, err)

	c := dial(t, l.Addr())
	msg := payload(100)
	_, err = c.Write(msg)
	require.NoError(t, err)
	got, err := io.ReadAll(c)

	require.NoError(t, err, "connection should be closed after the limit")
	assert.Equal(t, msg[:10], got)
}

func TestBandwidthSlowsData(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	l := addLink(t, s, "s01.relay-1.amqp", echoServer(t))
	_, err := l.Add(t.Context(), Bandwidth{RateKBps: 100})
	require.NoError(t, err)

	c := dial(t, l.Addr())
	msg := payload(50_000) // 500 ms at 100 KB/s
	start := time.Now()
	assert.Equal(t, msg, roundTrip(t, c, msg))
	assert.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond)
}

func TestSlicerKeepsBytesAndDelaysSlices(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	l := addLink(t, s, "s01.relay-1.amqp", echoServer(t))
	_, err := l.Add(t.Context(), Slicer{AverageSize: 16, SizeVariation: 4, Delay: time.Millisecond})
	require.NoError(t, err)

	c := dial(t, l.Addr())
	msg := payload(4096)
	start := time.Now()
	assert.Equal(t, msg, roundTrip(t, c, msg))
	// Slices are at most 20 bytes, each followed by a 1 ms delay.
	assert.GreaterOrEqual(t, time.Since(start), 204*time.Millisecond)
}

func TestAddRejectsInvalidToxic(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	l := addLink(t, s, "s01.order.pg", echoServer(t))

	_, err := l.Add(t.Context(), Latency{Latency: -time.Second})
	assert.ErrorContains(t, err, "invalid latency toxic: latency must not be negative")
	_, err = l.Add(t.Context(), nil)
	assert.ErrorContains(t, err, "toxic is nil")

	proxies, err := s.Client().Proxies()
	require.NoError(t, err)
	assert.Empty(t, proxies[l.Name()].ActiveToxics)
}
