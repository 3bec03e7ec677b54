package infra

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/ports"
)

// echoServer answers every line with the same line until Close.
func echoServer(t *testing.T, alloc *ports.Allocator) string {
	ln, err := alloc.Listen()
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
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

// roundTrip sends a line through c and reads it back, within a second.
func roundTrip(c net.Conn, line string) error {
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if got != line+"\n" {
		return errors.New("echo mismatch: " + got)
	}
	return nil
}

// TestForwarder checks the states a forwarder goes through: forwarding,
// cut (open links dropped, new ones closed at once), restored, closed.
func TestForwarder(t *testing.T) {
	alloc := ports.New()
	t.Cleanup(alloc.Close)
	upstream := echoServer(t, alloc)
	ln, err := alloc.Listen()
	require.NoError(t, err)
	f := newForwarder(ln, upstream)
	t.Cleanup(func() { _ = f.Close() })

	dial := func(t *testing.T) net.Conn {
		c, err := net.DialTimeout("tcp4", f.Addr(), time.Second)
		require.NoError(t, err, "the listener stays bound in every state but closed")
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	open := dial(t)
	require.NoError(t, roundTrip(open, "before"), "forwards")

	steps := []struct {
		name    string
		do      func()
		cut     bool
		openOK  bool // the connection made before the cut still works
		freshOK bool // a connection made now works
	}{
		{name: "forwarding", do: func() {}, openOK: true, freshOK: true},
		{name: "cut", do: f.Cut, cut: true},
		{name: "cut twice", do: f.Cut, cut: true},
		{name: "restored", do: f.Restore, freshOK: true},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do()
			assert.Equal(t, s.cut, f.isCut())
			err := roundTrip(open, "old "+s.name)
			if s.openOK {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err, "the connection opened before the cut is gone")
				assert.False(t, isTimeout(err), "dropped at once, not stalled: %v", err)
			}
			err = roundTrip(dial(t), "new "+s.name)
			if s.freshOK {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err, "a connection made while cut is closed")
				assert.False(t, isTimeout(err), "closed at once, not stalled: %v", err)
			}
		})
	}

	addr := f.Addr()
	done := make(chan error, 1)
	go func() { done <- f.Close() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return: a goroutine of the forwarder is stuck")
	}
	c, err := net.DialTimeout("tcp4", addr, time.Second)
	if err == nil {
		_ = c.Close()
	}
	assert.Error(t, err, "nothing listens after Close")
	assert.NoError(t, f.Close(), "Close is idempotent")
}

// TestForwarderUpstreamDown: with nothing at the upstream, a client's
// connection is closed, not left hanging.
func TestForwarderUpstreamDown(t *testing.T) {
	alloc := ports.New()
	t.Cleanup(alloc.Close)
	dead, err := alloc.Port() // reserved, nothing listens on it
	require.NoError(t, err)
	ln, err := alloc.Listen()
	require.NoError(t, err)
	f := newForwarder(ln, ports.Loopback(dead))
	t.Cleanup(func() { _ = f.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", f.Addr())
	require.NoError(t, err)
	defer c.Close()
	err = roundTrip(c, "x")
	require.Error(t, err)
	assert.False(t, isTimeout(err), "closed, not stalled: %v", err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
