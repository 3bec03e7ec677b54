package proxies

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// Links creates and removes links. A run depends on this, not on where the
// Toxiproxy server runs: *Server (a child process on this host) and
// *RemoteServer (a server somewhere else, e.g. in a container) provide it.
type Links interface {
	// AddLink creates a proxy named name that forwards to upstream
	// (host:port as the server sees it) and returns the link, whose Addr
	// is what a process on this host dials.
	AddLink(ctx context.Context, name, upstream string) (*Link, error)
	// RemoveLink deletes the proxy named name and closes its connections.
	RemoveLink(ctx context.Context, name string) error
}

var (
	_ Links = (*Server)(nil)
	_ Links = (*RemoteServer)(nil)
)

// ErrNoFreePort is matched (errors.Is) by AddLink's error when every port a
// RemoteServer may listen on holds a link already.
var ErrNoFreePort = errors.New("no free port")

// PortMapping is a port a remote Toxiproxy server may listen on, and the
// address (host:port) that reaches that port from this host — for a server
// in a container, the host side of the published port.
type PortMapping struct {
	Port int
	Addr string
}

// RemoteServer is a Toxiproxy server this process did not start and cannot
// stop, reached through its API. A server in a container can only be
// reached on the ports published when the container was created, so a
// RemoteServer hands each new link one port of a fixed pool, listening on
// ListenHost inside the server's network, and gives the link the host-side
// address of that port. RemoveLink returns the port to the pool.
type RemoteServer struct {
	apiAddr    string
	listenHost string
	client     *toxiproxy.Client

	mu   sync.Mutex
	free []PortMapping          // guarded by mu, in the order given
	used map[string]PortMapping // guarded by mu: link name → its port
}

// NewRemoteServer returns a client for the Toxiproxy API at apiAddr
// (host:port) that creates proxies listening on listenHost (e.g. "0.0.0.0"
// inside a container) and one of ports each. It waits, bounded by ctx, until
// the API answers.
func NewRemoteServer(ctx context.Context, apiAddr, listenHost string, ports []PortMapping) (*RemoteServer, error) {
	if _, _, err := net.SplitHostPort(apiAddr); err != nil {
		return nil, fmt.Errorf("toxiproxy server %q: API address must be host:port: %w", apiAddr, err)
	}
	if listenHost == "" {
		return nil, fmt.Errorf("toxiproxy server %s: empty listen host", apiAddr)
	}
	if len(ports) == 0 {
		return nil, fmt.Errorf("toxiproxy server %s: no ports to listen on", apiAddr)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p.Port <= 0 || p.Port > 65535 {
			return nil, fmt.Errorf("toxiproxy server %s: port %d out of range", apiAddr, p.Port)
		}
		if seen[p.Port] {
			return nil, fmt.Errorf("toxiproxy server %s: port %d given twice", apiAddr, p.Port)
		}
		seen[p.Port] = true
		if _, _, err := net.SplitHostPort(p.Addr); err != nil {
			return nil, fmt.Errorf("toxiproxy server %s: port %d: address %q must be host:port: %w", apiAddr, p.Port, p.Addr, err)
		}
	}
	s := &RemoteServer{
		apiAddr:    apiAddr,
		listenHost: listenHost,
		client:     toxiproxy.NewClient(apiAddr),
		free:       append([]PortMapping(nil), ports...),
		used:       map[string]PortMapping{},
	}
	if err := s.waitForAPI(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *RemoteServer) waitForAPI(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := pollAPI(ctx, s.client, s.apiAddr, nil, nil); err != nil {
		return fmt.Errorf("toxiproxy server %s: %w", s.apiAddr, err)
	}
	return nil
}

// APIAddr returns the API's address as given.
func (s *RemoteServer) APIAddr() string { return s.apiAddr }

// Client returns a client for the server's API.
func (s *RemoteServer) Client() *toxiproxy.Client { return s.client }

// freePortCount returns how many ports of the pool hold no link.
func (s *RemoteServer) freePortCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.free)
}

// AddLink implements Links: the proxy listens on ListenHost and a free port
// of the pool; the link's Addr is that port's host-side address. With every
// port taken it fails at once with ErrNoFreePort (waiting could deadlock
// runs that each hold part of the links they need).
func (s *RemoteServer) AddLink(ctx context.Context, name, upstream string) (*Link, error) {
	if err := validateName(name); err != nil {
		return nil, fmt.Errorf("add link %q: %w", name, err)
	}
	if _, port, err := net.SplitHostPort(upstream); err != nil || port == "" {
		return nil, fmt.Errorf("add link %s: upstream must be host:port, got %q", name, upstream)
	}
	port, err := s.take(name)
	if err != nil {
		return nil, fmt.Errorf("add link %s: %w", name, err)
	}
	listen := net.JoinHostPort(s.listenHost, strconv.Itoa(port.Port))
	p, err := call(ctx, func() (*toxiproxy.Proxy, error) {
		return s.client.CreateProxy(name, listen, upstream)
	})
	if err != nil {
		// A proxy that was created after all (ctx ended mid-call) keeps its
		// port until RemoveLink.
		if !s.exists(context.WithoutCancel(ctx), name) {
			s.release(name)
		}
		return nil, fmt.Errorf("add link %s: %w", name, err)
	}
	return &Link{name: name, addr: port.Addr, upstream: upstream, client: s.client, proxy: p}, nil
}

// RemoveLink implements Links and returns the link's port to the pool.
func (s *RemoteServer) RemoveLink(ctx context.Context, name string) error {
	if err := validateName(name); err != nil {
		return fmt.Errorf("remove link %q: %w", name, err)
	}
	_, err := call(ctx, func() (struct{}, error) {
		return struct{}{}, proxyHandle(s.client, name).Delete()
	})
	if err != nil {
		// Toxiproxy's API answers 503 when a request outlasts its
		// handler's time limit, which a delete waiting for a proxy's
		// connections to close can; the delete goes on behind it. A proxy
		// seen gone then was removed.
		if unavailable(err) && s.gone(ctx, name) {
			s.release(name)
			return nil
		}
		if !s.exists(context.WithoutCancel(ctx), name) {
			s.release(name)
		}
		return fmt.Errorf("remove link %s: %w", name, err)
	}
	s.release(name)
	return nil
}

// unavailable reports Toxiproxy's 503: the v2.5.0 client formats its
// ApiError into the error's text ("Delete: HTTP 503: ..."), not as a
// wrapped value.
func unavailable(err error) bool { return strings.Contains(err.Error(), "HTTP 503") }

// goneWait bounds how long RemoveLink watches, after an error, for a
// delete that the server goes on with.
const goneWait = 30 * time.Second

// gone polls until the server no longer lists proxy name (true), or
// goneWait or ctx ends first (false).
func (s *RemoteServer) gone(ctx context.Context, name string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), goneWait)
	defer cancel()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		if !s.exists(ctx, name) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// take reserves the first free port for name.
func (s *RemoteServer) take(name string) (PortMapping, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.used[name]; ok {
		return PortMapping{}, fmt.Errorf("a link named %s exists already", name)
	}
	if len(s.free) == 0 {
		return PortMapping{}, fmt.Errorf("all %d ports the Toxiproxy server at %s may listen on hold links: %w; publish more ports or run fewer scenarios at once",
			len(s.used), s.apiAddr, ErrNoFreePort)
	}
	p := s.free[0]
	s.free = s.free[1:]
	s.used[name] = p
	return p, nil
}

// release returns name's port, if it holds one, to the pool.
func (s *RemoteServer) release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.used[name]; ok {
		delete(s.used, name)
		s.free = append(s.free, p)
	}
}

// exists reports whether the server has a proxy named name; when it cannot
// tell, it says yes, so that a port is never handed out twice.
func (s *RemoteServer) exists(ctx context.Context, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	all, err := call(ctx, s.client.Proxies)
	if err != nil {
		return true
	}
	_, ok := all[name]
	return ok
}
