package fault

import (
	"context"
	"errors"
	"fmt"
	"github.com/faultline-dev/faultline/protocol"
	"slices"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/result"
)

// Unbind removes the consumer queue's binding for RoutingKey (empty: for
// every routing key of the target's topology), so publishes with that key
// are unroutable (returned to a mandatory publisher). With Duration > 0 the
// binding is restored after it; with 0 it stays removed.
//
// With Rounds > 0 the outage is timed from the run, not by the clock
// alone: the bindings stay away at least Duration and until Rounds retry
// round trips of the relays (check.RetryPace.Cycle, measured live from the
// audit trail) fit in it, at most Max. A relay that does not back off
// retries once per round trip, so it goes through Rounds retries of a row
// in such an outage however slow a loaded machine makes each one; a relay
// that backs off does not. Max is what a relay that backs off is known to
// ride out, so an outage that reached it with the relays retrying and not
// even the budget's round trips (2/3 of Rounds) fitted did not open its
// window: on a machine that slow,
// a relay that does not back off would not have spent its budget in it
// either, and a pass would say nothing (the fault reports itself not
// happened, with how few fitted, and the run is indeterminate unless an
// invariant broke; the gate runs it again). An outage that reached Max
// with rows claimed and never retried opened it: a relay that ignores
// returns has no round trip to wait for. It ends early, once past
// Duration, when a row ended Failed: the relay gave up inside the
// outage, which is what it was held to show.
//
// An outage timed by the clock alone (Rounds 0) opened its window only if
// something was published into it: the broker's count of the vhost's
// unroutable messages (returned or dropped) grew. Counted after the
// bindings are back, while routable publishes cannot add to it.
type Unbind struct {
	RoutingKey string
	Trigger    Trigger
	Duration   time.Duration
	Rounds     int
	Max        time.Duration
}

// WatchesAudit implements AuditWatcher: a measured outage reads the trail.
func (u Unbind) WatchesAudit() bool { return u.Rounds > 0 }

// paceEvery is how often a measured outage reads the audit trail.
const paceEvery = 100 * time.Millisecond

// KindUnbind is the unbind fault's kind, as a schedule names it.
const KindUnbind = "unbind"

func init() {
	register(Desc[Unbind, unbindParams]{
		Name:    KindUnbind,
		Example: Unbind{RoutingKey: "order.created", Trigger: Trigger{AfterOrders: 20}, Duration: 3 * time.Second},
		Doc:     "the queue's bindings taken away, so publishes are unroutable (returned to a mandatory publisher), restored after a while",
		Opens:   protocol.QueueUnroutable,
		Params: func(u Unbind) (unbindParams, error) {
			return unbindParams{Duration: Duration(u.Duration), RoutingKey: u.RoutingKey, Trigger: u.Trigger.Data(), Rounds: u.Rounds, Max: Duration(u.Max)}, nil
		},
		Fault: func(p unbindParams) (Unbind, error) {
			return Unbind{RoutingKey: p.RoutingKey, Trigger: p.Trigger.Trigger(), Duration: time.Duration(p.Duration), Rounds: p.Rounds, Max: time.Duration(p.Max)}, nil
		},
		Window:  func(Unbind) (string, string) { return "", protocol.QueueUnroutable },
		Touches: func(Unbind) Touch { return Touch{Unroutable: true} },
		Trigger: func(u Unbind) Trigger { return u.Trigger },
		// Explored when the target's topology names its exchange and queue:
		// longer than the lease (or than the outage the target says it
		// rides out), and, when it says one, exactly that outage, in which
		// no row may end Failed.
		Enumerate: func(s *Surface, _ int) []Candidate {
			if !s.Unroutable {
				return nil
			}
			long := 3 * s.Lease / 2
			if s.RidesOut > 0 {
				long = 2 * s.RidesOut
			}
			out := []Candidate{{Faults: []Fault{Unbind{Trigger: Trigger{AfterOrders: PlainAfter}, Duration: long}}, Keys: []string{KeyUnbind}}}
			if s.RidesOut > 0 {
				out = append(out, Candidate{Faults: []Fault{Unbind{Trigger: Trigger{AfterOrders: PlainAfter}, Duration: s.RidesOut}},
					Invariants: []string{check.NoneGaveUp}, Keys: []string{KeyUnbind}})
			}
			return out
		},
		Offered: func(s *Surface) []Offer {
			if !s.Unroutable {
				return nil
			}
			return []Offer{{Name: protocol.QueueUnroutable, Role: protocol.Relay, By: []string{"(the broker)"}}}
		},
		Shrink: func(_ Unbind, sh *Shrink[Unbind]) {
			sh.Trigger(func(u *Unbind) *Trigger { return &u.Trigger })
			sh.Shorter("duration", func(u *Unbind) *time.Duration { return &u.Duration })
		},
	})
}

// unbindParams are an Unbind as a schedule writes it.
type unbindParams struct {
	Duration   Duration     `json:"duration,omitempty"`
	RoutingKey string       `json:"routing_key,omitempty"`
	Trigger    *TriggerData `json:"trigger,omitempty"`
	// A measured outage (Rounds > 0): the round trips it waits for, and its
	// longest.
	Rounds int      `json:"rounds,omitempty"`
	Max    Duration `json:"max,omitempty"`
}

// Describe implements Fault.
func (u Unbind) Describe() result.Fault {
	d := "never restored"
	switch {
	case u.Rounds > 0:
		d = fmt.Sprintf("restored once %d retry round trips fit in the outage (at least %s, at most %s)", u.Rounds, u.Duration, u.Max)
	case u.Duration > 0:
		d = "restored after " + u.Duration.String()
	}
	key := u.RoutingKey
	if key == "" {
		key = "every routing key"
	}
	return result.Fault{Kind: KindUnbind, Target: "queue", Detail: fmt.Sprintf("binding %s removed, %s, %s", key, d, u.Trigger)}
}

// Inject implements Fault.
func (u Unbind) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	if err := env.Wait(ctx, u.Trigger); err != nil {
		return record(u, start, false, err)
	}
	conn, ch, err := env.Admin(ctx)
	if err != nil {
		return record(u, start, false, err)
	}
	defer conn.Close()
	var trail []check.AuditRow
	var mark int64
	if u.Rounds > 0 {
		if env.Audit == nil {
			return record(u, start, false, fmt.Errorf("a measured outage needs the outbox's audit trail, which is not installed"))
		}
		if trail, err = env.Audit(ctx, 0); err != nil {
			return record(u, start, false, err)
		}
		if len(trail) > 0 {
			mark = trail[len(trail)-1].ID
		}
	}
	var before infra.VHostInfo
	counted := u.Rounds == 0 && u.Duration > 0
	if counted {
		if before, err = env.Infra.VHost(ctx, env.VHost); err != nil {
			return record(u, start, false, fmt.Errorf("count unroutable messages: %w", err))
		}
	}
	start = time.Now()
	keys := env.Topology.RoutingKeys
	if u.RoutingKey != "" {
		keys = []string{u.RoutingKey}
	}
	// The tap goes first and comes back last: a message routable to the
	// tap alone would be confirmed, not returned, and lost to the
	// consumer's queue — the harness must never make routable what the
	// target's topology does not.
	queues := []string{env.Topology.Queue}
	if env.Tap != "" {
		queues = []string{env.Tap, env.Topology.Queue}
	}
	for _, q := range queues {
		for _, key := range keys {
			if err := ch.QueueUnbind(q, key, env.Topology.Exchange, nil); err != nil {
				return record(u, start, false, fmt.Errorf("unbind %s from %s: %w", key, q, err))
			}
		}
	}
	env.Logf("bindings %v removed", keys)
	if u.Duration <= 0 {
		return record(u, start, true, nil)
	}
	opened, closed, measured, holdErr := true, "", "", error(nil)
	if u.Rounds > 0 {
		opened, closed, measured, holdErr = u.holdMeasured(ctx, env, trail, mark, start)
	} else {
		holdErr = pause(ctx, u.Duration)
	}

	for _, q := range slices.Backward(queues) {
		for _, key := range keys {
			if err := ch.QueueBind(q, key, env.Topology.Exchange, false, nil); err != nil {
				return notUndone(u.result(start, opened, closed, measured, holdErr), fmt.Errorf("restore binding %s to %s: %w", key, q, err))
			}
		}
	}
	env.Logf("bindings %v restored%s", keys, measured)
	if counted && holdErr == nil {
		opened, measured, holdErr = publishedInto(ctx, env, before)
		closed = "nothing was published while the bindings were gone"
	}
	return u.result(start, opened, closed, measured, holdErr)
}

// unroutableCountWait bounds the wait for the broker's counters to show a
// message published into the outage: several statistics intervals (500 ms
// on the local and docker providers). An outage nothing was published into
// waits all of it.
const unroutableCountWait = 3 * time.Second

// publishedInto says whether the vhost's unroutable count grew past
// before, polling until it does or unroutableCountWait passes.
func publishedInto(parent context.Context, env *Env, before infra.VHostInfo) (bool, string, error) {
	ctx, cancel := context.WithTimeout(parent, unroutableCountWait)
	defer cancel()
	tick := time.NewTicker(paceEvery)
	defer tick.Stop()
	for {
		now, err := env.Infra.VHost(ctx, env.VHost)
		if err == nil && now.Unroutable > before.Unroutable {
			return true, fmt.Sprintf("; %d unroutable messages", now.Unroutable-before.Unroutable), nil
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return false, "", parent.Err()
			}
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return false, "", fmt.Errorf("count unroutable messages: %w", err)
			}
			return false, "; the broker counted no unroutable message in it", nil
		case <-tick.C:
		}
	}
}

// result is the fault's record with what the outage saw (in its detail);
// closed says why an outage that did not open its window did not.
func (u Unbind) result(start time.Time, opened bool, closed, measured string, err error) result.Fault {
	r := record(u, start, opened, err)
	r.Detail += measured
	if !opened && err == nil {
		r.Error = "window not opened: " + closed
	}
	return r
}

// holdMeasured keeps the bindings away as Rounds asks, reading the audit
// trail (trail so far, mark its last id when the bindings went) every
// paceEvery; it reports whether the window opened (and why not if it did
// not) and what it measured.
func (u Unbind) holdMeasured(ctx context.Context, env *Env, trail []check.AuditRow, mark int64, start time.Time) (opened bool, closed, measured string, err error) {
	tick := time.NewTicker(paceEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, "", "", ctx.Err()
		case <-tick.C:
		}
		after := mark
		if len(trail) > 0 {
			after = trail[len(trail)-1].ID
		}
		more, err := env.Audit(ctx, after)
		if err != nil {
			return false, "", "", fmt.Errorf("measure the outage: %w", err)
		}
		trail = append(trail, more...)
		pace := check.MeasureRetryPace(trail, mark)
		held := time.Since(start)
		if stop, closed := u.settled(held, pace); stop {
			return closed == "", closed, fmt.Sprintf("; held %s: %s", held.Round(time.Millisecond), pace), nil
		}
	}
}

// RoundsFor is the round trips a measured outage waits for to see a
// relay that does not back off spend a retry budget: the budget and half
// as much again, the margin for round trips slower than the median
// measured.
func RoundsFor(budget int) int { return budget * 3 / 2 }

// budgetOf is the retry budget an outage of rounds round trips was made
// for (RoundsFor's inverse).
func budgetOf(rounds int) int { return (rounds*2 + 2) / 3 }

// settled says whether a measured outage held this long, at this pace,
// ends (at least Duration, and Rounds round trips fitted or a row Failed;
// or Max), and, when it ends without opening its window, why not ("" when
// it opened): the round trips fitted or a relay gave a row up inside it;
// or it reached Max with rows claimed into it and never retried (a relay
// that ignores returns), or with the budget's round trips fitted. At Max
// with retries and fewer round trips fitted, the machine was too slow for
// the outage to tell a relay that backs off from one that does not.
func (u Unbind) settled(held time.Duration, pace check.RetryPace) (stop bool, closed string) {
	fits := func(rounds int) bool { return pace.Cycle() > 0 && held >= time.Duration(rounds)*pace.Cycle() }
	stop = held >= u.Duration && (fits(u.Rounds) || pace.Failed > 0) || held >= max(u.Max, u.Duration)
	switch {
	// At Max the budget's own round trips are enough (the margin is
	// spent): a relay that does not back off, a row retried once per
	// round trip, has gone through it.
	case !stop || fits(budgetOf(u.Rounds)) || pace.Failed > 0:
		return stop, ""
	case pace.Retries == 0 && pace.Claims > 0:
		return true, ""
	case pace.Retries == 0:
		return true, "no relay claimed or retried a row in the longest outage"
	case pace.Cycle() == 0:
		return true, "the relays retried, and no round trip of theirs was measured"
	default:
		return true, fmt.Sprintf("the relays' round trips too slow for the outage to tell a relay that backs off: %.1f of %d fitted in %s",
			float64(held)/float64(pace.Cycle()), u.Rounds, held.Round(time.Millisecond))
	}
}
