package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
)

// Flap takes a link down and up again Times times, Down each time and Up
// between: a network that drops every connection again before the
// process has settled on a new one. A client that reconnects once and
// trusts the new connection, or that leaks a channel or a claim each time,
// shows it here where one long outage would not.
type Flap struct {
	Link    history.Link  `json:"link"`
	Trigger Trigger       `json:"trigger"`
	Times   int           `json:"times"`
	Down    time.Duration `json:"down"`
	Up      time.Duration `json:"up"`
}

// KindFlap is the flap fault's kind, as a schedule names it.
const KindFlap = "flap"

func init() {
	register(Desc[Flap]{
		Name:    KindFlap,
		Example: Flap{Link: "relay-1.amqp", Trigger: Trigger{AfterOrders: 20}, Times: 5, Down: 300 * time.Millisecond, Up: 300 * time.Millisecond},
		Doc:     "a process's link taken down and up again several times in a row, each reconnection cut short",
		Opens:   protocol.LinkFlapping,
		Check: func(p Flap) error {
			if err := Need(KindFlap, p.Link != "", "link"); err != nil {
				return err
			}
			return Need(KindFlap, p.Times > 0 && p.Down > 0 && p.Up > 0, "times, down and up")
		},
		Window:  func(Flap) (history.Ref, string) { return "", "" },
		Touches: func(f Flap) Touch { return Touch{Links: []history.Link{f.Link}} },
		Trigger: func(f Flap) Trigger { return f.Trigger },
		// Explored on every link, alone: five drops a reconnection apart.
		Enumerate: func(s *Surface, _ int) []Candidate {
			var out []Candidate
			for _, m := range s.LinkMoments() {
				if m.At != nil {
					continue
				}
				out = append(out, m.Candidate(Flap{Link: m.Link.Ref, Trigger: m.Trigger, Times: 5, Down: 300 * time.Millisecond, Up: 300 * time.Millisecond}))
			}
			return out
		},
		Shrink: func(_ Flap, sh *Shrink[Flap]) {
			sh.Trigger(func(f *Flap) *Trigger { return &f.Trigger })
			sh.Fewer("times", func(f *Flap) *int { return &f.Times }, 1)
		},
	})
}

// Describe implements Fault.
func (f Flap) Describe() result.Fault {
	return result.Fault{Kind: KindFlap, Target: string(f.Link), Detail: fmt.Sprintf("down %s, up %s, %d times, %s", f.Down, f.Up, f.Times, f.Trigger)}
}

// Require implements Requirer.
func (f Flap) Require(env *Env) error {
	_, err := env.Roles.Link(f.Link)
	return err
}

// Inject implements Fault.
func (f Flap) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	link, err := env.Link(f.Link)
	if err != nil {
		return record(f, start, false, err)
	}
	if err := env.Wait(ctx, f.Trigger); err != nil {
		return record(f, start, false, err)
	}
	start = time.Now()
	for n := range f.Times {
		if err := link.Down(ctx); err != nil {
			return record(f, start, n > 0, err)
		}
		holdErr := pause(ctx, f.Down)
		if err := link.Up(context.WithoutCancel(ctx)); err != nil {
			return notUndone(record(f, start, true, holdErr), err)
		}
		if holdErr != nil {
			return record(f, start, true, holdErr)
		}
		if n < f.Times-1 {
			if err := pause(ctx, f.Up); err != nil {
				return record(f, start, true, err)
			}
		}
	}
	env.Logf("link %s flapped %d times", f.Link, f.Times)
	return record(f, start, true, nil)
}
