package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/redact"
	"github.com/faultline-dev/faultline/proxies"
)

// apart is an infrastructure some runs get to themselves, one at a time,
// beside the others: the exclusive runs (they restart the broker) where
// the provider can start one more instance of itself (infra.Replicable),
// so they stop no other run; the runs that need a clustered broker where
// the provider can start one (infra.ClusterStarter). It starts with the
// first run that takes it and is stopped by the cleanup. Shared by every
// Shared of one infrastructure (WithTarget).
type apart struct {
	what  string // what it is for, in log lines: "broker restarts"
	start func(ctx context.Context) (infra.Infra, error)
	// ready, if set, is asked before each run: the state a run starts
	// from (a cluster whole again after the last run's faults).
	ready func(ctx context.Context, in infra.Infra) error

	startMu sync.Mutex // held while starting and while stopping
	started bool       // a start was tried; in, err are its outcome
	closed  bool       // stopped: no start after it
	in      infra.Infra
	err     error

	runMu sync.Mutex // one exclusive run at a time on it
}

func newApart(in infra.Infra) *apart {
	r, ok := in.(infra.Replicable)
	if !ok {
		return nil
	}
	return &apart{what: "broker restarts", start: r.Replicate}
}

// newClusterApart is the clustered broker of the runs that need one, on
// the runs' Toxiproxy links (see infra.ClusterStarter); nil where the
// provider cannot start one.
func newClusterApart(in infra.Infra, links proxies.Links) *apart {
	s, ok := in.(infra.ClusterStarter)
	if !ok || links == nil {
		return nil
	}
	return &apart{what: "a clustered broker",
		start: func(ctx context.Context) (infra.Infra, error) { return s.StartCluster(ctx, links) },
		ready: func(ctx context.Context, in infra.Infra) error {
			ctx, cancel := context.WithTimeout(ctx, clusterReadyTimeout)
			defer cancel()
			if _, err := in.(infra.Cluster).Restore(ctx); err != nil {
				return fmt.Errorf("the cluster is not whole before the run: %w", err)
			}
			return nil
		}}
}

// clusterReadyTimeout bounds the wait for a cluster to be whole again
// before a run: a node restarted by the last run rejoins in seconds.
const clusterReadyTimeout = 2 * time.Minute

// apartStarts is how many times an infrastructure apart is started before
// its runs are not run: a failed start stops what it started, and a node
// that boots slower than its start bound (every test starting its runs at
// once) gets a new start, not a longer wait.
const apartStarts = 2

// take returns the infrastructure apart, started on first use, held for
// one run until release is called; ok is false where there is none (the
// provider cannot start another, or its start failed, or it is not ready:
// err says why). A run that left it spoiled (a fault it could not undo: a
// broker that did not come back from its restart) says so to release:
// that instance is stopped, and the next run takes a new one, not a
// broker nothing answers on — also a run that was already waiting for
// the spoiled one to end.
func (a *apart) take(ctx context.Context, logf func(string, ...any)) (in infra.Infra, release func(spoiled bool), err error) {
	if a == nil {
		return nil, nil, errNoApart
	}
	for {
		if in, err = a.instance(ctx, logf); err != nil {
			return nil, nil, err
		}
		a.runMu.Lock()
		a.startMu.Lock()
		current := a.in == in
		a.startMu.Unlock()
		if current {
			break
		}
		// The run this one waited for left in spoiled, and in was
		// stopped: take the one started after it.
		a.runMu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("infrastructure for %s: %w", a.what, err)
		}
	}
	if a.ready != nil {
		if err := a.ready(ctx, in); err != nil {
			a.runMu.Unlock()
			return nil, nil, err
		}
	}
	return in, func(spoiled bool) {
		if spoiled {
			a.discard(ctx, in, logf)
		}
		a.runMu.Unlock()
	}, nil
}

// instance is the infrastructure apart as it is now, started if no start
// was tried since the last one was discarded.
func (a *apart) instance(ctx context.Context, logf func(string, ...any)) (infra.Infra, error) {
	a.startMu.Lock()
	defer a.startMu.Unlock()
	if !a.started && !a.closed {
		a.started = true
		// The first start is always made (its error, an interrupt's
		// included, is what every run is told); the next only while ctx
		// lives.
		for attempt := 1; attempt <= apartStarts; attempt++ {
			t := time.Now()
			a.in, a.err = a.start(ctx)
			if a.err == nil {
				logf("infrastructure for %s ready in %s: its runs go beside the others, one at a time", a.what, time.Since(t).Round(100*time.Millisecond))
				break
			}
			logf("infrastructure for %s, start %d of %d: %v", a.what, attempt, apartStarts, a.err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	if a.err != nil {
		return nil, fmt.Errorf("infrastructure for %s: %w", a.what, a.err)
	}
	if a.in == nil {
		return nil, fmt.Errorf("infrastructure for %s: stopped", a.what)
	}
	return a.in, nil
}

// discard stops in, the instance a run left spoiled, so that the next take
// starts a new one (with its own start attempts).
func (a *apart) discard(ctx context.Context, in infra.Infra, logf func(string, ...any)) {
	a.startMu.Lock()
	defer a.startMu.Unlock()
	if a.in != in || a.closed {
		return
	}
	a.in, a.err, a.started = nil, nil, false
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := in.Stop(sctx); err != nil {
		logf("infrastructure for %s, left spoiled by a run: stop it: %v", a.what, err)
		return
	}
	logf("infrastructure for %s left spoiled by a run (a fault not undone): stopped; the next run starts another", a.what)
}

// startReplicated starts a database with a standby (and a broker) for one
// run, where the provider can (infra.ReplicatedStarter); stop stops it.
func (sh *Shared) startReplicated(ctx context.Context, synchronous bool) (in infra.Infra, stop func(), err error) {
	s, ok := sh.Infra.(infra.ReplicatedStarter)
	if !ok {
		return nil, nil, errNoApart
	}
	t := time.Now()
	r, err := s.StartReplicated(ctx, synchronous)
	if err != nil {
		return nil, nil, fmt.Errorf("start a database with a standby: %w", err)
	}
	sh.logf("database with a standby (synchronous %t) ready in %s", synchronous, time.Since(t).Round(100*time.Millisecond))
	return r, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := r.Stop(sctx); err != nil {
			sh.logf("stop the database with a standby: %v", err)
		}
	}, nil
}

// errNoApart: the provider cannot start such an infrastructure.
var errNoApart = errors.New("the provider cannot start it")

// stop stops the infrastructure apart if it started, waiting for a start
// under way; no start follows.
func (a *apart) stop(ctx context.Context) error {
	if a == nil {
		return nil
	}
	a.startMu.Lock()
	defer a.startMu.Unlock()
	a.closed = true
	if a.in == nil {
		return nil
	}
	if err := a.in.Stop(ctx); err != nil {
		return fmt.Errorf("stop the infrastructure for %s: %w", a.what, err)
	}
	return nil
}

// ExclusiveApart says whether the runs that restart the broker get an
// infrastructure of their own (and so run beside the others) rather than
// the shared broker to themselves.
func (sh *Shared) ExclusiveApart() bool { return sh.apart != nil }

// on is sh with its runs on in: the same target, build, Toxiproxy server,
// ports, folders and bookkeeping; in's passwords masked in its log too.
func (sh *Shared) on(in infra.Infra) *Shared {
	other := &Shared{Infra: in, Proxies: sh.Proxies, Target: sh.Target, BuildDir: sh.BuildDir, Root: sh.Root, Log: sh.Log,
		StartedIn: sh.StartedIn, StartParts: sh.StartParts, exclusive: sh.exclusive, apart: sh.apart, cluster: sh.cluster, ports: sh.ports, slots: sh.slots,
		tracker: sh.tracker}
	if sh.Log != nil {
		other.Log = redact.New(in.Secrets()...).Writer(sh.Log)
	}
	return other
}
