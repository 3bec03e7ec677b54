package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/protocol"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
)

// LinkDown takes a link down (connections dropped, new ones refused) for
// Duration, then brings it back. With At set, it goes down while a process
// waits at a crash point (armed as a short delay after the trigger): e.g.
// the consumer's database link while its transaction is about to commit,
// so the COMMIT meets a dead connection and its outcome is unknown to it.
type LinkDown struct {
	Link     history.Link  `json:"link"`
	Duration time.Duration `json:"duration"`
	At       *Sync         `json:"at"`
	Trigger  Trigger       `json:"trigger"`
}

// KindLinkDown is the link-down fault's kind, as a schedule names it.
const KindLinkDown = "link-down"

func init() {
	register(Desc[LinkDown]{
		Name:    KindLinkDown,
		Example: LinkDown{Link: "consumer.pg", Trigger: Trigger{AfterOrders: 10}, Duration: 2 * time.Second, At: &Sync{Process: "consumer", Point: protocol.ConsumerBeforeCommit}},
		Doc:     "a process's link (to PostgreSQL or RabbitMQ) taken down, alone or while it waits at a window, then up again",
		Opens:   "the window it waits at, if any",
		Check:   func(p LinkDown) error { return Need(KindLinkDown, p.Link != "", "link") },
		Window:  func(l LinkDown) (history.Ref, string) { return l.At.window() },
		Touches: func(l LinkDown) Touch { return Touch{Links: []history.Link{l.Link}} },
		Trigger: func(l LinkDown) Trigger { return l.Trigger },
		// Explored on every link, alone and at each window of its process:
		// down for a lease.
		Enumerate: func(s *Surface, _ int) []Candidate {
			var out []Candidate
			for _, m := range s.LinkMoments() {
				out = append(out, m.Candidate(LinkDown{Link: m.Link.Ref, Trigger: m.Trigger, Duration: s.Lease, At: m.At}))
			}
			return out
		},
		Shrink: func(_ LinkDown, sh *Shrink[LinkDown]) {
			sh.Trigger(func(l *LinkDown) *Trigger { return &l.Trigger })
			sh.Shorter("duration", func(l *LinkDown) *time.Duration { return &l.Duration })
		},
	})
}

// Describe implements Fault.
func (l LinkDown) Describe() result.Fault {
	detail := fmt.Sprintf("down for %s, %s", l.Duration, l.Trigger)
	if l.At != nil {
		detail += fmt.Sprintf(", while %s waits at %s", l.At.Process, l.At.Point)
	}
	return result.Fault{Kind: KindLinkDown, Target: string(l.Link), Detail: detail}
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
	return withWaits(func(w *waits) result.Fault { return l.inject(ctx, env, w) })
}

// inject is Inject, recording what it waits for in w.
func (l LinkDown) inject(ctx context.Context, env *Env, w *waits) result.Fault {
	start := time.Now()
	defer env.Landings.land(string(l.Link), notLanded(l.Link)) // after a landing: no-op
	link, err := env.Link(l.Link)
	if err != nil {
		return record(l, start, false, err)
	}
	if err := env.Wait(ctx, l.Trigger); err != nil {
		return record(l, start, false, err)
	}
	thaw := nothingToUndo
	if l.At != nil {
		if thaw, err = l.At.freeze(ctx, env, w); err != nil {
			return record(l, start, false, err)
		}
	}
	start = time.Now()
	if err := link.Down(ctx); err != nil {
		return withUndo(record(l, start, false, err), thaw)
	}
	env.Landings.land(string(l.Link), nil)
	env.Logf("link %s down", l.Link)
	if err := thaw(); err != nil {
		_ = link.Up(context.WithoutCancel(ctx))
		return notUndone(record(l, start, true, nil), err)
	}
	holdErr := pause(ctx, l.Duration)
	if err := link.Up(context.WithoutCancel(ctx)); err != nil {
		return notUndone(record(l, start, true, holdErr), err) // it names the link
	}
	return record(l, start, true, holdErr)
}
