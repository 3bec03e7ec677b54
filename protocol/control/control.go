// Package control is the small loopback HTTP server every pipeline process
// runs for the harness: health, crash point arming, and process-specific
// admin endpoints. The bound address is written to the event log as a
// `control` line so the harness can find it when it asked for port 0.
package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// Serve listens on addr (which must be a loopback address), mounts the crash
// points at /crashpoints and health at /healthz plus any extra handlers, and
// serves until ctx ends. It returns the bound address.
func Serve(ctx context.Context, addr string, log *eventlog.Log, points *crashpoint.Set, health func(context.Context) error, extra map[string]http.Handler) (string, error) {
	mux := http.NewServeMux()
	Mount(mux, points, health)
	for pattern, h := range extra {
		mux.Handle(pattern, h)
	}
	return ServeMux(ctx, addr, log, mux)
}

// Mount adds the crash point and health endpoints to mux.
func Mount(mux *http.ServeMux, points *crashpoint.Set, health func(context.Context) error) {
	cp := points.Handler()
	mux.Handle("/crashpoints", cp)
	mux.Handle("/crashpoints/", cp)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if health != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := health(ctx); err != nil {
				http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	})
}

// ServeMux serves mux on addr until ctx ends and logs the bound address.
func ServeMux(ctx context.Context, addr string, log *eventlog.Log, mux http.Handler) (string, error) {
	if err := RequireLoopback(addr); err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("control listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Errorf("control server: %v", err)
		}
	}()
	bound := ln.Addr().String()
	log.Log(eventlog.Entry{Event: eventlog.Control, Detail: bound})
	return bound, nil
}

// RequireLoopback rejects listen addresses that are not on loopback.
func RequireLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen address %q: only loopback addresses are allowed", addr)
	}
	return nil
}
