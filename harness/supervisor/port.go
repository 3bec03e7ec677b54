package supervisor

import (
	"fmt"
	"net"
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
