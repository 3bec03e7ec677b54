package proxies

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/ports"
)

// publishedPorts stands in for a container's published ports: for each of
// n free ports P it listens on another free port Q and forwards every
// connection to 127.0.0.1:P, as Docker's port publishing does. It returns
// the mappings P → 127.0.0.1:Q.
func publishedPorts(t *testing.T, n int) []PortMapping {
	t.Helper()
	alloc := ports.New() // the server binds the inner ports: reserved, not picked free and closed
	t.Cleanup(alloc.Close)
	var out []PortMapping
	for range n {
		port, err := alloc.Port()
		require.NoError(t, err)
		outer := forwarder(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		out = append(out, PortMapping{Port: port, Addr: outer})
	}
	return out
}

// forwarder listens on a free loopback port and copies each connection
// to and from target.
func forwarder(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			wg.Go(func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				track(up)
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); _ = up.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, up)
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func TestRemoteServerHandsOutPoolPortsAndTheirHostAddresses(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ports := publishedPorts(t, 2)
	r, err := NewRemoteServer(t.Context(), s.APIAddr(), "127.0.0.1", ports)
	require.NoError(t, err)
	assert.Equal(t, 2, r.freePortCount())
	upstream := echoServer(t)

	a, err := r.AddLink(t.Context(), "s01.order.pg", upstream)
	require.NoError(t, err)
	assert.Equal(t, ports[0].Addr, a.Addr(), "the link's address is the host side of its port")
	assert.Equal(t, upstream, a.Upstream())
	all, err := s.Client().Proxies()
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:"+strconv.Itoa(ports[0].Port), all["s01.order.pg"].Listen, "the server listens on the pool port")

	c := dial(t, a.Addr())
	msg := payload(32 << 10)
	assert.Equal(t, msg, roundTrip(t, c, msg))

	_, err = r.AddLink(t.Context(), "s01.order.pg", upstream)
	assert.ErrorContains(t, err, "exists already")
	assert.Equal(t, 1, r.freePortCount(), "a refused link takes no port")

	b, err := r.AddLink(t.Context(), "s01.relay-1.pg", upstream)
	require.NoError(t, err)
	assert.Equal(t, ports[1].Addr, b.Addr())

	_, err = r.AddLink(t.Context(), "s01.relay-2.pg", upstream)
	require.ErrorIs(t, err, ErrNoFreePort)
	assert.ErrorContains(t, err, "all 2 ports")

	require.NoError(t, r.RemoveLink(t.Context(), a.Name()))
	assert.Equal(t, 1, r.freePortCount())
	c2, err := r.AddLink(t.Context(), "s01.relay-2.pg", upstream)
	require.NoError(t, err, "a removed link's port is free again")
	assert.Equal(t, ports[0].Addr, c2.Addr())
	conn := dial(t, c2.Addr())
	assert.Equal(t, []byte("again"), roundTrip(t, conn, []byte("again")))

	require.Error(t, r.RemoveLink(t.Context(), "missing"))
	assert.Equal(t, 0, r.freePortCount(), "removing a missing link frees nothing")
}

func TestRemoteLinkDownAndToxicsWork(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	r, err := NewRemoteServer(t.Context(), s.APIAddr(), "127.0.0.1", publishedPorts(t, 1))
	require.NoError(t, err)
	l, err := r.AddLink(t.Context(), "s01.inventory.amqp", echoServer(t))
	require.NoError(t, err)

	c := dial(t, l.Addr())
	roundTrip(t, c, []byte("before"))
	require.NoError(t, l.Down(t.Context()))
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "established connection should be closed")
	require.NoError(t, l.Up(t.Context()))

	a, err := l.Add(t.Context(), Latency{Latency: 50 * time.Microsecond})
	assert.Nil(t, a)
	assert.ErrorContains(t, err, "whole number of milliseconds")
	_, err = l.Add(t.Context(), Bandwidth{RateKBps: 1000})
	require.NoError(t, err)
	c2 := dial(t, l.Addr())
	assert.Equal(t, []byte("after"), roundTrip(t, c2, []byte("after")))
	require.NoError(t, l.RemoveAll(t.Context()))
}

func TestNewRemoteServerRejectsBadInput(t *testing.T) {
	t.Parallel()
	ok := []PortMapping{{Port: 8666, Addr: "localhost:32768"}}
	cases := []struct {
		api, host string
		ports     []PortMapping
		want      string
	}{
		{"localhost", "0.0.0.0", ok, "must be host:port"},
		{"localhost:8474", "", ok, "empty listen host"},
		{"localhost:8474", "0.0.0.0", nil, "no ports"},
		{"localhost:8474", "0.0.0.0", []PortMapping{{Port: 0, Addr: "h:1"}}, "out of range"},
		{"localhost:8474", "0.0.0.0", []PortMapping{{Port: 8666, Addr: "h:1"}, {Port: 8666, Addr: "h:2"}}, "given twice"},
		{"localhost:8474", "0.0.0.0", []PortMapping{{Port: 8666, Addr: "h"}}, "must be host:port"},
	}
	for _, c := range cases {
		_, err := NewRemoteServer(t.Context(), c.api, c.host, c.ports)
		assert.ErrorContains(t, err, c.want, "%+v", c)
	}
}

func TestNewRemoteServerGivesUpWhenNoAPIAnswers(t *testing.T) {
	t.Parallel()
	alloc := ports.New() // reserved: nothing of faultline's listens there
	defer alloc.Close()
	addr, err := alloc.Addr()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = NewRemoteServer(ctx, addr, "0.0.0.0", []PortMapping{{Port: 8666, Addr: "127.0.0.1:1"}})
	assert.ErrorContains(t, err, "wait for API")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestUnavailableIsToxiproxys503(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("Delete: HTTP 503: Service Unavailable"), true},
		{errors.New("Delete: HTTP 404: proxy not found"), false},
		{errors.New("dial tcp 127.0.0.1:8474: connect: connection refused"), false},
	} {
		assert.Equal(t, tc.want, unavailable(tc.err), tc.err.Error())
	}
}
