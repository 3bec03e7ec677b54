package fault

import (
	"context"
	"fmt"
	"time"

	"faultline/harness/result"
)

// LinkDown takes a link down (connections dropped, new ones refused) for
// Duration, then brings it back.
type LinkDown struct {
	Link     string
	Trigger  Trigger
	Duration time.Duration
}

// Describe implements Fault.
func (l LinkDown) Describe() result.Fault {
	return result.Fault{Kind: "link-down", Target: l.Link, Detail: fmt.Sprintf("down for %s, %s", l.Duration, l.Trigger)}
}

// Inject implements Fault.
func (l LinkDown) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	link, err := env.Link(l.Link)
	if err != nil {
		return record(l, start, false, err)
	}
	if err := env.Wait(ctx, l.Trigger); err != nil {
		return record(l, start, false, err)
	}
	start = time.Now()
	if err := link.Down(ctx); err != nil {
		return record(l, start, false, err)
	}
	env.Logf("link %s down", l.Link)
	holdErr := pause(ctx, l.Duration)
	if err := link.Up(context.WithoutCancel(ctx)); err != nil {
		return record(l, start, true, fmt.Errorf("link up: %w", err))
	}
	return record(l, start, true, holdErr)
}
