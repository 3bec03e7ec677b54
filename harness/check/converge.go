package check

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Progress is what convergence is judged by.
type Progress struct {
	Unsettled int // outbox rows Pending or Processing (0 without an outbox query)
	Effects   int
	Ready     int
	Unacked   int
	queue     string
}

func (p Progress) settled() bool {
	return p.Unsettled == 0 && p.Ready == 0 && p.Unacked == 0
}

func (p Progress) String() string {
	return fmt.Sprintf("%d outbox rows Pending/Processing, %d messages ready and %d unacked in %s, %d effects",
		p.Unsettled, p.Ready, p.Unacked, p.queue, p.Effects)
}

// ReadProgress samples the pipeline once, through the contract's queries.
func ReadProgress(ctx context.Context, src Sources) (Progress, error) {
	p := Progress{queue: src.Topology.Queue}
	if q := src.Contract.Outbox; q != nil {
		pool, err := src.pool(*q, "outbox")
		if err != nil {
			return p, err
		}
		err = ReadOnly(ctx, pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM (`+q.SQL+`) AS outbox WHERE status IN ('Pending', 'Processing')`).Scan(&p.Unsettled); err != nil {
				return queryError("outbox", *q, err)
			}
			return nil
		})
		if err != nil {
			return p, err
		}
	}
	q := src.Contract.Effects
	pool, err := src.pool(q, "effects")
	if err != nil {
		return p, err
	}
	err = ReadOnly(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM (`+q.SQL+`) AS effects`).Scan(&p.Effects); err != nil {
			return queryError("effects", q, err)
		}
		return nil
	})
	if err != nil {
		return p, err
	}
	if src.Queue != nil {
		info, err := src.Queue(ctx, src.Topology.Queue)
		if err != nil {
			return p, err
		}
		p.Ready, p.Unacked = info.Ready, info.Unacked
	}
	return p, nil
}

// WaitConverged polls until the outbox is settled, the queue is drained
// and the effects have stopped changing for `quiet`, or until timeout.
// It returns when convergence was first seen; on timeout the error says what
// had not converged. It ends at once, with src.Down's error, when a process
// is down with no restart coming.
func WaitConverged(ctx context.Context, src Sources, timeout, quiet time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last Progress
	var lastErr error
	var settledSince time.Time
	for {
		if src.Down != nil {
			if err := src.Down(); err != nil {
				return time.Time{}, fmt.Errorf("cannot converge: %w", err)
			}
		}
		p, err := ReadProgress(ctx, src)
		switch {
		case err != nil:
			lastErr, settledSince = err, time.Time{}
		case p.settled() && p.Effects == last.Effects:
			if settledSince.IsZero() {
				settledSince = time.Now()
			}
			if time.Since(settledSince) >= quiet {
				return settledSince, nil
			}
		default:
			settledSince = time.Time{}
		}
		if err == nil {
			last, lastErr = p, nil
		}
		if time.Now().After(deadline) {
			if lastErr != nil {
				return time.Time{}, fmt.Errorf("not converged after %s: %w", timeout, lastErr)
			}
			return time.Time{}, fmt.Errorf("not converged after %s: %s", timeout, last)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("wait for convergence: %w", ctx.Err())
		case <-tick.C:
		}
	}
}
