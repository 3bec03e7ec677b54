package infra

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// forwarder is a loopback TCP forwarder that can be cut: the link a local
// standby's WAL receiver reaches its primary through, so that
// HoldReplication can take the replication connection away and
// ReleaseReplication give it back, without touching either server.
//
// What holds:
//   - While cut, no byte passes: Cut closes every open connection (both
//     ends), and a connection accepted while cut is closed at once, so a
//     client sees its link drop and each retry fail.
//   - The listener stays bound while cut (a refused port could be taken by
//     another program, and the client would then reach it instead).
//   - Close stops listening, closes every connection and returns once every
//     goroutine of the forwarder has ended.
//
// Safe for concurrent use.
type forwarder struct {
	ln       net.Listener
	upstream string
	ctx      context.Context // ends at Close: bounds the dials to upstream
	cancel   context.CancelFunc

	mu     sync.Mutex // guards the fields below
	cut    bool
	closed bool
	conns  map[net.Conn]struct{} // open connections, both the accepted and the dialled ends

	wg sync.WaitGroup // the accept loop and every connection's copiers
}

// forwardDialTimeout bounds one dial to the upstream.
const forwardDialTimeout = 2 * time.Second

// newForwarder forwards the connections ln accepts to upstream (host:port)
// until Close; it owns ln.
func newForwarder(ln net.Listener, upstream string) *forwarder {
	ctx, cancel := context.WithCancel(context.Background())
	f := &forwarder{ln: ln, upstream: upstream, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f
}

// SetUpstream sends the next connections to upstream and closes the open
// ones (the server behind them is another one now).
func (f *forwarder) SetUpstream(upstream string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upstream = upstream
	f.closeConnsLocked()
}

// target is where the next connection goes.
func (f *forwarder) target() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.upstream
}

// Addr is the host:port the forwarder listens on.
func (f *forwarder) Addr() string { return f.ln.Addr().String() }

// Cut closes every open connection and refuses the next ones until Restore.
func (f *forwarder) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = true
	f.closeConnsLocked()
}

// Restore forwards new connections again.
func (f *forwarder) Restore() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = false
}

// isCut reports whether the forwarder is cut.
func (f *forwarder) isCut() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cut
}

// Close stops listening, closes every connection and waits for the
// forwarder's goroutines. A second Close does nothing.
func (f *forwarder) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.closeConnsLocked()
	f.mu.Unlock()
	f.cancel()
	err := f.ln.Close()
	f.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("forwarder %s: close: %w", f.Addr(), err)
	}
	return nil
}

func (f *forwarder) closeConnsLocked() {
	for c := range f.conns {
		_ = c.Close()
	}
	clear(f.conns)
}

// track registers conns as open, unless the forwarder is cut or closed:
// then it closes them and returns false.
func (f *forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut || f.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarder) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
		delete(f.conns, c)
	}
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		down, err := f.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (out of descriptors, say): go on after a
			// moment rather than spin, unless the forwarder is closing.
			select {
			case <-f.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if !f.track(down) {
			continue
		}
		f.wg.Add(1)
		go f.serve(down)
	}
}

// serve dials the upstream for down and copies both ways until either side
// ends or the forwarder cuts the pair.
func (f *forwarder) serve(down net.Conn) {
	defer f.wg.Done()
	dctx, cancel := context.WithTimeout(f.ctx, forwardDialTimeout)
	var d net.Dialer
	up, err := d.DialContext(dctx, "tcp", f.target())
	cancel()
	if err != nil {
		f.untrack(down)
		return
	}
	// Cut between the accept and now closed down already: then up goes too.
	if !f.track(up) {
		f.untrack(down)
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, down)
	go pipe(down, up)
	<-done
	// One direction ended: the link is over, close both so the other
	// copier ends too.
	f.untrack(down, up)
	<-done
}
