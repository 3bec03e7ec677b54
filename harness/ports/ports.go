// Package ports reserves loopback ports for the harness's processes and
// services to bind, and for its tests, from below the kernel's ephemeral
// range. A reservation holds across processes: any number of faultline
// processes on one machine (gates, explores, test binaries) never hand out
// the same port.
package ports

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"strconv"
	"sync"
)

// Allocator hands out loopback ports, each held by a reservation until it
// is freed.
//
// What holds, and why:
//   - A port handed out is reserved by a socket held for as long as the
//     reservation lasts: an abstract unix socket named after the port
//     ("@faultline-port-N"). The kernel lets one socket at a time bind a
//     name, across processes and users, and frees it when its process dies,
//     so a killed faultline leaves no reservation (and no file) behind.
//     Two allocators, in one process or in two, never hold one port.
//   - The TCP port itself is bound once at reservation time to show that
//     nothing else listens there, and closed again, because the process it
//     is for binds it (a PostgreSQL, a RabbitMQ, a Node.js program). In the
//     meantime only a program binding that very number could take it: the
//     range lies below ip_local_port_range, so the kernel never picks it
//     for a port-0 listener or for the local end of a connection.
//   - An in-process server takes Listen instead, which hands over the
//     bound socket itself, never closed in between.
//
// Safe for concurrent use.
type Allocator struct {
	mu           sync.Mutex
	lo, next, hi int
	held         map[int]net.Listener // port → its reservation
}

// From is the lowest port an Allocator hands out.
const From = 10000

// New makes an allocator over the ports below the ephemeral range
// (ip_local_port_range), from 10000, starting at a random place so that
// allocators rarely probe the same ports first.
func New() *Allocator {
	lo, hi := From, 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var a, b int
		if _, err := fmt.Sscan(string(data), &a, &b); err == nil && a > lo+1000 {
			hi = a
		}
	}
	start := lo
	if n, err := rand.Int(rand.Reader, big.NewInt(int64(hi-lo))); err == nil {
		start += int(n.Int64())
	}
	return &Allocator{lo: lo, next: start, hi: hi, held: map[int]net.Listener{}}
}

// ErrExhausted is matched (errors.Is) when no port of the range is free.
var ErrExhausted = errors.New("no free loopback port")

// Port reserves a loopback port nothing listens on now, for a process to
// bind. It stays reserved until Free or Close.
func (a *Allocator) Port() (int, error) {
	port, _, err := a.reserve(false)
	return port, err
}

// Addr is Port as a loopback host:port, for a process given an address.
func (a *Allocator) Addr() (string, error) {
	port, err := a.Port()
	if err != nil {
		return "", err
	}
	return Loopback(port), nil
}

// Listen reserves a port and returns the TCP listener bound to it, for a
// server in this process: the socket is never closed between the check
// and its use. Closing the listener frees the reservation.
func (a *Allocator) Listen() (net.Listener, error) {
	port, ln, err := a.reserve(true)
	if err != nil {
		return nil, err
	}
	return &listener{Listener: ln, free: func() { a.Free(port) }}, nil
}

func (a *Allocator) reserve(keep bool) (int, net.Listener, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range a.hi - a.lo {
		port := a.next
		a.next++
		if a.next >= a.hi {
			a.next = a.lo
		}
		if _, mine := a.held[port]; mine {
			continue
		}
		lock, err := net.Listen("unix", lockName(port))
		if err != nil {
			continue // another allocator holds it
		}
		ln, err := net.Listen("tcp", Loopback(port))
		if err != nil {
			_ = lock.Close()
			continue // something outside faultline listens there
		}
		if !keep {
			if err := ln.Close(); err != nil {
				_ = lock.Close()
				return 0, nil, fmt.Errorf("reserve loopback port %d: %w", port, err)
			}
			ln = nil
		}
		a.held[port] = lock
		return port, ln, nil
	}
	return 0, nil, fmt.Errorf("reserve loopback port in [%d, %d): %w", a.lo, a.hi, ErrExhausted)
}

// Free ends the reservations of ports this allocator handed out; the
// processes that bound them must be gone. Other ports are ignored.
func (a *Allocator) Free(ports ...int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range ports {
		if lock, ok := a.held[p]; ok {
			_ = lock.Close()
			delete(a.held, p)
		}
	}
}

// FreeAddr is Free for a host:port that Addr handed out; anything else is
// ignored.
func (a *Allocator) FreeAddr(addr string) {
	if _, p, err := net.SplitHostPort(addr); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			a.Free(n)
		}
	}
}

// heldCount is how many ports are reserved now.
func (a *Allocator) heldCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.held)
}

// Close frees every reservation.
func (a *Allocator) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for p, lock := range a.held {
		_ = lock.Close()
		delete(a.held, p)
	}
}

// Loopback is port on 127.0.0.1 as host:port.
func Loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// lockName is the abstract unix socket that reserves port machine-wide
// (the leading '@' is Go's spelling of the abstract namespace).
func lockName(port int) string { return "@faultline-port-" + strconv.Itoa(port) }

// listener frees its port's reservation when closed.
type listener struct {
	net.Listener
	once sync.Once
	free func()
}

func (l *listener) Close() error {
	err := l.Listener.Close()
	l.once.Do(l.free)
	return err
}
