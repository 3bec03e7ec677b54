package runner

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/observe"
	"github.com/faultline-dev/faultline/harness/safe"
)

// clientSampleEvery is how often a run that is judged by liveness after
// heal counts the target's clients: the resolution of its measured
// reconnection.
const clientSampleEvery = 250 * time.Millisecond

// clientSampleTimeout bounds one count; a count that does not come in
// time is left out (a node just killed can hold the management API up).
const clientSampleTimeout = 2 * time.Second

// watchClients counts the target's clients (history.ClientSample) from now
// until stop is called, which returns what it counted: the broker's
// connections in the run's vhost and each database's client sessions,
// faultline's own left out (infra.OwnConnectionName,
// infra.OwnApplicationName), beside the effects counted (w) and those the
// answered orders call for (expected). Only runs judged by liveness after
// heal pay for it.
func (r *run) watchClients(ctx context.Context, w *observe.Watch, expected func() int) (stop func() []history.ClientSample) {
	if !slices.Contains(r.plan.Scenario.Invariants, check.LiveAfterHeal) {
		return func() []history.ClientSample { return nil }
	}
	ctx, cancel := context.WithCancel(ctx)
	var (
		mu      sync.Mutex
		samples []history.ClientSample
	)
	done := make(chan struct{})
	safe.Go("client counter", func() {
		defer close(done)
		t := time.NewTicker(clientSampleEvery)
		defer t.Stop()
		for {
			if s, ok := r.countClients(ctx, w, expected); ok {
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}, r.onPanic)
	return func() []history.ClientSample {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return samples
	}
}

// countClients takes one sample; ok is false where a count of the clients
// failed (the effects' count then reads -1).
func (r *run) countClients(ctx context.Context, w *observe.Watch, expected func() int) (history.ClientSample, bool) {
	ctx, cancel := context.WithTimeout(ctx, clientSampleTimeout)
	defer cancel()
	at := time.Now()
	// Expected first: effects counted after it can only be more.
	s := history.ClientSample{At: at, Expected: expected(), Effects: -1, Sessions: make(map[string]int, len(r.pools))}
	if n, err := w.Effects(ctx); err == nil {
		s.Effects = n
	}
	broker, err := r.sh.Infra.ClientConnections(ctx, r.id)
	if err != nil {
		return history.ClientSample{}, false
	}
	s.Broker = broker
	for db, pool := range r.pools {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND backend_type = 'client backend'
			  AND application_name <> $1 AND pid <> pg_backend_pid()`, infra.OwnApplicationName).Scan(&n)
		if err != nil {
			return history.ClientSample{}, false
		}
		s.Sessions[db] = n
	}
	return s, true
}
