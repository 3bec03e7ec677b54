// Package dbutil opens the pipeline's PostgreSQL pools the same way in every
// process: small pools, short connect timeouts, and a start-up that waits
// for the database to come (a process may start before its link is up).
package dbutil

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Open parses url and returns a pool of at most maxConns connections.
func Open(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	cfg.MaxConns = maxConns
	cfg.MinConns = 0
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.HealthCheckPeriod = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	return pool, nil
}

// Retry calls fn until it succeeds or ctx ends, backing off between tries
// from 100ms up to max. onErr sees each failure.
func Retry(ctx context.Context, max time.Duration, fn func(context.Context) error, onErr func(error)) error {
	delay := 100 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		}
		if onErr != nil {
			onErr(err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-t.C:
		}
		delay = min(delay*2, max)
	}
}
