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

// Addr returns a loopback host:port nothing listens on now and that this
// allocator has not handed out before (it wraps around after the range).
func (p *Allocator) Addr() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range p.hi - p.lo {
		port := p.next
		p.next++
		if p.next >= p.hi {
			p.next = p.lo
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken
		}
		if err := ln.Close(); err != nil {
			return "", fmt.Errorf("free loopback port: %w", err)
		}
		return addr, nil
	}
	return "", fmt.Errorf("free loopback port: none free below %d", p.hi)
}

// Port is Addr's port as a number, for a service configured by port.
func (p *Allocator) Port() (int, error) {
	addr, err := p.Addr()
	if err != nil {
		return 0, err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("free loopback port: %w", err)
	}
	return strconv.Atoi(port)
}
