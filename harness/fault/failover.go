package fault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
)

// KindFailover is the failover fault's kind, as a schedule names it.
const KindFailover = "failover"

// Failover cuts the database's standby off from its primary for Hold, so
// the commits made meanwhile reach the primary only, then SIGKILLs the
// primary and promotes the standby: the promoted server never had them.
// The processes and faultline reach "the primary" through an address the
// infrastructure re-points on promotion. Its result says which WAL range
// was lost; the window opened only if some was (LostBytes above zero).
//
// On a synchronous standby the commits made during Hold wait for it; a
// client whose wait is cancelled (a statement timeout) has its commit
// visible on the primary, and lost with it.
//
// With CancelWaits (a synchronous standby), faultline cancels, as a
// client's statement timeout would, every commit waiting for the standby
// during Hold: each is then visible on the primary, and a relay may
// publish it before the primary dies.
type Failover struct {
	Trigger     Trigger       `json:"trigger"`
	Hold        time.Duration `json:"hold"`
	Synchronous bool          `json:"synchronous"` // the standby is synchronous: the run needs one
	CancelWaits bool          `json:"cancel_waits"`
}

func init() {
	register(Desc[Failover]{
		Name:    KindFailover,
		Example: Failover{Trigger: Trigger{AfterOrders: 40}, Hold: 2 * time.Second},
		Doc:     "the database's primary killed with commits its standby never received, and the standby promoted",
		Opens:   protocol.PrimaryFailover,
		Check: func(p Failover) error {
			return Need(KindFailover, p.Hold > 0, "hold")
		},
		Window:  func(Failover) (history.Ref, string) { return "", "" },
		Touches: func(Failover) Touch { return Touch{Shared: []string{"database"}} },
		Trigger: func(f Failover) Trigger { return f.Trigger },
		// Explored where the target has a database: an asynchronous
		// failover mid-stream. What it loses (a phantom downstream of a
		// fact gone) is a finding — the documented limit of asynchronous
		// promotion, which database-failover-async measures.
		Enumerate: func(s *Surface, _ int) []Candidate {
			if !s.Standby {
				return nil
			}
			return []Candidate{{Faults: []Fault{Failover{Trigger: Trigger{AfterOrders: 20}, Hold: 2 * time.Second}}}}
		},
		Shrink: func(_ Failover, sh *Shrink[Failover]) {
			sh.Trigger(func(f *Failover) *Trigger { return &f.Trigger })
		},
	})
}

// Describe implements Fault.
func (f Failover) Describe() result.Fault {
	standby := "asynchronous"
	if f.Synchronous {
		standby = "synchronous"
	}
	cancel := ""
	if f.CancelWaits {
		cancel = ", the commits waiting for it cancelled as a client timeout would"
	}
	return result.Fault{Kind: KindFailover, Target: "database", Detail: fmt.Sprintf("%s standby cut off %s for %s%s, then the primary killed (SIGKILL) and the standby promoted", standby, f.Trigger, f.Hold, cancel)}
}

// Needs implements Needs: a database with a standby of the kind asked.
func (f Failover) Needs() []string {
	if f.Synchronous {
		return []string{CapStandbySync}
	}
	return []string{CapStandby}
}

// Require implements Requirer.
func (f Failover) Require(env *Env) error {
	_, err := replicated(env, f.Synchronous)
	return err
}

// replicated is the run's database with a standby of the kind asked.
func replicated(env *Env, synchronous bool) (infra.Replicated, error) {
	r, ok := env.Infra.(infra.Replicated)
	if !ok {
		return nil, errors.New("needs a database with a standby, and the run's has none")
	}
	if r.Synchronous() != synchronous {
		return nil, fmt.Errorf("needs a standby with synchronous %t, and the run's has %t", synchronous, r.Synchronous())
	}
	return r, nil
}

// syncWaitPoll is how often the commits waiting for a synchronous standby
// are looked for and cancelled.
const syncWaitPoll = 100 * time.Millisecond

// cancelSyncWaits cancels, for hold, every backend waiting for the
// synchronous standby (wait_event SyncRep): PostgreSQL then ends the
// wait with a warning, the commit already written and visible locally.
// It says how many it cancelled.
func cancelSyncWaits(ctx context.Context, env *Env, hold time.Duration) (int, error) {
	var pool *pgxpool.Pool
	for _, p := range env.DB {
		pool = p
		break
	}
	if pool == nil {
		return 0, errors.New("cancel the commits waiting for the standby: the run has no database")
	}
	ctx, cancel := context.WithTimeout(ctx, hold)
	defer cancel()
	n := 0
	for {
		var k int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep') c`).Scan(&k)
		if err == nil {
			n += k
		}
		if pause(ctx, syncWaitPoll) != nil {
			return n, nil
		}
	}
}

// Inject implements Fault.
func (f Failover) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	var seen states
	done := func(hit bool, err error) result.Fault {
		r := record(f, start, hit, err)
		r.States = seen
		return r
	}
	db, err := replicated(env, f.Synchronous)
	if err != nil {
		return done(false, err)
	}
	if err := env.Wait(ctx, f.Trigger); err != nil {
		return done(false, err)
	}
	start = time.Now()
	if err := db.HoldReplication(ctx); err != nil {
		return done(false, fmt.Errorf("hold replication: %w", err))
	}
	seen.add(LaneDatabase, "held", "standby cut off from the primary")
	env.Logf("standby cut off from the primary")
	if f.CancelWaits {
		n, err := cancelSyncWaits(ctx, env, f.Hold)
		if err != nil {
			return done(false, err)
		}
		seen.add(LaneDatabase, "cancelled", "%d commits waiting for the standby cancelled: visible on the primary only", n)
		env.Logf("%d commits waiting for the standby cancelled", n)
	} else if err := pause(ctx, f.Hold); err != nil {
		return done(false, err)
	}
	slot, pool := f.relaySlot(ctx, env, &seen)
	fo, err := db.Failover(context.WithoutCancel(ctx))
	if err != nil {
		return done(false, fmt.Errorf("fail over: %w", err))
	}
	seen.add(LaneDatabase, "promoted", "primary killed at %s; standby promoted at %s in %s: %d bytes of WAL lost", fo.PrimaryLSN, fo.StandbyLSN, fo.Took.Round(time.Millisecond), fo.LostBytes)
	env.Logf("primary killed at WAL %s, standby promoted at %s in %s: %d bytes lost", fo.PrimaryLSN, fo.StandbyLSN, fo.Took.Round(time.Millisecond), fo.LostBytes)
	if fo.LostBytes <= 0 {
		return done(false, fmt.Errorf("the standby had every commit when it was promoted (primary %s, standby %s): no commit was lost", fo.PrimaryLSN, fo.StandbyLSN))
	}
	if slot == nil {
		return done(true, nil)
	}
	w := followSlot(ctx, env, pool, slot, fo.StandbyLSN, &seen)
	r := done(true, nil)
	r.Slot = slot
	r.Waits = append(r.Waits, w)
	r.Detail += "; " + slot.Line()
	return r
}

// slotWithin bounds how long a failover watches the promoted server for a
// log relay's slot. A relay that has not created it again by then is
// reported as stopped: what it never streamed is the documented limit
// either way (scenarios' expectFailoverLimit).
const slotWithin = 30 * time.Second

// relaySlot reads, before the primary dies, a log relay's slot in the
// outbox's database (the run's own) and its confirmed position; nil where
// the target's relay is not a log relay or no one slot is there.
func (Failover) relaySlot(ctx context.Context, env *Env, seen *states) (*result.SlotFate, *pgxpool.Pool) {
	pool := env.DB[env.Observe.Outbox.Database]
	if env.RelayModel != history.ModelLog || pool == nil {
		return nil, nil
	}
	slots, err := infra.LogSlots(ctx, pool)
	switch {
	case err != nil:
		env.Logf("the relay's slot before the failover: %v", err)
		return nil, nil
	case len(slots) != 1:
		env.Logf("%d logical slots in the outbox's database before the failover: which is the relay's is not known, none followed", len(slots))
		return nil, nil
	}
	s := &result.SlotFate{Name: slots[0].Name, Confirmed: slots[0].Confirmed}
	seen.add(LaneDatabase, "slot", "slot %s confirmed up to %s on the primary", s.Name, s.Confirmed)
	return s, pool
}

// followSlot watches the promoted server, at most slotWithin, for slot:
// kept (its restart position from before the promotion) or created again
// (a position at or past promoted, where the promoted server's history
// begins). A slot still being created has no confirmed position yet: it
// counts once it has one, from where it streams. It fills slot in and
// returns the wait.
func followSlot(ctx context.Context, env *Env, pool *pgxpool.Pool, slot *result.SlotFate, promoted string, seen *states) result.Wait {
	from := time.Now()
	err := poll.Until(ctx, slotWithin, logPoll, func() (bool, error) {
		var kept bool
		err := pool.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn::text, ''), coalesce(restart_lsn < $2::pg_lsn, false), clock_timestamp()
			FROM pg_replication_slots WHERE slot_name = $1 AND confirmed_flush_lsn IS NOT NULL`, slot.Name, promoted).Scan(&slot.At, &kept, &slot.SeenAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, err // the pool's connections to the killed primary fail first
		}
		slot.Kept, slot.Recreated = kept, !kept
		return true, nil
	})
	slot.WatchedMS = time.Since(from).Milliseconds()
	seen.add(LaneDatabase, "slot", "%s", slot.Line())
	env.Logf("%s", slot.Line())
	cause := fmt.Sprintf("the relay's slot %s on the promoted server", slot.Name)
	if err != nil && ctx.Err() == nil {
		return waitOf(cause, time.Since(from), slotWithin, "", fmt.Errorf("not seen: %w", err))
	}
	return waitOf(cause, time.Since(from), slotWithin, slot.Line(), err)
}

// Observes implements Observer: an effect faultline saw commit on the old
// primary and the promoted server does not have is a commit the promotion
// lost, not one the consumer never made. Where the tables cannot be
// watched, the failover runs without them.
func (Failover) Observes() []history.Source { return []history.Source{history.SourceCommitsSeen} }
