package fault

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/proxies"
)

// Toxic puts a Toxiproxy toxic on one link for Duration.
//
// With At set, the toxic lands at a known point of a process: after the
// trigger, the process is frozen at the crash point At.Point, the toxic
// goes on, and the process is thawed — e.g. after its confirms and before
// its Published write, so that write is the one slowed down.
//
// With UntilTakeover (At a relay's point), the toxic stays on until
// another relay is seen claiming a row of each claim At.Process holds
// (waitTakeover; at most TakeoverWait of Duration and the lease; not
// seen, the window did not open), then comes off: a latency longer than that wait lets the
// relay's late write through the moment another relay holds its rows.
//
// With UntilDrained, Duration is a bound: the toxic comes off once the
// target's queue, seen refusing publishes at its length limit, is seen
// again with none ready (waitDrained) — its publishers were told to go
// on. It shapes the traffic while a full queue makes room; whether
// anything it was for happened is the scenario's evidence.
type Toxic struct {
	Link     history.Link  `json:"link"` // "relay-1.pg", "consumer.amqp"
	Toxic    proxies.Toxic `json:"toxic"`
	Duration time.Duration `json:"duration"`
	At       *Sync         `json:"at"`
	Trigger  Trigger       `json:"trigger"`
	// UntilTakeover: on until another relay takes At.Process's claim over.
	UntilTakeover bool `json:"until_takeover"`
	// UntilDrained: on, at most Duration, until the target's queue, seen
	// refusing publishes, is seen with none ready.
	UntilDrained bool `json:"until_drained"`
}

// Observes implements Observer: a toxic held until a takeover reads the
// takeover, and the fencing check the order of the claims, from the
// outbox's audit trail.
func (t Toxic) Observes() []history.Source { return auditIf(t.UntilTakeover) }

// KindToxic is the toxic fault's kind, as a schedule names it.
const KindToxic = "toxic"

func init() {
	register(Desc[Toxic]{
		Name:    KindToxic,
		Example: Toxic{Link: "relay-1.pg", Toxic: proxies.Latency{Latency: 3 * time.Second, Jitter: 50 * time.Millisecond, Stream: proxies.Upstream}, Trigger: Trigger{AfterOrders: 10}, Duration: 6 * time.Second, At: &Sync{Process: "relay-1", Point: protocol.RelayAfterClaim}},
		Doc:     "a Toxiproxy toxic (latency, timeout, reset, bandwidth, slicer, data limit) on a process's link, alone or while it waits at a window",
		Opens:   "the window it waits at, if any",
		Check: func(p Toxic) error {
			if err := errors.Join(Need(KindToxic, p.Link != "", "link"), Need(KindToxic, p.Toxic != nil, "toxic")); err != nil {
				return err
			}
			if p.UntilTakeover && p.At == nil {
				return fmt.Errorf("toxic fault on %s: until_takeover needs at (the relay whose claim is taken over)", p.Link)
			}
			if p.UntilTakeover && p.UntilDrained {
				return fmt.Errorf("toxic fault on %s: until_takeover and until_drained both end it: name one", p.Link)
			}
			return nil
		},
		Window:  func(t Toxic) (history.Ref, string) { return t.At.window() },
		Touches: func(t Toxic) Touch { return Touch{Links: []history.Link{t.Link}} },
		Trigger: func(t Toxic) Trigger { return t.Trigger },
		// Explored on every link, alone and at each window of its process:
		// latency past the lease — on the database link the process's
		// statements slowed (as in relay-db-slow-past-lease), on the broker
		// link what the broker sends back (confirms, deliveries) — and a
		// timeout (nothing passes) for lease × 2.5.
		Enumerate: func(s *Surface, _ int) []Candidate {
			var out []Candidate
			for _, m := range s.LinkMoments() {
				stream := proxies.Downstream
				if m.Link.To == "pg" {
					stream = proxies.Upstream
				}
				latency := (s.Lease * 3 / 2).Round(time.Millisecond)
				out = append(out,
					m.Candidate(Toxic{Link: m.Link.Ref, Toxic: proxies.Latency{Latency: latency, Stream: stream}, Trigger: m.Trigger, Duration: s.Lease * 3, At: m.At}),
					m.Candidate(Toxic{Link: m.Link.Ref, Toxic: proxies.Timeout{}, Trigger: m.Trigger, Duration: s.Lease * 5 / 2, At: m.At}))
			}
			return out
		},
		Shrink: func(f Toxic, sh *Shrink[Toxic]) {
			sh.Trigger(func(t *Toxic) *Trigger { return &t.Trigger })
			sh.Shorter("duration", func(t *Toxic) *time.Duration { return &t.Duration })
			// The toxic's own attributes, through a copy of it put back.
			with := func(what string, d time.Duration, set func(time.Duration) proxies.Toxic) {
				for _, e := range Shorter(d) {
					g := f
					g.Toxic = set(e)
					sh.Add(fmt.Sprintf("%s %s → %s", what, d, e), g)
				}
			}
			switch t := f.Toxic.(type) {
			case proxies.Latency:
				with("latency", t.Latency, func(d time.Duration) proxies.Toxic { u := t; u.Latency = d; return u })
				if t.Jitter > 0 {
					g, u := f, t
					u.Jitter = 0
					g.Toxic = u
					sh.Add(fmt.Sprintf("jitter %s → 0", t.Jitter), g)
				}
			case proxies.Timeout:
				with("timeout", t.Timeout, func(d time.Duration) proxies.Toxic { u := t; u.Timeout = d; return u })
			case proxies.ResetPeer:
				with("timeout", t.Timeout, func(d time.Duration) proxies.Toxic { u := t; u.Timeout = d; return u })
			}
		},
	})
}

// Sync names a crash point used as a synchronisation point: the process
// freezes there (it stops itself as the point fires), the fault lands, and
// only then is the process thawed. The fault is in place before the
// process takes its next step, however slowly either side runs.
type Sync struct {
	Process history.Ref
	Point   string // window
}

// window is the window the fault waits at and the instance whose it is
// ("" for nil: the fault does not wait).
func (s *Sync) window() (instance history.Ref, window string) {
	if s == nil {
		return "", ""
	}
	return s.Process, s.Point
}

// Require implements Requirer: the link, and the sync point if any.
func (t Toxic) Require(env *Env) error {
	if _, err := env.Roles.Link(t.Link); err != nil {
		return err
	}
	if t.At != nil {
		if _, err := env.Point(t.At.Process, t.At.Point); err != nil {
			return err
		}
	}
	return nil
}

// Describe implements Fault.
func (t Toxic) Describe() result.Fault {
	detail := fmt.Sprintf("%s %s %s for %s, %s", t.Toxic.Type(), t.Toxic.Direction(), attributes(t.Toxic), t.Duration, t.Trigger)
	if t.UntilDrained {
		detail = fmt.Sprintf("%s %s %s until the queue, seen refusing publishes, is seen with none ready (at most %s), %s", t.Toxic.Type(), t.Toxic.Direction(), attributes(t.Toxic), t.Duration, t.Trigger)
	}
	if t.At != nil {
		detail += fmt.Sprintf(", while %s waits at %s", t.At.Process, t.At.Point)
	}
	return result.Fault{Kind: KindToxic, Target: string(t.Link), Detail: detail}
}

// Inject implements Fault.
func (t Toxic) Inject(ctx context.Context, env *Env) result.Fault {
	return withWaits(func(w *waits) result.Fault { return t.inject(ctx, env, w) })
}

// inject is Inject, recording what it waits for in w.
func (t Toxic) inject(ctx context.Context, env *Env, w *waits) result.Fault {
	start := time.Now()
	defer env.Landings.land(string(t.Link), notLanded(t.Link)) // after a landing: no-op
	link, err := env.Link(t.Link)
	if err != nil {
		return record(t, start, false, err)
	}
	if err := env.Wait(ctx, t.Trigger); err != nil {
		return record(t, start, false, err)
	}
	var hold *takeoverHold
	if t.UntilTakeover {
		in, err := env.Roles.Instance(t.At.Process)
		if err != nil {
			return record(t, start, false, err)
		}
		var drop func()
		if hold, drop, err = holdTakeovers(ctx, env, in.Name); err != nil {
			return record(t, start, false, err)
		}
		defer drop()
	}
	thaw := nothingToUndo
	if t.At != nil {
		if thaw, err = t.At.freeze(ctx, env, w); err != nil {
			return record(t, start, false, err)
		}
	}
	start = time.Now()
	applied, err := link.Add(ctx, t.Toxic)
	if err != nil {
		return withUndo(record(t, start, false, err), thaw)
	}
	env.Landings.land(string(t.Link), nil)
	env.Logf("toxic %s on %s", t.Toxic.Type(), t.Link)
	if err := thaw(); err != nil {
		_ = applied.Remove(context.WithoutCancel(ctx))
		return notUndone(record(t, start, true, nil), err)
	}
	if t.UntilTakeover {
		within := TakeoverWait(t.Duration, env.Lease)
		seen, holdErr, undoErr := lateAfterTakeover(ctx, w, hold, within, func() (string, error) {
			return waitTakeover(ctx, env, w, t.At.Process, within)
		}, func() error { return applied.Remove(context.WithoutCancel(ctx)) })
		if undoErr != nil {
			return notUndone(record(t, start, true, holdErr), fmt.Errorf("remove the toxic on %s: %w", t.Link, undoErr))
		}
		r := record(t, start, !errors.Is(holdErr, errUnseen), holdErr)
		if holdErr == nil {
			r.Detail += "; " + seen
		}
		return r
	}
	var holdErr error
	var seen string
	if t.UntilDrained {
		seen, holdErr = waitDrained(ctx, env, w, t.Duration)
	} else {
		holdErr = pause(ctx, t.Duration)
	}
	if err := applied.Remove(context.WithoutCancel(ctx)); err != nil {
		return notUndone(record(t, start, true, holdErr), fmt.Errorf("remove the toxic on %s: %w", t.Link, err))
	}
	r := record(t, start, true, holdErr)
	if seen != "" {
		r.Detail += "; " + seen
	}
	return r
}

// freeze arms the synchronisation point to pause and waits until the
// process has stopped there; thaw resumes it. A process that fired the
// point but never stopped is resumed all the same before the error
// returns, so nothing is left frozen. Where the point's window asks more
// than the process being there (syncCondition), a hit without it is let
// go and the next one taken, within the fault deadline.
func (s *Sync) freeze(ctx context.Context, env *Env, w *waits) (thaw func() error, err error) {
	cond, ok := syncCondition(s.Point)
	if !ok {
		return s.freezeOnce(ctx, env, w)
	}
	began := time.Now()
	err = w.wait(fmt.Sprintf("%s at %s %s", s.Process, s.Point, cond.cause), env.Deadline, func() (string, error) {
		for passed := 0; ; passed++ {
			if thaw, err = s.freezeOnce(ctx, env, w); err != nil {
				return "", err
			}
			holds, err := cond.holds(ctx, env, s.Process)
			if err != nil {
				return "", errors.Join(err, thaw())
			}
			if holds {
				return fmt.Sprintf("%d hits without it let go", passed), nil
			}
			if err := thaw(); err != nil {
				return "", err
			}
			if time.Since(began) > env.Deadline {
				return "", fmt.Errorf("window not opened: %s reached %s only %s (%d hits)", s.Process, s.Point, cond.without, passed+1)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return thaw, nil
}

// A pointCondition is what a sync point's window needs besides the
// process being frozen there.
type pointCondition struct {
	cause   string // what is waited for, after "<process> at <point>"
	without string // what the hits were instead, after "reached <point> only"
	holds   func(ctx context.Context, env *Env, process history.Ref) (bool, error)
}

// syncCondition is the condition of point's window, if it has one. Before
// a consumer's COMMIT, the window is a transaction with an effect to
// lose: one of redeliveries whose effects exist (it wrote none) fails
// nothing, however its COMMIT ends.
func syncCondition(point string) (pointCondition, bool) {
	switch point {
	case protocol.ConsumerBeforeCommit:
		return pointCondition{
			cause:   "in a transaction that wrote an effect (pg_locks)",
			without: "in transactions that wrote no effect",
			holds:   wroteEffects,
		}, true
	}
	return pointCondition{}, false
}

// wroteEffects says whether a session of process's is in a transaction
// that has written to the watched effects table (effectWriters). Where it
// cannot tell — no session of process's shows (a target that sets its own
// application_name), or the table cannot be looked at — it says true: the
// hit is taken as it comes.
func wroteEffects(ctx context.Context, env *Env, process history.Ref) (bool, error) {
	in, err := env.Roles.Instance(process)
	if err != nil {
		return false, err
	}
	pool, regclass, ok, _, err := effectsTable(ctx, env)
	if err != nil || !ok {
		return true, err
	}
	var sessions, writing int
	err = pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()),
		(SELECT count(*) `+effectWriters+`)`, in.Name, regclass).Scan(&sessions, &writing)
	if err != nil {
		return false, fmt.Errorf("look at %s's transactions: %w", process, err)
	}
	return sessions == 0 || writing > 0, nil
}

// freezeOnce is freeze at the point's next hit.
func (s *Sync) freezeOnce(ctx context.Context, env *Env, w *waits) (thaw func() error, err error) {
	p, err := env.Process(s.Process)
	if err != nil {
		return nil, err
	}
	own, err := env.Point(s.Process, s.Point)
	if err != nil {
		return nil, err
	}
	armed := time.Now()
	arming := crashpoint.Arming{Action: crashpoint.Pause, Hit: 1}.String()
	if err := p.Arm(ctx, own, arming); err != nil {
		return nil, err
	}
	if _, err := reachPoint(ctx, env, w, s.Process, s.Point, own, armed); err != nil {
		return nil, err
	}
	thaw = func() error {
		if err := p.Resume(); err != nil {
			return fmt.Errorf("thaw %s at %s: %w", s.Process, s.Point, err)
		}
		return nil
	}
	if err := waitStopped(ctx, env, s.Process, w); err != nil {
		return nil, errors.Join(err, thaw())
	}
	return thaw, nil
}

// nothingToUndo is the undo (a thaw, a toxic to take off) of a fault
// that did nothing to undo.
func nothingToUndo() error { return nil }

// withUndo is r after undo: what could not be undone (a process left
// frozen, a toxic left on) makes the fault not undone.
func withUndo(r result.Fault, undo func() error) result.Fault {
	if err := undo(); err != nil {
		return notUndone(r, err)
	}
	return r
}

// attributes renders a toxic's attributes as sorted key=value pairs.
func attributes(t proxies.Toxic) string {
	attrs := t.Attributes()
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, attrs[k])
	}
	return strings.Join(parts, " ")
}
