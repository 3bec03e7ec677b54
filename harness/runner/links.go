package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"syscall"
	"time"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/proxies"
)

// linkCheckTimeout bounds the check of each link after the faults. A
// link that carries traffic answers within milliseconds, but Toxiproxy
// dials the upstream inside its accept loop, so a broker too loaded to
// accept for a while stalls every proxy in front of it: the bound is
// generous because it costs time only where a link is broken.
const linkCheckTimeout = 30 * time.Second

// linkCheckPoll is how often a link that did not answer is asked again.
const linkCheckPoll = 100 * time.Millisecond

// The first bytes a client sends, which make the server answer at once: a
// PostgreSQL SSLRequest (answered 'S' or 'N') and AMQP 0-9-1's protocol
// header (answered with a connection.start frame).
const (
	pgSSLRequest = "\x00\x00\x00\x08\x04\xd2\x16\x2f"
	amqpHeader   = "AMQP\x00\x00\x09\x01"
)

// checkLinks checks, side by side, that each link carries traffic end to
// end: through the proxy to its upstream and back. Every link is asked
// again until it answers or timeout passes; the error names each link that
// never did.
func checkLinks(ctx context.Context, links map[string]*proxies.Link, timeout time.Duration) error {
	addrs := make(map[string]string, len(links))
	for name, l := range links {
		addrs[name] = l.Addr()
	}
	return checkAddrs(ctx, addrs, timeout)
}

// checkAddrs is checkLinks on link name → address; a name ending in .pg is
// spoken to as PostgreSQL, one ending in .amqp as AMQP, any other is
// only dialled.
func checkAddrs(ctx context.Context, addrs map[string]string, timeout time.Duration) error {
	names := make([]string, 0, len(addrs))
	for name := range addrs {
		names = append(names, name)
	}
	slices.Sort(names)
	return sideBySide(len(names), func(i int) error {
		return waitLink(ctx, names[i], addrs[names[i]], timeout)
	})
}

// waitLink asks one link until it answers, or timeout passes.
func waitLink(ctx context.Context, name, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	err := poll.Until(ctx, timeout, linkCheckPoll, func() (bool, error) {
		err := probeLink(ctx, name, addr)
		if err != nil && (last == nil || ctx.Err() == nil) {
			last = err // the last real answer, over our own deadline
		}
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("link %s (%s) carries no traffic to its upstream within %s: %w", name, addr, timeout, last)
	}
	return nil
}

// probeLink dials addr and, for PostgreSQL and AMQP, sends the protocol's
// first bytes and wants the server's first byte back: Toxiproxy accepts
// a connection before it dials the upstream, so only an answer shows the
// whole way works.
func probeLink(ctx context.Context, name, addr string) error {
	var hello string
	switch {
	case fault.IsDBLink(name):
		hello = pgSSLRequest
	case fault.IsBrokerLink(name):
		hello = amqpHeader
	}
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	if hello == "" {
		return nil
	}
	deadline := time.Now().Add(time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return fmt.Errorf("deadline: %w", err)
	}
	if _, err := io.WriteString(conn, hello); err != nil {
		return fmt.Errorf("write the protocol's first bytes: %w", err)
	}
	var answer [1]byte
	if _, err := io.ReadFull(conn, answer[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			return errors.New("the connection was closed before the server answered (upstream unreachable)")
		}
		return fmt.Errorf("read the server's answer: %w", err)
	}
	return nil
}
