package proxies

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serverBin is the Toxiproxy server StartServer runs in these tests: this
// test binary, which links package toxiserver through package proxies.
var serverBin string

func TestMain(m *testing.M) {
	bin, err := SelfServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serverBin = bin
	os.Exit(m.Run())
}

// guard bounds every blocking network step of a test, so that a broken
// proxy fails the test instead of hanging it. It is never what a test waits
// for.
const guard = 10 * time.Second

func startServer(t *testing.T) *Server {
	t.Helper()
	s, err := StartServer(t.Context(), serverBin, t.Output())
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, s.Stop())
	})
	return s
}

func addLink(t *testing.T, s *Server, name, upstream string) *Link {
	t.Helper()
	l, err := s.AddLink(t.Context(), name, upstream)
	require.NoError(t, err)
	return l
}

// echoServer starts a TCP server on 127.0.0.1 that echoes what it reads and
// returns its address.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
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

// dial connects to addr with every later read and write bounded by guard.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := dialErr(t, addr)
	require.NoError(t, err)
	return c
}

func dialErr(t *testing.T, addr string) (net.Conn, error) {
	t.Helper()
	d := net.Dialer{Timeout: guard}
	c, err := d.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(guard)))
	return c, nil
}

// roundTrip writes msg and reads back as many bytes.
func roundTrip(t *testing.T, c net.Conn, msg []byte) []byte {
	t.Helper()
	_, err := c.Write(msg)
	require.NoError(t, err)
	got := make([]byte, len(msg))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	return got
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}
