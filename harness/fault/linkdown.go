package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/result"
)

// LinkDown takes a link down (connections dropped, new ones refused) for
// Duration, then brings it back. With At set, it goes down while a process
// waits at a crash point (armed as a short delay after the trigger): e.g.
// the consumer's database link while its transaction is about to commit,
// so the COMMIT meets a dead connection and its outcome is unknown to it.
type LinkDown struct {
	Link     string
	Trigger  Trigger
	Duration time.Duration
	At       *Sync
}

// Describe implements Fault.
func (l LinkDown) Describe() result.Fault {
	detail := fmt.Sprintf("down for %s, %s", l.Duration, l.Trigger)
	if l.At != nil {
		detail += fmt.Sprintf(", while %s waits at %s", l.At.Process, l.At.Point)
	}
	return result.Fault{Kind: "link-down", Target: l.Link, Detail: detail}
}

// Require implements Requirer.
func (l LinkDown) Require(env *Env) error {
	if _, err := env.Roles.Link(l.Link); err != nil {
		return err
	}
	if l.At != nil {
		if _, err := env.Point(l.At.Process, l.At.Point); err != nil {
			return err
		}
	}
	return nil
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
	if l.At != nil {
		if err := l.At.wait(ctx, env); err != nil {
			return record(l, start, false, err)
		}
	}
	start = time.Now()
	if err := link.Down(ctx); err != nil {
		return record(l, start, false, err)
	}
	env.Logf("link %s down", l.Link)
	holdErr := pause(ctx, l.Duration)
	if err := link.Up(context.WithoutCancel(ctx)); err != nil {
		return notUndone(record(l, start, true, holdErr), err) // it names the link
	}
	return record(l, start, true, holdErr)
}
