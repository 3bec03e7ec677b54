// Package broker is how the pipeline programs find a RabbitMQ node: the
// addresses of a cluster's nodes (--amqp-urls, the preferred node first, or
// the one --amqp-url), taken in turn. A program dials the first address
// that answers; when its connection is lost it dials the next one, round
// robin, so a node killed, partitioned or frozen is left for the others.
// A frozen node answers nothing, not even a close: the short AMQP
// heartbeat (Heartbeat, --amqp-heartbeat) is what notices it.
package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Heartbeat is the default AMQP heartbeat the programs ask for. The client
// gives up on a connection that has read nothing for three heartbeats, so
// a frozen node is left after about 6 s.
const Heartbeat = 2 * time.Second

// URLs is the node list of a program's flags: urls (comma-separated,
// --amqp-urls) when given, else the one url (--amqp-url). Every address
// must be an AMQP URL; blanks around the commas are dropped, an empty
// entry is an error.
func URLs(urls, url string) ([]string, error) {
	if strings.TrimSpace(urls) == "" {
		if url == "" {
			return nil, errors.New("no broker address: give --amqp-url or --amqp-urls")
		}
		if _, err := amqp.ParseURI(url); err != nil {
			return nil, fmt.Errorf("--amqp-url: not an AMQP URL: %w", err)
		}
		return []string{url}, nil
	}
	var out []string
	for i, u := range strings.Split(urls, ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			return nil, fmt.Errorf("--amqp-urls: address %d is empty", i+1)
		}
		if _, err := amqp.ParseURI(u); err != nil {
			// The URL carries a password: name it by position only.
			return nil, fmt.Errorf("--amqp-urls: address %d is not an AMQP URL: %w", i+1, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// Ring hands out a cluster's addresses in turn. It is not safe for
// concurrent use: each connection loop owns its own.
type Ring struct {
	urls   []string
	next   int
	pinned bool
}

// NewRing is a ring over urls (at least one), starting at the first.
func NewRing(urls []string) *Ring {
	return &Ring{urls: append([]string(nil), urls...)}
}

// Pinned is a ring that only ever gives the first of urls: a program that
// ignores the rest of the cluster (the single-node variant).
func Pinned(urls []string) *Ring {
	return &Ring{urls: urls[:1:1], pinned: true}
}

// Next returns the address to dial now and moves on: the first call gives
// the first address, every later call the one after the address the call
// before gave, wrapping round.
func (r *Ring) Next() (url string, index int) {
	i := r.next
	r.next = (r.next + 1) % len(r.urls)
	return r.urls[i], i
}

// Len is how many addresses a full round tries.
func (r *Ring) Len() int { return len(r.urls) }

// DialFirst dials the ring's addresses in turn, from the next one on, and
// returns the first connection made and the address's position in the
// list; after a full round with none it returns every address's error
// (each named by position: the URLs carry the password). The ring has then
// moved on past the connected address, so the next DialFirst (after this
// connection is lost) starts at the node after it.
func DialFirst[C any](ctx context.Context, r *Ring, dial func(ctx context.Context, url string) (C, error)) (C, int, error) {
	var errs []error
	for range r.Len() {
		url, i := r.Next()
		c, err := dial(ctx, url)
		if err == nil {
			return c, i, nil
		}
		errs = append(errs, fmt.Errorf("node %d: %w", i+1, err))
		if ctx.Err() != nil {
			break
		}
	}
	var zero C
	return zero, -1, errors.Join(errs...)
}
