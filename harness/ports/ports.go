// Package ports hands out loopback ports for the harness's processes and
// services to bind, from below the kernel's ephemeral range.
package ports

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
)

// Allocator hands out loopback addresses for processes to bind, each once,
// from below the kernel's ephemeral range: a port the kernel picks for
// a port-0 listener (a Toxiproxy link, another program) or for the local end
// of an outgoing connection (every client of PostgreSQL and RabbitMQ) can never
// be one handed out here, and two instances of one harness never get the
// same one, so the window between choosing a port and the process binding
// it — a Node.js program takes a while to start — cannot be lost to either.
// Safe for concurrent use.
type Allocator struct {
	mu           sync.Mutex
	lo, next, hi int
}

// From is the lowest port an Allocator hands out.
const From = 10000

// New makes an allocator over the ports below the ephemeral range
// (ip_local_port_range), from 10000, starting at a place drawn from seed
// (say, the pid) so that two harnesses on one machine rarely meet.
func New(seed int) *Allocator {
	lo, hi := From, 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var a, b int
		if _, err := fmt.Sscan(string(data), &a, &b); err == nil && a > lo+1000 {
			hi = a
		}
	}
	return &Allocator{lo: lo, next: lo + seed%(hi-lo), hi: hi}
}

// Port returns a loopback port nothing listens on now and that this
// allocator has not handed out before (it wraps around after the range).
func (p *Allocator) Port() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range p.hi - p.lo {
		port := p.next
		p.next++
		if p.next >= p.hi {
			p.next = p.lo
		}
		ln, err := net.Listen("tcp", loopback(port))
		if err != nil {
			continue // taken
		}
		if err := ln.Close(); err != nil {
			return 0, fmt.Errorf("free loopback port: %w", err)
		}
		return port, nil
	}
	return 0, fmt.Errorf("free loopback port: none free below %d", p.hi)
}

// Addr is Port as a loopback host:port, for a process given an address.
func (p *Allocator) Addr() (string, error) {
	port, err := p.Port()
	if err != nil {
		return "", err
	}
	return loopback(port), nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
