package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/observe"
)

// convergePoll is how often the wait for convergence samples the pipeline.
const convergePoll = 200 * time.Millisecond

// converge bounds a wait for convergence and says what it needs.
type converge struct {
	// Timeout bounds the wait; Quiet is how long the pipeline must stay
	// settled; Stall, above zero, ends the wait once nothing at all
	// changed for it while the pipeline was not settled.
	Timeout, Quiet, Stall time.Duration
	// Events is how many events the workload was answered for (see
	// Progress).
	Events int
}

// waitConverged samples the pipeline every convergePoll, the checker
// judging the samples (check.Settling), until the outbox is settled (or,
// where the target shows no backlog of its relay, every answered event
// has its effect), the queue is drained, the consumer's inbox applied
// (where the contract has an inbox_pending query) and the effects have
// stopped changing for c.Quiet, or until c.Timeout, or until it stalls
// (c.Stall). It returns when convergence was first seen; on timeout or
// stall the error says what had not converged. It ends at once, with
// down's error, when a process is down with no restart coming (down nil:
// nothing to ask).
func waitConverged(ctx context.Context, w *observe.Watch, down func() error, c converge) (time.Time, error) {
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
