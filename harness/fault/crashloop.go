package fault

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
)

// KindCrashLoop is the crash-loop fault's kind, as a schedule names it.
const KindCrashLoop = "crash-loop"

// maxCrashLoop bounds Times: a loop longer than a queue's delivery limit
// needs is only a slower run.
const maxCrashLoop = 20

// CrashLoop is a consumer that crashes in a loop on what it holds: after
// the trigger, Times times in a row, it waits until the broker counts
// deliveries the consumer holds unacked — a reading taken two statistics
// intervals after the consumer's respawn, with as many consumers as before
// its kill, so it is this incarnation's —
// kills the consumer (SIGKILL) and starts it again RestartAfter later.
// Each kill hands what the consumer held back to the queue, which
// redelivers it first, to the next incarnation; a quorum queue counts each
// return as a delivery attempt against its x-delivery-limit. With Slow,
// the consumer's database link is slowed until the last kill (slowLatency
// on each statement), so none of what it holds commits before its kill
// and the same deliveries go round each time. Between kills the consumer
// is respawned without waiting for its health check: one that pings the
// slowed database through a pool busy with the held deliveries answers
// late (the Node example's did not within 15 s), and the broker's reading
// is the evidence the loop needs. The last restart waits as any restart
// does, once the link is restored. It needs no crash point and no event
// log.
type CrashLoop struct {
	Process      history.Ref   `json:"process"` // the consumer instance reference
	Times        int           `json:"times"`   // kills in a row, 2 to maxCrashLoop
	RestartAfter time.Duration `json:"restart_after"`
	Slow         history.Link  `json:"slow"` // a link reference ("consumer.pg") slowed from the trigger to the last kill; "" none
	Trigger      Trigger       `json:"trigger"`
}

func init() {
	register(Desc[CrashLoop]{
		Name:    KindCrashLoop,
		Example: CrashLoop{Process: "consumer", Times: 4, Trigger: Trigger{AfterOrders: 20}, RestartAfter: RestartAfter, Slow: "consumer.pg"},
		Doc:     "the consumer killed again and again, each time once the broker counts deliveries it holds unacked: a crash loop on what it holds",
		Opens:   protocol.ConsumerCrashLoop,
		Check: func(p CrashLoop) error {
			errs := []error{Need(KindCrashLoop, p.Process != "", "process")}
			if p.Times < 2 || p.Times > maxCrashLoop {
				errs = append(errs, fmt.Errorf("crash-loop fault: times %d: want 2 to %d", p.Times, maxCrashLoop))
			}
			return errors.Join(errs...)
		},
		Window: func(c CrashLoop) (history.Ref, string) { return c.Process, protocol.ConsumerCrashLoop },
		Touches: func(c CrashLoop) Touch {
			t := Touch{Instances: []history.Ref{c.Process}}
			if c.Slow != "" {
				t.Links = []history.Link{c.Slow}
			}
			return t
		},
		Trigger: func(c CrashLoop) Trigger { return c.Trigger },
		Enumerate: func(s *Surface, _ int) []Candidate {
			var out []Candidate
			for _, in := range s.Instances {
				db := in.Ref.DB()
				if in.Role != protocol.Consumer || !s.HasLink(db) {
					continue
				}
				loop := CrashLoop{Process: in.Ref, Times: 4, Trigger: Trigger{AfterOrders: PlainAfter}, RestartAfter: RestartAfter, Slow: db}
				out = append(out, Candidate{Faults: []Fault{loop}, Keys: []string{LinkKey(db)}})
			}
			return out
		},
		Shrink: func(c CrashLoop, sh *Shrink[CrashLoop]) {
			if c.Times > 2 {
				g := c
				g.Times = c.Times - 1
				sh.Add(fmt.Sprintf("times %d → %d", c.Times, g.Times), g)
			}
			sh.Trigger(func(c *CrashLoop) *Trigger { return &c.Trigger })
		},
	})
}

// Describe implements Fault.
func (c CrashLoop) Describe() result.Fault {
	detail := fmt.Sprintf("%s killed (SIGKILL) %d times in a row, each time once the broker counts deliveries it holds unacked, %s, restarted after %s",
		c.Process, c.Times, c.Trigger, c.RestartAfter)
	if c.Slow != "" {
		detail = fmt.Sprintf("link %s slowed %s a statement, and ", c.Slow, slowLatency) + detail
	}
	return result.Fault{Kind: KindCrashLoop, Target: string(c.Process), Detail: detail}
}

// Require implements Requirer: the instance and the target's queue.
func (c CrashLoop) Require(env *Env) error {
	if _, err := env.Roles.Instance(c.Process); err != nil {
		return err
	}
	if env.Topology.Queue == "" {
		return errors.New("crash-loop fault: the target's topology names no queue")
	}
	if c.Slow != "" {
		if _, err := env.Roles.Link(c.Slow); err != nil {
			return err
		}
	}
	return nil
}

// Inject implements Fault. The window is open once every kill happened,
// each with deliveries in hand.
func (c CrashLoop) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	p, err := env.Process(c.Process)
	if err != nil {
		return record(c, start, false, err)
	}
	if err := env.Wait(ctx, c.Trigger); err != nil {
		return record(c, start, false, err)
	}
	start = time.Now()
	var seen []string
	var w waits
	var unslow func() error
	// restore undoes the slowed link, once.
	restore := func() error {
		if unslow == nil {
			return nil
		}
		err := unslow()
		unslow = nil
		return err
	}
	done := func(hit bool, err error) result.Fault {
		r := record(c, start, hit, err)
		r.Waits = w
		if len(seen) > 0 {
			r.Detail += " — " + strings.Join(seen, "; ")
		}
		if err := restore(); err != nil {
			r.UndoError = err.Error()
		}
		return r
	}
	if c.Slow != "" {
		if unslow, err = slowLink(ctx, env, c.Slow); err != nil {
			return done(false, err)
		}
	}
	var after respawn
	for i := 1; i <= c.Times; i++ {
		// A reading two statistics intervals after the respawn, with as
		// many consumers as before the kill, is of this incarnation: the
		// one killed before had its connection closed by the kernel at
		// once.
		var held string
		var consumers int
		err := w.wait(fmt.Sprintf("%s (kill %d of %d)", causeHeld(env, c.Process), i, c.Times), env.Deadline, func() (string, error) {
			var err error
			held, consumers, err = waitHeldDeliveries(ctx, env, false, after)
			return held, err
		})
		if err != nil {
			err = fmt.Errorf("kill %d of %d: %w", i, c.Times, err)
			if after.at.IsZero() || p.Running() {
				return done(false, err)
			}
			// The respawned consumer exited by itself: the run goes on
			// with one that a restart found ready, on a restored link.
			r := done(false, fmt.Errorf("%w; %s respawned after kill %d exited: %s", err, c.Process, i-1, p.ExitReason()))
			if err := p.Restart(ctx); err != nil {
				return notUndone(r, fmt.Errorf("restart %s: %w", c.Process, err))
			}
			return r
		}
		if err := p.Kill(); err != nil {
			return done(false, fmt.Errorf("kill %d of %d: %w", i, c.Times, err))
		}
		seen = append(seen, fmt.Sprintf("kill %d: %s", i, held))
		env.Logf("%s killed (SIGKILL), %d of %d: %s", c.Process, i, c.Times, held)
		if err := pause(ctx, c.RestartAfter); err != nil {
			return done(i == c.Times, err)
		}
		if i < c.Times {
			// Between kills the next reading of the broker is the
			// evidence that this incarnation consumes; the target's
			// health check is not, as it may ping the database this
			// fault slowed from behind the deliveries it holds.
			if err := p.Respawn(); err != nil {
				return notUndone(done(false, nil), fmt.Errorf("respawn %s after kill %d: %w", c.Process, i, err))
			}
			after = respawn{at: time.Now(), consumers: consumers}
			continue
		}
		// The last restart waits as every restart does, on a link no
		// longer slowed.
		if err := restore(); err != nil {
			return notUndone(done(true, nil), fmt.Errorf("restore link %s before the last restart: %w", c.Slow, err))
		}
		if err := p.Restart(ctx); err != nil {
			return notUndone(done(true, nil), fmt.Errorf("restart %s after kill %d: %w", c.Process, i, err))
		}
	}
	return done(true, nil)
}
