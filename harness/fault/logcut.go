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
	"github.com/faultline-dev/faultline/protocol"
)

// LogStreamCut cuts a log relay's replication connection while changes
// streamed to it are not yet confirmed by the broker. What Process (a
// relay that tails logical replication) sends the broker is dropped (a
// timeout toxic on its broker link), so no publish of a row committed from
// then on is confirmed; once such a row has committed, the slot's
// walsender has sent past it and the relay has answered the server twice
// since (so it has read the row), the relay's database link goes down and
// stays down until its walsender is seen gone. Then both links heal, and
// the relay, still running, streams again: from its slot's confirmed
// position, or, wrongly, from the last change it received, which skips
// the rows it was streamed and never published.
//
// Every step waits for what it names, at most Within each; one not seen
// leaves the window unopened. The relay's resumption after the heal (a
// new walsender on the slot) is watched as long and reported, not
// required: the invariants judge what the relay did.
type LogStreamCut struct {
	Process history.Ref   `json:"process"`
	Within  time.Duration `json:"within"`
	Trigger Trigger       `json:"trigger"`
}

// KindLogStreamCut is the log-stream-cut fault's kind, as a schedule
// names it.
const KindLogStreamCut = "log-stream-cut"

// Observes implements Observer: the row committed after the cut is read
// from the outbox's audit trail.
func (LogStreamCut) Observes() []history.Source { return []history.Source{history.SourceAudit} }

func init() {
	register(Desc[LogStreamCut]{
		Name:    KindLogStreamCut,
		Example: LogStreamCut{Process: "relay-1", Trigger: Trigger{AfterOrders: 10}, Within: 30 * time.Second},
		Doc:     "a log relay's broker link cut, then, once a row committed during the cut was streamed to it, its database link down until the slot's walsender is gone; both heal, the relay is not restarted",
		Opens:   protocol.LogStreamCut,
		Check: func(p LogStreamCut) error {
			return errors.Join(Need(KindLogStreamCut, p.Process != "", "process"), Need(KindLogStreamCut, p.Within > 0, "within"))
		},
		Window: func(c LogStreamCut) (history.Ref, string) { return c.Process, protocol.LogStreamCut },
		Touches: func(c LogStreamCut) Touch {
			return Touch{Instances: []history.Ref{c.Process}, Links: []history.Link{c.Process.Broker(), c.Process.DB()}}
		},
		Trigger: func(c LogStreamCut) Trigger { return c.Trigger },
		Shrink: func(_ LogStreamCut, sh *Shrink[LogStreamCut]) {
			sh.Trigger(func(c *LogStreamCut) *Trigger { return &c.Trigger })
		},
	})
}

// Describe implements Fault.
func (c LogStreamCut) Describe() result.Fault {
	return result.Fault{Kind: KindLogStreamCut, Target: string(c.Process),
		Detail: fmt.Sprintf("%s cut; once a row committed during the cut is streamed, %s down until the slot's walsender is gone (each seen within %s), then both heal; %s", c.Process.Broker(), c.Process.DB(), c.Within, c.Trigger)}
}

// Require implements Requirer.
func (c LogStreamCut) Require(env *Env) error {
	if _, err := env.Roles.Instance(c.Process); err != nil {
		return err
	}
	for _, link := range []history.Link{c.Process.Broker(), c.Process.DB()} {
		if _, err := env.Roles.Link(link); err != nil {
			return err
		}
	}
	if ob := env.Observe.Outbox; ob.Name == "" || ob.Database == "" {
		return errors.New("the rows streamed to the relay are read from the outbox's audit trail: the target file's observe section names no outbox table")
	}
	return nil
}

// Inject implements Fault.
func (c LogStreamCut) Inject(ctx context.Context, env *Env) result.Fault {
	return withWaits(func(w *waits) result.Fault { return c.inject(ctx, env, w) })
}

func (c LogStreamCut) inject(ctx context.Context, env *Env, w *waits) result.Fault {
	start := time.Now()
	brokerLink, dbLink := c.Process.Broker(), c.Process.DB()
	defer env.Landings.land(string(brokerLink), notLanded(brokerLink))
	defer env.Landings.land(string(dbLink), notLanded(dbLink))
	db, err := env.Link(dbLink)
	if err != nil {
		return record(c, start, false, err)
	}
	cut, err := cutLogRelay(ctx, env, c.Process, c.Trigger, c.Within)
	if err != nil {
		return record(c, start, false, err)
	}
	start = cut.at
	healBroker, pool, slot := cut.heal, cut.pool, cut.slot
	defer func() { _ = healBroker() }()
	row, err := streamedSinceCut(ctx, env, w, pool, slot, c.Within)
	if err != nil {
		return withUndo(record(c, start, false, err), healBroker)
	}
	// The walsender sent the row; the relay has read it once it has
	// answered the server twice since (between two answers its loop read
	// what was waiting), or once its stream is another walsender's.
	st, answers := row.state, map[time.Time]bool{}
	err = awaitLog(ctx, w, c.Within, fmt.Sprintf("%d answers of the relay on walsender %d since it sent row %s", replies, row.state.pid, row.eventID), func() (bool, error) {
		var err error
		if st, err = readSlot(ctx, pool, slot, row.commitBound); err != nil {
			return false, err
		}
		if st.reply != nil && st.reply.After(row.state.now) {
			answers[*st.reply] = true
		}
		return len(answers) >= replies || st.pid != row.state.pid, nil
	})
	if err != nil {
		return withUndo(record(c, start, false, err), healBroker)
	}
	if err := db.Down(ctx); err != nil {
		return withUndo(record(c, start, false, err), healBroker)
	}
	env.Landings.land(string(dbLink), nil)
	healDB := func() error { return db.Up(context.WithoutCancel(ctx)) }
	heal := func() error { return errors.Join(healBroker(), healDB()) }
	walsender := st.pid
	err = awaitLog(ctx, w, c.Within, fmt.Sprintf("slot %s's walsender (pid %d) gone", slot, walsender), func() (bool, error) {
		pid, err := slotPID(ctx, pool, slot)
		return pid != walsender, err
	})
	if err != nil {
		return withUndo(record(c, start, false, err), heal)
	}
	saw := fmt.Sprintf("row %s (committed during the cut, by %s) streamed by walsender %d, slot %s confirmed at %s; walsender %d gone", row.eventID, row.commitBound, row.state.pid, slot, st.confirmed, walsender)
	env.Logf("%s down: %s", dbLink, saw)
	r := record(c, start, true, nil)
	r.Detail += "; " + saw
	if err := heal(); err != nil {
		return notUndone(r, err)
	}
	healed := time.Now()
	// The relay's next walsender on the slot: reported, not required.
	var again int32
	resumed := poll.Until(ctx, c.Within, logPoll, func() (bool, error) {
		pid, err := slotPID(ctx, pool, slot)
		again = pid
		return pid != 0 && pid != walsender, err
	})
	if resumed == nil {
		r.Detail += fmt.Sprintf("; streaming again (walsender %d) %s after the heal", again, time.Since(healed).Round(time.Millisecond))
	} else if ctx.Err() == nil {
		r.Detail += fmt.Sprintf("; no new walsender on the slot within %s of the heal", c.Within)
	}
	return r
}

// slotPID is the process id of slot's walsender, 0 while none streams it.
func slotPID(ctx context.Context, pool *pgxpool.Pool, slot string) (int32, error) {
	var pid int32
	err := pool.QueryRow(ctx, `SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("slot %s is gone", slot)
	}
	return pid, err
}
