package observe

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
)

// convergePoll is how often the wait for convergence samples the pipeline.
const convergePoll = 200 * time.Millisecond

// Progress samples the pipeline once: the outbox rows not yet settled,
// the events a consumer has taken in and not applied (inbox_pending) and
// the effects, through the contract's queries, and the target queue's
// depth. events is how many events the workload was answered for: where
// the target shows no backlog of its relay, that many effects are
// expected (history.Progress.Expected).
func (w *Watch) Progress(ctx context.Context, events int) (history.Progress, error) {
	p := history.Progress{Queue: w.run.Target.Topology.Queue}
	unsettled, shown, err := w.unsettled(ctx)
	if err != nil {
		return p, err
	}
	p.Unsettled = unsettled
	if !shown {
		p.Expected = events
	}
	if q := w.run.Target.Contract.InboxPending; q != nil {
		if p.InboxPending, err = countRows(ctx, w.run.DB, *q, "inbox_pending", ""); err != nil {
			return p, err
		}
	}
	if p.Effects, p.Effected, err = w.countEffects(ctx); err != nil {
		return p, err
	}
	if p.SlotBehind, err = w.slotBehind(ctx); err != nil {
		return p, err
	}
	info, err := w.Queue(ctx, w.run.Target.Topology.Queue)
	if err != nil {
		return p, err
	}
	p.Ready, p.Unacked = info.Ready, info.Unacked
	return p, nil
}

// slotBehind counts, for a log relay, the committed outbox rows whose
// insert's WAL position (the audit trail's) is at or past its slot's
// confirmed position: 0 for other relays, without an audit trail, and
// where the outbox's database holds no one logical slot that confirmed
// anything yet (the checks at the end say why).
func (w *Watch) slotBehind(ctx context.Context) (int, error) {
	if w.run.Target.Relay.Model != history.ModelLog || !w.audit {
		return 0, nil
	}
	pool, ok := w.run.DB[w.run.Target.Observe.Outbox.Database]
	if !ok {
		return 0, nil
	}
	slot, ok, err := infra.RelaySlot(ctx, pool)
	if err != nil || !ok {
		return 0, err
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM faultline_audit WHERE op = 'INSERT' AND lsn >= $1::pg_lsn`, slot.Confirmed).Scan(&n); err != nil {
		return 0, fmt.Errorf("outbox rows past the relay's slot: %w", err)
	}
	return n, nil
}

// Effects counts the effects through the contract's effects query.
func (w *Watch) Effects(ctx context.Context) (int, error) {
	n, _, err := w.countEffects(ctx)
	return n, err
}

// countEffects counts the contract's effect rows and the distinct events among
// them (its event_id column, which the contract requires).
func (w *Watch) countEffects(ctx context.Context) (rows, events int, err error) {
	q := w.run.Target.Contract.Effects
	pool, err := poolFor(w.run.DB, q, "effects")
	if err != nil {
		return 0, 0, err
	}
	err = infra.ReadOnly(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id::text) FROM (`+q.SQL+`) AS effects`).Scan(&rows, &events); err != nil {
			return queryError("effects", q, err)
		}
		return nil
	})
	return rows, events, err
}

// Converge bounds a wait for convergence and says what it needs.
type Converge struct {
	// Timeout bounds the wait; Quiet is how long the pipeline must stay
	// settled; Stall, above zero, ends the wait once nothing at all
	// changed for it while the pipeline was not settled.
	Timeout, Quiet, Stall time.Duration
	// Events is how many events the workload was answered for (see
	// Progress).
	Events int
}

// WaitConverged samples the pipeline every convergePoll, the checker
// judging the samples (check.Settling), until the outbox is settled (or,
// where the target shows no backlog of its relay, every answered event
// has its effect), the queue is drained, the consumer's inbox applied
// (where the contract has an inbox_pending query) and the effects have
// stopped changing for c.Quiet, or until c.Timeout, or until it stalls
// (c.Stall). It returns when convergence was first seen; on timeout or
// stall the error says what had not converged. It ends at once, with
// down's error, when a process is down with no restart coming (down nil:
// nothing to ask).
func (w *Watch) WaitConverged(ctx context.Context, down func() error, c Converge) (time.Time, error) {
	timeout, stall := c.Timeout, c.Stall
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(convergePoll)
	defer tick.Stop()
	settling := check.NewSettling(c.Quiet)
	for {
		if down != nil {
			if err := down(); err != nil {
				return time.Time{}, fmt.Errorf("cannot converge: %w", err)
			}
		}
		p, err := w.Progress(ctx, c.Events)
		if at, ok := settling.Sample(p, err, time.Now()); ok {
			return at, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, settling.NotConverged(timeout)
		}
		if settling.Stalled(time.Now(), stall) {
			return time.Time{}, settling.NotConvergedStalled(stall)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("wait for convergence: %w", ctx.Err())
		case <-tick.C:
		}
	}
}
