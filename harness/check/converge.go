package check

import (
	"context"
	"fmt"
	"time"

	"faultline/system/topology"
)

// Progress is what convergence is judged by.
type Progress struct {
	Unsettled    int // outbox rows Pending or Processing
	Reservations int
	Ready        int
	Unacked      int
}

func (p Progress) settled() bool {
	return p.Unsettled == 0 && p.Ready == 0 && p.Unacked == 0
}

func (p Progress) String() string {
	return fmt.Sprintf("%d outbox rows Pending/Processing, %d messages ready and %d unacked in %s, %d reservations",
		p.Unsettled, p.Ready, p.Unacked, topology.Queue, p.Reservations)
}

// ReadProgress samples the pipeline once.
func ReadProgress(ctx context.Context, src Sources) (Progress, error) {
	var p Progress
	if err := src.OrdersDB.QueryRow(ctx, `SELECT count(*) FROM outbox_messages WHERE status IN ('Pending', 'Processing')`).Scan(&p.Unsettled); err != nil {
		return p, fmt.Errorf("read outbox progress: %w", err)
	}
	if err := src.InventoryDB.QueryRow(ctx, `SELECT count(*) FROM inventory_reservations`).Scan(&p.Reservations); err != nil {
		return p, fmt.Errorf("read reservations progress: %w", err)
	}
	if src.Queue != nil {
		q, err := src.Queue(ctx, topology.Queue)
		if err != nil {
			return p, err
		}
		p.Ready, p.Unacked = q.Ready, q.Unacked
	}
	return p, nil
}

// WaitConverged polls until the outbox is settled, the queue is drained
// and the reservations have stopped changing for `quiet`, or until timeout.
// It returns when convergence was first seen; on timeout the error says what
// had not converged.
func WaitConverged(ctx context.Context, src Sources, timeout, quiet time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last Progress
	var lastErr error
	var settledSince time.Time
	for {
		p, err := ReadProgress(ctx, src)
		switch {
		case err != nil:
			lastErr, settledSince = err, time.Time{}
		case p.settled() && p.Reservations == last.Reservations:
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
