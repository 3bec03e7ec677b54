package proxies

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

const maxNameLen = 200

// linkAttempts bounds AddLink's tries on ports something outside faultline
// took.
const linkAttempts = 3

// Link is one Toxiproxy proxy: the address a process dials instead of its
// dependency's.
type Link struct {
	name     string
	addr     string
	upstream string
	client   *toxiproxy.Client

	mu    sync.Mutex
	proxy *toxiproxy.Proxy // guarded by mu: Enable and Disable rewrite it
	seq   int              // guarded by mu: numbers the toxics' names
}

// AddLink creates a proxy named name (ASCII letters, digits, '.', '_', '-',
// e.g. "s01.relay-1.amqp") that listens on a port of 127.0.0.1 reserved for
// it until RemoveLink, and forwards to upstream (host:port).
func (s *Server) AddLink(ctx context.Context, name, upstream string) (*Link, error) {
	if err := validateName(name); err != nil {
		return nil, fmt.Errorf("add link %q: %w", name, err)
	}
	if _, port, err := net.SplitHostPort(upstream); err != nil || port == "" {
		return nil, fmt.Errorf("add link %s: upstream must be host:port, got %q", name, upstream)
	}
	var (
		listen string
		p      *toxiproxy.Proxy
		err    error
	)
	// The port is reserved against every faultline process, and was free
	// when reserved; a program outside faultline binding that very number
	// in between makes the server refuse it, and the link takes another.
	for attempt := 1; ; attempt++ {
		if listen, err = s.ports.Addr(); err != nil {
			return nil, fmt.Errorf("add link %s: %w", name, err)
		}
		p, err = call(ctx, func() (*toxiproxy.Proxy, error) {
			return s.client.CreateProxy(name, listen, upstream)
		})
		if err == nil {
			break
		}
		if strings.Contains(err.Error(), "address already in use") && attempt < linkAttempts {
			s.ports.FreeAddr(listen) // not ours to free from whoever holds it; ours is only the reservation
			continue
		}
		// Whether an abandoned call took effect is unknown: the port stays
		// reserved until the server stops.
		return nil, fmt.Errorf("add link %s: %w", name, err)
	}
	s.linksMu.Lock()
	s.links[name] = listen
	s.linksMu.Unlock()
	return &Link{name: name, addr: p.Listen, upstream: upstream, client: s.client, proxy: p}, nil
}

// RemoveLink deletes the proxy named name and closes its connections.
func (s *Server) RemoveLink(ctx context.Context, name string) error {
	if err := validateName(name); err != nil {
		return fmt.Errorf("remove link %q: %w", name, err)
	}
	_, err := call(ctx, func() (struct{}, error) {
		return struct{}{}, proxyHandle(s.client, name).Delete()
	})
	if err != nil {
		return fmt.Errorf("remove link %s: %w", name, err)
	}
	s.linksMu.Lock()
	listen, ok := s.links[name]
	delete(s.links, name)
	s.linksMu.Unlock()
	if ok {
		s.ports.FreeAddr(listen)
	}
	return nil
}

// validateName keeps names to what goes into a URL path unescaped (the
// client does not escape them).
func validateName(name string) error {
	if name == "" {
		return errors.New("name is empty")
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("name is longer than %d bytes", maxNameLen)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("name may hold only ASCII letters, digits, '.', '_' and '-', found %q", r)
		}
	}
	return nil
}

// proxyHandle returns a client-side proxy value that is enough for the
// client's calls that use only the name (toxics, Delete).
func proxyHandle(c *toxiproxy.Client, name string) *toxiproxy.Proxy {
	p := c.NewProxy()
	p.Name = name
	return p
}

// Name returns the proxy's name.
func (l *Link) Name() string { return l.name }

// Addr returns the address the process must dial: where the proxy listens
// (127.0.0.1:port) for a Server, the host side of the proxy's port for a
// RemoteServer.
func (l *Link) Addr() string { return l.addr }

// Listen returns where the proxy listens as the server sees it: for a
// RemoteServer in a container, the address inside the container's network
// (a process on this host dials Addr instead).
func (l *Link) Listen() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.proxy.Listen
}

// Upstream returns the address the proxy forwards to.
func (l *Link) Upstream() string { return l.upstream }

// Down disables the proxy: established connections are closed and new dials
// are refused until Up.
func (l *Link) Down(ctx context.Context) error {
	if err := l.setEnabled(ctx, false); err != nil {
		return fmt.Errorf("link %s down: %w", l.name, err)
	}
	return nil
}

// Up enables the proxy again on the same address. It fails if another socket
// took the port while the link was down.
func (l *Link) Up(ctx context.Context) error {
	if err := l.setEnabled(ctx, true); err != nil {
		return fmt.Errorf("link %s up on %s: %w", l.name, l.addr, err)
	}
	return nil
}

func (l *Link) setEnabled(ctx context.Context, enabled bool) error {
	_, err := call(ctx, func() (struct{}, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if enabled {
			return struct{}{}, l.proxy.Enable()
		}
		return struct{}{}, l.proxy.Disable()
	})
	return err
}

// Applied is a toxic added to a link.
type Applied struct {
	link  *Link
	name  string
	toxic Toxic
}

// Add validates t and adds it to the link; it acts on established
// connections too.
func (l *Link) Add(ctx context.Context, t Toxic) (*Applied, error) {
	if t == nil {
		return nil, fmt.Errorf("link %s: add toxic: toxic is nil", l.name)
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("link %s: add toxic: %w", l.name, err)
	}
	l.mu.Lock()
	l.seq++
	name := fmt.Sprintf("%s_%s_%d", t.Type(), t.Direction(), l.seq)
	l.mu.Unlock()

	_, err := call(ctx, func() (*toxiproxy.Toxic, error) {
		return proxyHandle(l.client, l.name).AddToxic(name, t.Type(), string(t.Direction()), t.Probability(), t.Attributes())
	})
	if err != nil {
		return nil, fmt.Errorf("link %s: add toxic %s: %w", l.name, name, err)
	}
	return &Applied{link: l, name: name, toxic: t}, nil
}

// RemoveAll removes every toxic from the link.
func (l *Link) RemoveAll(ctx context.Context) error {
	handle := proxyHandle(l.client, l.name)
	toxics, err := call(ctx, handle.Toxics)
	if err != nil {
		return fmt.Errorf("link %s: list toxics: %w", l.name, err)
	}
	for _, t := range toxics {
		if err := removeToxic(ctx, handle, t.Name); err != nil {
			return fmt.Errorf("link %s: %w", l.name, err)
		}
	}
	return nil
}

func removeToxic(ctx context.Context, handle *toxiproxy.Proxy, name string) error {
	_, err := call(ctx, func() (struct{}, error) {
		return struct{}{}, handle.RemoveToxic(name)
	})
	if err != nil {
		return fmt.Errorf("remove toxic %s: %w", name, err)
	}
	return nil
}

// Name returns the toxic's name on the proxy: <type>_<stream>_<n>.
func (a *Applied) Name() string { return a.name }

// Toxic returns the toxic as it was added.
func (a *Applied) Toxic() Toxic { return a.toxic }

// Remove removes the toxic from its link.
func (a *Applied) Remove(ctx context.Context) error {
	if err := removeToxic(ctx, proxyHandle(a.link.client, a.link.name), a.name); err != nil {
		return fmt.Errorf("link %s: %w", a.link.name, err)
	}
	return nil
}
