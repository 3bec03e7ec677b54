package observe

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/faultline-dev/faultline/harness/check"
)

// convergePoll is how often the wait for convergence samples the pipeline.
const convergePoll = 200 * time.Millisecond

// Progress samples the pipeline once: the outbox rows not yet settled,
// the events a consumer has taken in and not applied (inbox_pending) and
// the effects, through the contract's queries, and the target queue's
// depth.
func (w *Watch) Progress(ctx context.Context) (check.Progress, error) {
	p := check.Progress{Queue: w.run.Target.Topology.Queue}
	var err error
	if p.Unsettled, err = w.unsettled(ctx); err != nil {
		return p, err
	}
	if q := w.run.Target.Contract.InboxPending; q != nil {
		if p.InboxPending, err = countRows(ctx, w.run.DB, *q, "inbox_pending", ""); err != nil {
			return p, err
		}
	}
	if p.Effects, err = w.Effects(ctx); err != nil {
		return p, err
	}
	info, err := w.Queue(ctx, w.run.Target.Topology.Queue)
	if err != nil {
		return p, err
	}
	p.Ready, p.Unacked = info.Ready, info.Unacked
	return p, nil
}

// Effects counts the effects through the contract's effects query.
func (w *Watch) Effects(ctx context.Context) (int, error) {
	q := w.run.Target.Contract.Effects
	pool, err := poolFor(w.run.DB, q, "effects")
	if err != nil {
		return 0, err
	}
	var n int
	err = check.ReadOnly(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM (`+q.SQL+`) AS effects`).Scan(&n); err != nil {
			return queryError("effects", q, err)
		}
		return nil
	})
	return n, err
}

// WaitConverged samples the pipeline every convergePoll, the checker
// judging the samples (check.Settling), until the outbox is settled, the
// queue is drained, the consumer's inbox applied (where the contract has
// an inbox_pending query) and the effects have stopped changing for quiet, or
// until timeout, or (stall above zero) until nothing at all changed for
// stall while the pipeline was not settled. It returns when convergence
// was first seen; on timeout or stall the error says what had not
// converged. It ends at once, with down's error, when a process is down
// with no restart coming (down nil: nothing to ask).
func (w *Watch) WaitConverged(ctx context.Context, down func() error, timeout, quiet, stall time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(convergePoll)
	defer tick.Stop()
	settling := check.NewSettling(quiet)
	for {
		if down != nil {
			if err := down(); err != nil {
				return time.Time{}, fmt.Errorf("cannot converge: %w", err)
			}
		}
		p, err := w.Progress(ctx)
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
