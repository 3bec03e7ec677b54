package fault

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/protocol"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Unbind removes the consumer queue's binding for RoutingKey (empty: for
// every routing key of the target's topology), so publishes with that key
// are unroutable (returned to a mandatory publisher). With Duration > 0 the
// binding is restored after it; with 0 it stays removed.
//
// With Shape set the outage is judged by what the relays do in it, not by
// the clock: the bindings stay away at least Duration, and until the audit
// trail shows the shape of the relays' retries (history.RetryShape): a row
// given up on (Failed) inside it, or retries that back off (a row rests
// longer than new rows wait for their claim), or publishes into it written
// Published (returns not heeded). Each opens the window, and the
// invariants judge what it showed. Retries shown flat are held on to until
// a row is given up on; retries neither flat nor backing off when rows
// near the Budget end the outage unopened. Max bounds the wait: an outage
// that reached it having seen none of these did not open its window (the
// run is indeterminate unless an invariant broke; the gate runs it again),
// however slow the machine made the relays.
//
// An outage timed by the clock alone opened its window only if something
// was published into it: the broker's count of the vhost's unroutable
// messages (returned or dropped) grew. Counted after the bindings are
// back, while routable publishes cannot add to it.
type Unbind struct {
	Duration   time.Duration `json:"duration"`
	RoutingKey string        `json:"routing_key"`
	Trigger    Trigger       `json:"trigger"`
	Shape      bool          `json:"shape"`
	Max        time.Duration `json:"max"`
	// Budget is the relays' retry budget, when the scenario set it: an
	// outage judged by its shape ends before a relay that backs off could
	// spend it.
	Budget int `json:"budget"`
	// UntilThawed keeps the bindings away past Duration until the freeze
	// past the lease of this process (a Crash with UntilTakeover) has
	// ended and its late write is made (ThawedKey), at most the fault
	// deadline: the rows it held still bounce, unpublished, when that
	// write comes, however long the takeover took.
	UntilThawed history.Ref `json:"until_thawed"`
	// UntilPublished keeps the bindings away past Duration until the
	// broker counts a message published into the outage (unroutable), at
	// most Max (the fault deadline if 0): a relay slow to publish opens
	// the window late instead of not at all. Counted or not within the
	// bound, the window opened or did not.
	UntilPublished bool `json:"until_published"`
	// UntilSettled keeps the bindings away until the audit trail shows
	// this many rows claimed after they went and settled under that claim
	// (Published, a retry, Failed): the relays have published that much
	// into the outage and heard back from the broker. Reached within Max
	// (the fault deadline if 0), the window opened; not, it did not.
	UntilSettled int `json:"until_settled"`
}

// Observes implements Observer: an outage judged by its shape, or held
// until rows are settled in it, reads the outbox's audit trail; every one
// has the exchange's routings timed, so that an event published into it
// is placed routed nowhere by its eventId, whatever the outbox's own ids.
func (u Unbind) Observes() []history.Source {
	return append(auditIf(u.readsAudit()), history.SourceRouted)
}

// readsAudit says whether the outage reads the audit trail.
func (u Unbind) readsAudit() bool { return u.Shape || u.UntilSettled > 0 }

// paceEvery is how often an outage judged by its shape reads the audit
// trail.
const paceEvery = 100 * time.Millisecond

// KindUnbind is the unbind fault's kind, as a schedule names it.
const KindUnbind = "unbind"

func init() {
	register(Desc[Unbind]{
		Name:    KindUnbind,
		Example: Unbind{RoutingKey: "order.created", Trigger: Trigger{AfterOrders: 20}, Duration: 3 * time.Second},
		Doc:     "the queue's bindings taken away, so publishes are unroutable (returned to a mandatory publisher), restored after a while",
		Opens:   protocol.QueueUnroutable,
		Check: func(u Unbind) error {
			return Need(KindUnbind, !u.UntilPublished || u.Duration > 0 && !u.Shape, "a duration, and no shape, to hold until a publish is counted (until_published)")
		},
		Window:  func(Unbind) (history.Ref, string) { return "", protocol.QueueUnroutable },
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
					RidesOut: true, Keys: []string{KeyUnbind}})
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

// lateWrite waits until process's event log shows a status write (a mark,
// retry, failure or renewal, fenced or not, or an error) written at or
// after thawed: the write it was frozen before. A process that writes no
// event log is not waited for: its outage ends at the thaw.
func lateWrite(ctx context.Context, env *Env, process history.Ref, thawed time.Time) (string, error) {
	if in, err := env.Roles.Instance(process); err != nil || !in.EventLog {
		return "no event log to see its late write in: restored at the thaw", nil
	}
	e, err := env.waitLogFrom(ctx, process, 0, env.Deadline, func(e eventlog.Entry) bool {
		switch e.Event {
		case eventlog.Marked, eventlog.Retry, eventlog.FailedAlert, eventlog.Fenced, eventlog.Renewed, eventlog.ClaimLost, eventlog.ErrorOccurred:
			return !e.Time.Before(thawed)
		}
		return false
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s", e.Event, e.EventID), nil
}

// bound names the longest an outage held until something is seen lasts:
// Max, or the fault deadline where it is 0.
func (u Unbind) bound() string {
	if u.Max > 0 {
		return u.Max.String()
	}
	return "the fault deadline"
}

// Describe implements Fault.
func (u Unbind) Describe() result.Fault {
	d := "never restored"
	switch {
	case u.Shape:
		d = fmt.Sprintf("restored once the relays' retries show whether they back off (at least %s, at most %s)", u.Duration, u.Max)
	case u.UntilSettled > 0:
		d = fmt.Sprintf("restored once %d rows claimed in it were settled (at most %s)", u.UntilSettled, u.bound())
	case u.Duration > 0 && u.UntilPublished:
		d = fmt.Sprintf("restored after %s and once a publish into it is counted (at most %s)", u.Duration, u.bound())
	case u.Duration > 0 && u.UntilThawed != "":
		d = fmt.Sprintf("restored after %s and once %s is thawed and has made its late write", u.Duration, u.UntilThawed)
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
	var did bindings
	res := withWaits(func(w *waits) result.Fault { return u.inject(ctx, env, w, &did) })
	res.Unbound, res.Rebound, res.ByRetries = did.removed, did.restored, u.Shape
	return res
}

// bindings is what an unbind did to the queue's bindings: removed them,
// and restored them.
type bindings struct{ removed, restored bool }

// inject is Inject, recording what it waits for in w and what it did to
// the bindings in did.
func (u Unbind) inject(ctx context.Context, env *Env, w *waits, did *bindings) result.Fault {
	start := time.Now()
	if u.Trigger.PastRelease {
		defer env.Landings.land(ActedKey, errors.New("the unbind ended before the bindings were removed")) // after a landing: no-op
	}
	if err := env.Wait(ctx, u.Trigger); err != nil {
		return record(u, start, false, err)
	}
	conn, ch, err := env.Admin(ctx)
	if err != nil {
		return record(u, start, false, err)
	}
	defer conn.Close()
	if u.readsAudit() && env.Audit == nil {
		return record(u, start, false, fmt.Errorf("an outage judged by what the relays do in it needs the outbox's audit trail, which is not installed"))
	}
	var before infra.VHostInfo
	counted := !u.Shape && u.Duration > 0
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
	did.removed = true
	env.Logf("bindings %v removed", keys)
	if u.UntilSettled > 0 {
		return u.holdUntilSettled(ctx, env, w, ch, queues, keys, start, did)
	}
	if u.Trigger.PastRelease {
		env.Landings.land(ActedKey, nil)
	}
	if u.Duration <= 0 {
		return record(u, start, true, nil)
	}
	opened, closed, measured, holdErr := true, "", "", error(nil)
	if u.Shape {
		opened, closed, measured, holdErr = u.holdShaped(ctx, env, start)
		w.add("the relays' retries to show their shape (a row given up on, retries backing off, or publishes into the outage taken for published)",
			start, max(u.Max, u.Duration), strings.TrimPrefix(measured, "; "), unseen(opened, closed, holdErr))
	} else if u.UntilPublished {
		opened, measured, holdErr = u.holdUntilPublished(ctx, env, w, start, before)
		closed = "nothing was published while the bindings were gone"
	} else {
		holdErr = pause(ctx, u.Duration)
	}
	if u.UntilThawed != "" && holdErr == nil {
		// Not thawed, or no late write seen, within the deadline: the
		// freeze's own result says so; the bindings come back all the same.
		_ = w.wait(fmt.Sprintf("%s thawed and its late write made", u.UntilThawed), env.Deadline, func() (string, error) {
			wctx, cancel := context.WithTimeout(ctx, env.Deadline)
			defer cancel()
			thawed, err := env.Landings.waitAt(wctx, ThawedKey(u.UntilThawed))
			if err != nil {
				return "", err
			}
			return lateWrite(wctx, env, u.UntilThawed, thawed)
		})
		if ctx.Err() != nil {
			holdErr = ctx.Err()
		}
	}

	if err := rebind(env, ch, queues, keys); err != nil {
		return notUndone(u.result(start, opened, closed, measured, holdErr), err)
	}
	did.restored = true
	env.Logf("bindings %v restored%s", keys, measured)
	if counted && !u.UntilPublished && holdErr == nil {
		opened, measured, holdErr = countPublished(ctx, env, w, before, unroutableCountWait)
		closed = "nothing was published while the bindings were gone"
	}
	return u.result(start, opened, closed, measured, holdErr)
}

// holdUntilPublished keeps the bindings away until a publish into the
// outage is counted (countPublished), at most Max (the fault deadline if
// 0), and at least Duration from start; it reports whether one was
// counted and what it saw.
func (u Unbind) holdUntilPublished(ctx context.Context, env *Env, w *waits, start time.Time, before infra.VHostInfo) (opened bool, measured string, err error) {
	opened, measured, err = countPublished(ctx, env, w, before, cmp.Or(u.Max, env.Deadline))
	if !opened || err != nil {
		return opened, measured, err
	}
	seen := time.Since(start)
	if err := pause(ctx, u.Duration-seen); err != nil {
		return false, "", err
	}
	return true, fmt.Sprintf("%s, the first counted %s into the outage", measured, seen.Round(time.Millisecond)), nil
}

// holdUntilSettled keeps the bindings away (queues, keys on ch) until the
// audit trail shows UntilSettled rows claimed after they went and settled
// under that claim, at most Max (the fault deadline if 0), then restores
// them. The held role, if this fault goes past its release, is released
// once the trail's mark is taken: every claim after it publishes into the
// outage.
func (u Unbind) holdUntilSettled(ctx context.Context, env *Env, w *waits, ch *amqp.Channel, queues, keys []string, start time.Time, did *bindings) result.Fault {
	opened, closed, measured, err := u.settleInside(ctx, env, w, start)
	res := u.result(start, opened, closed, measured, err)
	if err := rebind(env, ch, queues, keys); err != nil {
		return notUndone(res, err)
	}
	did.restored = true
	env.Logf("bindings %v restored%s", keys, measured)
	return res
}

// settleInside marks the audit trail, releases a held role where this
// fault goes past its release, and waits for UntilSettled rows claimed
// after the mark to be settled; it reports whether they were, why not, and
// what it saw.
func (u Unbind) settleInside(ctx context.Context, env *Env, w *waits, start time.Time) (opened bool, closed, measured string, err error) {
	trail, err := env.Audit(ctx, 0)
	if err != nil {
		return false, "", "", fmt.Errorf("read the audit trail: %w", err)
	}
	var mark int64
	if len(trail) > 0 {
		mark = trail[len(trail)-1].ID
	}
	if u.Trigger.PastRelease {
		env.Landings.land(ActedKey, nil)
	}
	bound := cmp.Or(u.Max, env.Deadline)
	after, rows, settled := mark, []history.AuditRow(nil), 0
	waitErr := w.wait(fmt.Sprintf("%d rows claimed in the outage to be settled", u.UntilSettled), bound, func() (string, error) {
		err := poll.Until(ctx, bound, paceEvery, func() (bool, error) {
			more, err := env.Audit(ctx, after)
			if err != nil {
				return false, fmt.Errorf("read the audit trail: %w", err)
			}
			if len(more) > 0 {
				rows, after = append(rows, more...), more[len(more)-1].ID
				settled = history.SettledAfterClaim(rows)
			}
			return settled >= u.UntilSettled, nil
		})
		return fmt.Sprintf("%d rows settled", settled), err
	})
	if ctx.Err() != nil {
		return false, "", "", ctx.Err()
	}
	measured = fmt.Sprintf("; %d rows claimed in the outage settled in %s", settled, time.Since(start).Round(time.Millisecond))
	if waitErr != nil {
		return false, fmt.Sprintf("only %d of %d rows claimed in the outage were settled within %s", settled, u.UntilSettled, bound), measured, nil
	}
	return true, "", measured, nil
}

// rebind puts the bindings back, the tap last.
func rebind(env *Env, ch *amqp.Channel, queues, keys []string) error {
	for _, q := range slices.Backward(queues) {
		for _, key := range keys {
			if err := ch.QueueBind(q, key, env.Topology.Exchange, false, nil); err != nil {
				return fmt.Errorf("restore binding %s to %s: %w", key, q, err)
			}
		}
	}
	return nil
}

// unroutableCountWait bounds the wait for the broker's counters to show a
// message published into the outage: twenty statistics intervals (500 ms
// on the local and docker providers), so a broker slow to collect them
// still shows the count. Only an outage nothing was published into waits
// all of it, and its window did not open.
const unroutableCountWait = 10 * time.Second

// countPublished waits, at most within, until the broker's count of the
// vhost's unroutable messages grows past before: a message published into
// the outage (returned or dropped). While the bindings are gone only such
// publishes add to it, and after they are back routable ones cannot, so
// it may be read during the outage or after it. w records the wait; it
// reports whether a publish was counted and what it saw.
func countPublished(ctx context.Context, env *Env, w *waits, before infra.VHostInfo, within time.Duration) (opened bool, measured string, err error) {
	counted := 0
	waitErr := w.wait("the broker to count a message published into the outage (unroutable)", within, func() (string, error) {
		err := poll.Until(ctx, within, paceEvery, func() (bool, error) {
			now, err := env.Infra.VHost(ctx, env.VHost)
			if err != nil {
				return false, fmt.Errorf("count unroutable messages: %w", err)
			}
			counted = now.Unroutable - before.Unroutable
			return counted > 0, nil
		})
		return fmt.Sprintf("%d unroutable messages", counted), err
	})
	if ctx.Err() != nil {
		return false, "", ctx.Err()
	}
	if waitErr != nil {
		return false, fmt.Sprintf("; the broker counted no unroutable message in %s", within), nil
	}
	return true, fmt.Sprintf("; %d unroutable messages", counted), nil
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

// holdShaped keeps the bindings away until the relays' retries show their
// shape, reading the audit trail every paceEvery from the moment the
// bindings went (its mark: claims after it publish into the outage); it
// reports whether the window opened (and why not if it did not) and what
// it saw.
func (u Unbind) holdShaped(ctx context.Context, env *Env, start time.Time) (opened bool, closed, measured string, err error) {
	trail, err := env.Audit(ctx, 0)
	if err != nil {
		return false, "", "", fmt.Errorf("read the audit trail: %w", err)
	}
	var mark int64
	if len(trail) > 0 {
		mark = trail[len(trail)-1].ID
	}
	after := mark
	shape := history.MeasureRetryShape(trail, mark)
	failedAt := time.Duration(-1) // how long it was held when a row was first seen given up on
	tick := time.NewTicker(paceEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, "", "", ctx.Err()
		case <-tick.C:
		}
		more, err := env.Audit(ctx, after)
		if err != nil {
			return false, "", "", fmt.Errorf("watch the outage: %w", err)
		}
		if len(more) > 0 { // the shape changes only with the trail
			trail, after = append(trail, more...), more[len(more)-1].ID
			shape = history.MeasureRetryShape(trail, mark)
		}
		held := time.Since(start)
		if shape.Failed > 0 && failedAt < 0 {
			failedAt = held
		}
		if stop, closed := u.settled(held, failedAt, shape); stop {
			return closed == "", closed, fmt.Sprintf("; held %s: %s", held.Round(time.Millisecond), shape), nil
		}
	}
}

// settled says whether an outage held this long, with the relays' retries
// of this shape, ends, and, when it ends without opening its window, why
// not ("" when it opened); failedAt is how long it had been held when a row
// was first seen given up on (negative: none yet).
//
// A row given up on inside the outage's least (Duration) opens it: the
// scenario's budget is one that rides out that much, and a slower machine
// only spaces retries further apart, so a relay that backs off cannot
// spend it sooner. A row given up on later opens it only under retries
// shown flat (or before its budget was spent): a relay that backs off
// spends its budget in an outage longer than its backoff, which a loaded
// machine stretches, so such a row says nothing of the relay. Past
// Duration it also ends, opened, once the retries backed off or rows
// published into it were written Published. Once a row nears the retry
// budget (one retry short of it) past Duration, it ends at once if the
// retries backed off (opened) or are not shown flat (not opened: holding
// on could make a relay that backs off give a row up, and that is not its
// fault); flat retries are held on to, until a row is given up on. At Max,
// having seen none of these, it ends without opening its window.
func (u Unbind) settled(held, failedAt time.Duration, shape history.RetryShape) (stop bool, closed string) {
	nearBudget := u.Budget > 0 && shape.MostRetries >= u.Budget-1
	switch {
	case shape.Failed > 0 && failedAt < u.Duration:
		return held >= u.Duration, ""
	case shape.Failed > 0 && nearBudget && !shape.Flat():
		return true, fmt.Sprintf("a row was given up on %s into the outage after spending its budget of %d, the retries not shown flat: the outage may have outlasted its backoff", failedAt.Round(time.Millisecond), u.Budget)
	case shape.Failed > 0 && u.Budget == 0 && !shape.Flat():
		return true, fmt.Sprintf("a row was given up on %s into the outage, the retries not shown flat and no budget known: the outage may have outlasted its backoff", failedAt.Round(time.Millisecond))
	case shape.Failed > 0 || shape.PublishedInside > 0:
		return held >= u.Duration, ""
	case shape.BackedOff():
		return held >= u.Duration || nearBudget, ""
	case nearBudget && !shape.Flat() && held >= u.Duration:
		return true, fmt.Sprintf("a row came within a retry of its budget of %d with their retries neither shown backing off nor shown flat", u.Budget)
	case held < max(u.Max, u.Duration):
		return false, ""
	case shape.Claims == 0:
		return true, fmt.Sprintf("no relay claimed a row in %s", held.Round(time.Millisecond))
	default:
		return true, fmt.Sprintf("in %s no row was given up on, no retries backed off and nothing was taken for published", held.Round(time.Millisecond))
	}
}
