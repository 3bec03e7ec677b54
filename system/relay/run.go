package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/protocol/control"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/broker"
	"github.com/faultline-dev/faultline/system/crashpoint"
	"github.com/faultline-dev/faultline/system/dbutil"
	"github.com/faultline-dev/faultline/system/schema"
	"github.com/faultline-dev/faultline/system/service"
	"github.com/faultline-dev/faultline/system/variant"
)

// Run relays until ctx ends, with the guards of cfg.Variant (all of them
// unless it is a relay variant). It survives the database or the broker
// going away: every failure is logged and retried with backoff.
func Run(ctx context.Context, cfg Config) error {
	guards, err := GuardsFor(cfg.Variant)
	if err != nil {
		return err
	}
	return RunWithGuards(ctx, cfg, guards)
}

// RunWithGuards runs a relay with the given guards (variants drop one).
func RunWithGuards(ctx context.Context, cfg Config, guards Guards) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	base, err := service.Open(ctx, "relay", cfg.Instance, cfg.EventLog, cfg.DBURL, 4)
	if err != nil {
		return err
	}
	defer base.Close()
	log, points, db := base.Log, base.Points, base.DB
	if _, err := control.Serve(ctx, cfg.ControlAddr, log, points, db.Ping, nil); err != nil {
		return err
	}
	if err := dbutil.Retry(ctx, cfg.ReconnectMax, func(ctx context.Context) error { return schema.ApplyOrders(ctx, db) },
		func(err error) { log.Errorf("schema: %v (retrying)", err) }); err != nil {
		return nil // stopped before the database came
	}
	if !guards.ClaimByStatus {
		// reads-by-id: the position it reads by, a bigserial id
		if err := dbutil.Retry(ctx, cfg.ReconnectMax, func(ctx context.Context) error { return schema.ApplyOutboxID(ctx, db) },
			func(err error) { log.Errorf("schema: %v (retrying)", err) }); err != nil {
			return nil
		}
	}
	r := &Relay{
		cfg:    cfg,
		store:  newStore(db, guards),
		log:    log,
		points: points,
		guards: guards,
		nodes:  broker.NewRing(cfg.nodes),
	}
	if !guards.Failover {
		r.nodes = broker.Pinned(cfg.nodes) // single-node
	}
	v, _ := variant.Parse(cfg.Variant) // checked by Validate
	log.Log(eventlog.Entry{Event: eventlog.Started, Detail: fmt.Sprintf("relay lease=%s batch=%d renew=%t %s", cfg.Lease, cfg.BatchSize, cfg.Renew, v.Detail(variant.Relay))})
	r.loop(ctx)
	r.pub.close()
	return nil
}

// newStore is the relay's SQL with the guards' fencing and lease expiry.
func newStore(db *pgxpool.Pool, guards Guards) store {
	s := store{db: db, unfenced: !guards.FenceByClaimID, noExpiry: !guards.LeaseExpiry, ignoreLease: !guards.LeaseHonoured,
		unfencedRetry: !guards.FenceRetries, unfencedRenewal: !guards.FenceRenewal}
	if !guards.ClaimByStatus {
		// Nothing is claimed, so no status write has a claim to be
		// conditional on.
		s.byID, s.unfenced = &cursor{}, true
	}
	return s
}

// loop is the relay's life: connect, claim, publish, settle, again. Up to
// InFlight full batches overlap: a new batch is claimed and published while
// the earlier ones wait for their confirms, and the oldest is finished (its
// confirms awaited, its rows marked) once InFlight are out or a batch came
// back short.
func (r *Relay) loop(ctx context.Context) {
	var pending []*batch // published, not finished, oldest first
	finishOldest := func() {
		r.finishBatch(ctx, pending[0])
		pending = pending[1:]
	}
	finishAll := func() {
		for len(pending) > 0 {
			finishOldest()
		}
		r.waitSettled()
	}
	defer finishAll()
	failures := 0
	for ctx.Err() == nil {
		if r.pub == nil {
			if len(pending) > 0 {
				finishAll()
				continue
			}
			// The node after the one this relay lost (or the first that
			// answers, at start): a node killed, cut off or frozen is left
			// for the next while the relay goes on.
			pub, node, err := broker.DialFirst(ctx, r.nodes, func(ctx context.Context, url string) (*publisher, error) {
				return dialPublisher(ctx, url, r.cfg.BatchSize*r.cfg.InFlight, r.cfg.Heartbeat)
			})
			if err != nil {
				if failures == 0 {
					r.log.Log(eventlog.Entry{Event: eventlog.Disconnected, Error: err.Error()})
				}
				failures++
				r.sleep(ctx, r.retryDelay(failures))
				continue
			}
			r.pub = pub
			r.log.Log(eventlog.Entry{Event: eventlog.Connected, Detail: fmt.Sprintf("amqp node=%d/%d", node+1, len(r.cfg.nodes))})
			failures = 0
		}
		claimID := r.newClaimID()
		rows, err := r.store.claim(ctx, claimID, r.cfg.BatchSize, r.cfg.Lease)
		if err != nil {
			finishAll()
			if ctx.Err() != nil {
				return
			}
			failures++
			r.log.Errorf("%v", err)
			r.sleep(ctx, r.retryDelay(failures))
			continue
		}
		failures = 0
		if len(rows) == 0 {
			if len(pending) > 0 {
				finishOldest() // then look again at once: its retries may be due
				continue
			}
			if r.pub.isClosed() {
				r.pub.close()
				r.pub = nil
				continue
			}
			r.sleep(ctx, r.cfg.PollInterval)
			continue
		}
		if r.guards.ClaimByStatus { // reads-by-id claims nothing
			lines := make([]eventlog.Entry, len(rows))
			for i, row := range rows {
				lines[i] = eventlog.Entry{Event: eventlog.Claimed, EventID: row.EventID, ClaimID: claimID, AggregateID: row.AggregateID, Sequence: row.Sequence, Attempt: row.AttemptCount + 1}
			}
			r.log.Batch(lines)
		}
		r.points.Hit(crashpoint.RelayAfterClaim)
		pending = append(pending, r.publishBatch(ctx, claimID, rows))
		// A short batch means the outbox is drained: finish before claiming
		// again, so new rows gather into a batch instead of going out a
		// few at a time (each claim and mark costs the database the same).
		if len(pending) >= r.cfg.InFlight || len(rows) < r.cfg.BatchSize {
			finishOldest()
		}
	}
}

// retryDelay is the wait after n consecutive infrastructure failures.
func (r *Relay) retryDelay(n int) time.Duration {
	d := 50 * time.Millisecond
	for i := 1; i < n && d < r.cfg.ReconnectMax; i++ {
		d *= 2
	}
	return min(d, r.cfg.ReconnectMax)
}

func (r *Relay) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
