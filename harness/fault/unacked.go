package fault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/proxies"
)

// KindUnacked is the unacked-deliveries fault's kind, as a schedule names
// it.
const KindUnacked = "unacked"

// Unacked opens the window after a consumer received, before it committed,
// from outside: after the trigger it polls the broker's management API
// until the target's queue has deliveries held by its consumer and not yet
// acked (messages_unacknowledged above zero), then kills the consumer
// (SIGKILL, restarted after RestartAfter) or freezes it (SIGSTOP for Hold).
//
// With Cut, what the consumer sends over its database link is held back
// first (a timeout toxic, taken off at the kill), so nothing it receives
// from then on can commit, and it waits on its database holding what it
// took: the deliveries it holds are received, not committed: the broker
// counts them unacked or — a consumer that acks on receipt — counts acks
// since the cut. Its result says which the broker counted. (A link taken
// down instead fails the consumer's statements at once: one that then
// rejects its deliveries back to the queue holds each for a moment, the
// broker's statistics seldom show it, and the redeliveries run hot.)
//
// With MidTransaction, the cut waits until pg_stat_activity shows one of
// the consumer's sessions in a transaction that has written (on the
// effects' database): the cut then fails a transaction under way, whose
// deliveries a consumer that acks on receipt has acked already.
type Unacked struct {
	Process        history.Ref   `json:"process"` // the consumer instance reference
	Action         string        `json:"action"`  // ActKill or ActPause
	Hold           time.Duration `json:"hold"`
	RestartAfter   time.Duration `json:"restart_after"`
	Cut            history.Link  `json:"cut"`             // a link reference ("consumer.pg") held back from the trigger to the action; "" none
	MidTransaction bool          `json:"mid_transaction"` // with Cut: cut while a transaction of the consumer's is under way
	Trigger        Trigger       `json:"trigger"`
}

func init() {
	register(Desc[Unacked]{
		Name:    KindUnacked,
		Example: Unacked{Process: "consumer", Trigger: Trigger{AfterOrders: 5}, Action: ActKill, RestartAfter: RestartAfter},
		Doc:     "the consumer killed or frozen while the broker counts deliveries it holds unacked on the target's queue",
		Opens:   "consumer.after-receive (from outside)",
		Check: func(p Unacked) error {
			errs := []error{Need(KindUnacked, p.Process != "", "process")}
			if p.Action != ActKill && p.Action != ActPause {
				errs = append(errs, fmt.Errorf("unacked fault: action %q: want %s or %s", p.Action, ActKill, ActPause))
			}
			if p.MidTransaction && p.Cut == "" {
				errs = append(errs, errors.New("unacked fault: mid_transaction needs cut"))
			}
			return errors.Join(errs...)
		},
		Window: func(u Unacked) (history.Ref, string) { return u.Process, "consumer.after-receive" },
		Touches: func(u Unacked) Touch {
			t := Touch{Instances: []history.Ref{u.Process}}
			if u.Cut != "" {
				t.Links = []history.Link{u.Cut}
			}
			return t
		},
		Trigger: func(u Unacked) Trigger { return u.Trigger },
	})
}

// Describe implements Fault.
func (u Unacked) Describe() result.Fault {
	kind, detail := "crash", fmt.Sprintf("%s killed (SIGKILL) holding deliveries unacked, %s, restarted after %s", u.Process, u.Trigger, u.RestartAfter)
	if u.Action == ActPause {
		kind, detail = "pause", fmt.Sprintf("%s frozen (SIGSTOP) holding deliveries unacked, %s, held %s", u.Process, u.Trigger, u.Hold)
	}
	if u.Cut != "" {
		mid := ""
		if u.MidTransaction {
			mid = " while a transaction of its is under way"
		}
		detail = fmt.Sprintf("link %s held back%s, then ", u.Cut, mid) + detail
	}
	return result.Fault{Kind: kind, Target: string(u.Process), Detail: detail}
}

// Require implements Requirer: the instance and the target's queue.
func (u Unacked) Require(env *Env) error {
	if _, err := env.Roles.Instance(u.Process); err != nil {
		return err
	}
	if env.Topology.Queue == "" {
		return errors.New("unacked fault: the target's topology names no queue")
	}
	if u.Cut != "" {
		if _, err := env.Roles.Link(u.Cut); err != nil {
			return err
		}
	}
	if t := env.Observe.Effects; u.MidTransaction && (t.Name == "" || t.Database == "") {
		return errors.New("unacked fault: mid_transaction needs the effects table faultline can watch (observe.effects)")
	}
	return nil
}

// Inject implements Fault.
func (u Unacked) Inject(ctx context.Context, env *Env) result.Fault {
	return withWaits(func(w *waits) result.Fault { return u.inject(ctx, env, w) })
}

// inject is Inject, recording what it waits for in w.
func (u Unacked) inject(ctx context.Context, env *Env, w *waits) result.Fault {
	start := time.Now()
	p, err := env.Process(u.Process)
	if err != nil {
		return record(u, start, false, err)
	}
	if err := env.Wait(ctx, u.Trigger); err != nil {
		return record(u, start, false, err)
	}
	start = time.Now()
	var up func() error
	if u.Cut != "" {
		link, err := env.Link(u.Cut)
		if err != nil {
			return record(u, start, false, err)
		}
		var release func() error
		if u.MidTransaction {
			release, err = cutMidTransaction(ctx, env, w, u.Process, link)
		} else {
			release, err = holdBack(ctx, link)
		}
		if err != nil {
			return withUndo(record(u, start, false, err), release)
		}
		env.Logf("link %s held back", u.Cut)
		up = release
	}
	linkUp := func(r result.Fault) result.Fault {
		if up != nil {
			if err := up(); err != nil {
				r.UndoError = err.Error()
			}
			up = nil
		}
		return r
	}
	var seen string
	err = w.wait(causeHeld(env, u.Process), env.Deadline, func() (string, error) {
		var err error
		seen, _, err = waitHeldDeliveries(ctx, env, u.Cut != "", respawn{})
		return seen, err
	})
	if err != nil {
		return linkUp(record(u, start, false, err))
	}
	done := func(hit bool, err error) result.Fault {
		r := record(u, start, hit, err)
		r.Detail += " — " + seen
		return linkUp(r)
	}
	switch u.Action {
	case ActKill:
		if err := p.Kill(); err != nil {
			return done(false, err)
		}
		if up != nil {
			if err := up(); err != nil {
				return notUndone(done(true, nil), err)
			}
			up = nil
		}
		env.Logf("%s killed (SIGKILL): %s", u.Process, seen)
		if err := pause(ctx, u.RestartAfter); err != nil {
			return done(true, err)
		}
		if err := p.Restart(ctx); err != nil {
			return notUndone(done(true, nil), fmt.Errorf("restart %s: %w", u.Process, err))
		}
	case ActPause:
		if err := p.Pause(); err != nil {
			return done(false, err)
		}
		env.Logf("%s frozen (SIGSTOP): %s", u.Process, seen)
		holdErr := pause(ctx, u.Hold)
		if err := p.Resume(); err != nil {
			return notUndone(done(true, holdErr), fmt.Errorf("resume %s: %w", u.Process, err))
		}
		return done(true, holdErr)
	}
	return done(true, nil)
}

// waitHeldDeliveries polls the target queue's counters (published by the
// broker every statistics interval) until its consumer holds deliveries
// unacked, up to the fault deadline, and says what the broker counted.
//
// When nothing can commit (cut: the consumer's database link went down as
// the wait began), an ack is the surer sign: the first reading a
// two statistics intervals after the cut is the baseline, and an ack the
// broker counts past it is of a delivery the consumer could not have
// committed — it acked on receipt. Held deliveries alone are taken only
// once the consumer had cutDwell to show such an ack: an ack-on-receipt
// consumer also holds its prefetched deliveries unacked, and killed at
// once it would have acked nothing it could lose. After a respawn (after
// set), a reading is taken only two statistics intervals after it, and
// only with as many consumers as before the kill: the broker's figures are
// then of the incarnation started, not of the one killed before it or of
// another consumer alone. It returns the queue's consumers as well.
func waitHeldDeliveries(ctx context.Context, env *Env, cut bool, after respawn) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, env.Deadline)
	defer cancel()
	if !after.at.IsZero() {
		// No reading before then is of the respawned incarnation.
		if err := pause(ctx, time.Until(after.at.Add(2*statsInterval))); err != nil {
			return "", 0, fmt.Errorf("wait for the broker's figures of the respawned consumer: %w", err)
		}
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	from := time.Now()
	baseline := -1
	var last error
	for {
		q, err := env.Infra.Queue(ctx, env.VHost, env.Topology.Queue)
		now := time.Now().Format("15:04:05.000")
		switch {
		case err != nil:
			last = err
		case q.Consumers < after.consumers:
			// the respawned incarnation's consumers are not all back
		case cut && baseline < 0 && time.Since(from) >= 2*statsInterval:
			// two intervals: acks of commits that completed just before
			// the cut are in the baseline, not counted after it
			baseline = q.Acked
		case cut && baseline >= 0 && q.Acked > baseline:
			return fmt.Sprintf("the broker counted %d acks on %s after the consumer's database link was cut, %d unacked, at %s",
				q.Acked-baseline, env.Topology.Queue, q.Unacked, now), q.Consumers, nil
		case q.Unacked > 0 && q.Consumers > 0 && (!cut || baseline >= 0 && time.Since(from) >= cutDwell):
			return fmt.Sprintf("the broker counted %d deliveries unacked on %s (%d consumer(s)) at %s", q.Unacked, env.Topology.Queue, q.Consumers, now), q.Consumers, nil
		}
		select {
		case <-ctx.Done():
			return "", 0, fmt.Errorf("the broker counted no delivery held by the consumer on %s within %s (last error: %v)", env.Topology.Queue, env.Deadline, last)
		case <-tick.C:
		}
	}
}

// holdBack holds back all that is sent over link from now (a timeout
// toxic: nothing more reaches the server, and the sender waits, its
// connections open); release takes the toxic off.
func holdBack(ctx context.Context, link *proxies.Link) (release func() error, err error) {
	held, err := link.Add(ctx, proxies.Timeout{Timeout: 0, Stream: proxies.Upstream})
	if err != nil {
		return nothingToUndo, fmt.Errorf("hold back what is sent over %s: %w", link.Name(), err)
	}
	return func() error {
		if err := held.Remove(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("remove the toxic on %s: %w", link.Name(), err)
		}
		return nil
	}, nil
}

// cutMidTransaction waits, at most the fault deadline, until a session of
// the consumer's is in a transaction that has written to the watched
// effects table (effectWriters); then it holds back all the consumer sends
// over link (a timeout toxic: nothing more reaches the server, not even a
// COMMIT a latency toxic still holds) and terminates those backends. The
// window opened only if one of those transactions aborted (txid_status):
// one that committed between the look and the hold failed nothing, and
// the next one is waited for, within the fault deadline. w records the
// wait; release takes the toxic off.
func cutMidTransaction(ctx context.Context, env *Env, w *waits, consumer history.Ref, link *proxies.Link) (release func() error, err error) {
	in, err := env.Roles.Instance(consumer)
	if err != nil {
		return nothingToUndo, err
	}
	effects := env.Observe.Effects
	pool, regclass, ok, why, err := effectsTable(ctx, env)
	if err != nil {
		return nothingToUndo, err
	}
	if !ok {
		return nothingToUndo, errors.New(why)
	}
	release = nothingToUndo
	err = w.wait(fmt.Sprintf("a transaction of %s's that has written to %s to be under way, for the cut to fail it (pg_stat_activity, pg_locks)", in.Name, effects.Name), env.Deadline, func() (string, error) {
		began := time.Now()
		// A transaction seen may commit before the hold lands (its COMMIT
		// already on its way): then nothing was failed, the hold is taken
		// off, and the next transaction is waited for.
		for looked := 0; ; {
			left := env.Deadline - time.Since(began)
			err := poll.Until(ctx, left, 10*time.Millisecond, func() (bool, error) {
				var one int
				err := pool.QueryRow(ctx, `SELECT 1 `+effectWriters+` LIMIT 1`, in.Name, regclass).Scan(&one)
				if errors.Is(err, pgx.ErrNoRows) {
					return false, nil
				}
				return err == nil, err
			})
			if err != nil {
				return "", fmt.Errorf("window not opened: no transaction of %s's under way that has written to %s (%d committed before the cut): %w", in.Name, effects.Name, looked, err)
			}
			if release, err = holdBack(ctx, link); err != nil {
				return "", err
			}
			aborted, n, err := terminateWriting(ctx, pool, in.Name, regclass)
			if err != nil {
				return "", err
			}
			if aborted != "" {
				return fmt.Sprintf("transaction %s aborted by the cut (%d seen before it committed first)", aborted, looked), nil
			}
			looked += max(n, 1)
			err = release()
			release = nothingToUndo
			if err != nil {
				return "", err
			}
		}
	})
	return release, err
}

// terminateWriting terminates the backends effectWriters selects (process
// name, effects table regclass), waiting for each (up to 5 s) to end so
// its transaction's fate is final, and says which of their transactions
// aborted ("" none) of how many.
func terminateWriting(ctx context.Context, pool *pgxpool.Pool, name, regclass string) (aborted string, n int, err error) {
	rows, err := pool.Query(ctx, `SELECT backend_xid::text FROM (SELECT a.backend_xid, pg_terminate_backend(a.pid, 5000) `+effectWriters+`) t`, name, regclass)
	if err != nil {
		return "", 0, fmt.Errorf("terminate %s's transactions under way: %w", name, err)
	}
	xids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", 0, fmt.Errorf("terminate %s's transactions under way: %w", name, err)
	}
	for _, xid := range xids {
		status, err := xidStatus(ctx, pool, xid)
		if err != nil {
			return "", 0, err
		}
		if status == "aborted" {
			return xid, len(xids), nil
		}
	}
	return "", len(xids), nil
}

// causeHeld is what waitHeldDeliveries waits for, for a wait's record:
// consumer (its words) holding deliveries unacked.
func causeHeld(env *Env, consumer history.Ref) string {
	return fmt.Sprintf("the broker to count deliveries %s holds unacked on %s", consumer, env.Topology.Queue)
}

// respawn is a consumer started again without waiting for its health
// check: when, and how many consumers the queue had before its kill.
type respawn struct {
	at        time.Time
	consumers int
}

// slowLatency is what slowLink puts on each statement: a transaction
// (BEGIN, its statements, COMMIT) takes about a second — longer than the
// broker's half-second statistics take to show what the consumer holds —
// while a connection and a lone ping still answer within a 2 s health
// check (at 1 s the reference's was never ready within 15 s). A ping
// queued in a pool behind the held deliveries answers much later, which
// is why the crash loop does not wait for the health check between kills.
const slowLatency = 300 * time.Millisecond

// slowLink slows each statement sent over the link ref (a consumer's
// database link) by slowLatency, so the consumer holds what it receives
// unacked while it commits: a fault that waits for held deliveries
// (waitHeldDeliveries) then finds them, where a consumer that commits in
// milliseconds holds nothing at most of the broker's samples, however
// long the wait. remove takes the latency off again.
func slowLink(ctx context.Context, env *Env, ref history.Link) (remove func() error, err error) {
	link, err := env.Link(ref)
	if err != nil {
		return nil, err
	}
	applied, err := link.Add(ctx, proxies.Latency{Latency: slowLatency, Stream: proxies.Upstream})
	if err != nil {
		return nil, fmt.Errorf("slow %s: %w", ref, err)
	}
	env.Logf("link %s slowed %s a statement", ref, slowLatency)
	return func() error {
		if err := applied.Remove(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("remove the toxic on %s: %w", ref, err)
		}
		return nil
	}, nil
}

// statsInterval bounds how stale the management API's counters are: the
// broker publishes them every collect_statistics_interval (500 ms on the
// local and docker providers) plus a margin.
const statsInterval = 600 * time.Millisecond

// cutDwell is how long after a cut an ack-on-receipt consumer is given to
// show an ack before held deliveries alone open the window: several of
// its retries of a failed transaction, several statistics intervals.
const cutDwell = 3 * time.Second
