package supervisor

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
)

// FreeAddr returns a loopback host:port nothing listens on now, for a
// process to bind: the kernel picks a free port, which is closed again at
// once. A process keeps its address across restarts (a listener the
// kernel freed on SIGKILL can be bound again at once).
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free loopback port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("free loopback port: %w", err)
	}
	return addr, nil
}

// Ports hands out loopback addresses for processes to bind, each once,
// from below the kernel's ephemeral range: a port the kernel picks for
// someone's port-0 listener (a Toxiproxy link, another program) can never
// be one handed out here, and two instances of one harness never get the
// same one, so the window between choosing a port and the process binding
// it — a Node.js program takes a while to start — cannot be lost to either.
// Safe for concurrent use.
type Ports struct {
	mu           sync.Mutex
	lo, next, hi int
}

// portsFrom is the lowest port Ports hands out.
const portsFrom = 10000

// NewPorts makes an allocator over the ports below the ephemeral range
// (ip_local_port_range), from 10000, starting at a place drawn from seed
// (say, the pid) so that two harnesses on one machine rarely meet.
func NewPorts(seed int) *Ports {
	lo, hi := portsFrom, 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var a, b int
		if _, err := fmt.Sscan(string(data), &a, &b); err == nil && a > lo+1000 {
			hi = a
		}
	}
	return &Ports{lo: lo, next: lo + seed%(hi-lo), hi: hi}
}

// Addr returns a loopback host:port nothing listens on now and that this
// allocator has not handed out before (it wraps around after the range).
func (p *Ports) Addr() (string, error) {
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
