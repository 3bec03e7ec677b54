package fault

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/proxies"
)

// LogKill opens a log relay's position window from outside: what Process
// (a relay that tails logical replication) sends the broker is dropped (a
// timeout toxic on its broker link), so nothing committed from then on can
// be published; once an outbox row commits after the cut, and the relay's
// walsender has sent past that commit, the relay is SIGKILLed the moment
// its slot's confirmed position passes the row, or once it has answered
// the server twice since without passing it. Then the link heals and the
// relay is restarted: the server resends from the confirmed position, so
// a relay that confirmed the row without the broker's confirm has lost it.
//
// Every step waits for what it names, in pg_replication_slots,
// pg_stat_replication and the outbox's audit trail, at most Within each;
// one not seen leaves the window unopened. The run's slot is the one
// logical slot active in the outbox's database (the run's own database).
type LogKill struct {
	Process      history.Ref   `json:"process"`
	Within       time.Duration `json:"within"`
	RestartAfter time.Duration `json:"restart_after"`
	Trigger      Trigger       `json:"trigger"`
}

// KindLogKill is the log-kill fault's kind, as a schedule names it.
const KindLogKill = "log-kill"

// logPoll is how often a log kill reads the slot and the walsender.
const logPoll = 20 * time.Millisecond

// replies is how many answers the relay gives the server, after it was
// sent the row's commit, before a position held behind the row counts as
// held: a relay that confirms a change on receipt reports it in the first
// answer composed after it read the change.
const replies = 2

// Observes implements Observer: the row committed after the cut is read
// from the outbox's audit trail.
func (LogKill) Observes() []history.Source { return []history.Source{history.SourceAudit} }

func init() {
	register(Desc[LogKill]{
		Name:    KindLogKill,
		Example: LogKill{Process: "relay-1", Trigger: Trigger{AfterOrders: 10}, Within: 30 * time.Second, RestartAfter: RestartAfter},
		Doc:     "a log relay's broker link cut, the relay killed once its slot's position passes a row committed during the cut (or it answered the server twice without passing it), then restarted",
		Opens:   protocol.LogPositionAhead,
		Check: func(p LogKill) error {
			return errors.Join(Need(KindLogKill, p.Process != "", "process"), Need(KindLogKill, p.Within > 0, "within"))
		},
		Window: func(k LogKill) (history.Ref, string) { return k.Process, protocol.LogPositionAhead },
		Touches: func(k LogKill) Touch {
			return Touch{Instances: []history.Ref{k.Process}, Links: []history.Link{k.Process.Broker()}}
		},
		Trigger: func(k LogKill) Trigger { return k.Trigger },
		Shrink: func(_ LogKill, sh *Shrink[LogKill]) {
			sh.Trigger(func(k *LogKill) *Trigger { return &k.Trigger })
		},
	})
}

// Describe implements Fault.
func (k LogKill) Describe() result.Fault {
	return result.Fault{Kind: KindLogKill, Target: string(k.Process),
		Detail: fmt.Sprintf("%s cut; SIGKILL once the slot's position passes a row committed during the cut or %d answers leave it behind (each seen within %s), restarted after %s; %s", k.Process.Broker(), replies, k.Within, k.RestartAfter, k.Trigger)}
}

// Require implements Requirer.
func (k LogKill) Require(env *Env) error {
	if _, err := env.Roles.Instance(k.Process); err != nil {
		return err
	}
	if _, err := env.Roles.Link(k.Process.Broker()); err != nil {
		return err
	}
	if ob := env.Observe.Outbox; ob.Name == "" || ob.Database == "" {
		return errors.New("the relay's position is judged against rows committed to the outbox: the target file's observe section names no outbox table")
	}
	return nil
}

// Inject implements Fault.
func (k LogKill) Inject(ctx context.Context, env *Env) result.Fault {
	return withWaits(func(w *waits) result.Fault { return k.inject(ctx, env, w) })
}

func (k LogKill) inject(ctx context.Context, env *Env, w *waits) result.Fault {
	start := time.Now()
	link := k.Process.Broker()
	defer env.Landings.land(string(link), notLanded(link))
	p, err := env.Process(k.Process)
	if err != nil {
		return record(k, start, false, err)
	}
	cut, err := cutLogRelay(ctx, env, k.Process, k.Trigger, k.Within)
	if err != nil {
		return record(k, start, false, err)
	}
	start = cut.at
	heal, pool, slot := cut.heal, cut.pool, cut.slot
	defer func() { _ = heal() }()

	saw, err := k.positioned(ctx, env, w, pool, slot)
	if err != nil {
		return record(k, start, false, err)
	}
	if err := p.Kill(); err != nil {
		return record(k, start, true, err)
	}
	env.Logf("%s killed (SIGKILL): %s", k.Process, saw)
	r := record(k, start, true, nil)
	r.Detail += "; " + saw
	if err := heal(); err != nil {
		return notUndone(r, err)
	}
	if err := pause(ctx, k.RestartAfter); err != nil {
		r.Error = err.Error()
		return r
	}
	if err := p.Restart(ctx); err != nil {
		return notUndone(r, fmt.Errorf("restart %s: %w", k.Process, err))
	}
	return r
}

// positioned waits, the link cut, for a row committed after the cut, the
// walsender past its commit, and then the slot's position past it or the
// relay's answers leaving it behind; it says which.
func (k LogKill) positioned(ctx context.Context, env *Env, w *waits, pool *pgxpool.Pool, slot string) (string, error) {
	row, err := streamedSinceCut(ctx, env, w, pool, slot, k.Within)
	if err != nil {
		return "", err
	}
	st := row.state
	since := st.now // the server's clock when the row was seen sent
	answers := map[time.Time]bool{}
	err = awaitLog(ctx, w, k.Within, fmt.Sprintf("slot %s's position past %s, or %d answers of the relay", slot, row.commitBound, replies), func() (bool, error) {
		var err error
		if st, err = readSlot(ctx, pool, slot, row.commitBound); err != nil {
			return false, err
		}
		if st.reply != nil && st.reply.After(since) {
			answers[*st.reply] = true
		}
		return st.passed || len(answers) >= replies, nil
	})
	if err != nil {
		return "", err
	}
	if st.passed {
		return fmt.Sprintf("slot %s's position %s passed row %s (committed during the cut, by %s), never published", slot, st.confirmed, row.eventID, row.commitBound), nil
	}
	return fmt.Sprintf("slot %s's position %s held behind row %s (committed during the cut, by %s) over %d answers", slot, st.confirmed, row.eventID, row.commitBound, len(answers)), nil
}

// logCut is a log relay's broker link cut (a timeout toxic: what it sends
// the broker dropped): the outbox's pool, the relay's slot, when the cut
// landed, and its heal (once; later calls do nothing).
type logCut struct {
	pool *pgxpool.Pool
	slot string
	at   time.Time
	heal func() error
}

// cutLogRelay waits for trigger and for the one logical slot active in the
// outbox's database (at most within), then cuts what process sends the
// broker, and says so on its broker link's landing: where both log relay
// windows begin.
func cutLogRelay(ctx context.Context, env *Env, process history.Ref, trigger Trigger, within time.Duration) (logCut, error) {
	link := process.Broker()
	l, err := env.Link(link)
	if err != nil {
		return logCut{}, err
	}
	pool, ok := env.DB[env.Observe.Outbox.Database]
	if !ok {
		return logCut{}, fmt.Errorf("no pool for the outbox's database %q", env.Observe.Outbox.Database)
	}
	if err := env.Wait(ctx, trigger); err != nil {
		return logCut{}, err
	}
	slot, err := activeSlot(ctx, pool, within)
	if err != nil {
		return logCut{}, err
	}
	at := time.Now()
	toxic, err := l.Add(ctx, proxies.Timeout{Timeout: 0, Stream: proxies.Upstream})
	if err != nil {
		return logCut{}, err
	}
	env.Landings.land(string(link), nil)
	env.Logf("%s cut (what %s sends the broker dropped); slot %s", link, process, slot)
	healed := false
	return logCut{pool: pool, slot: slot, at: at, heal: func() error {
		if healed {
			return nil
		}
		healed = true
		return toxic.Remove(context.WithoutCancel(ctx))
	}}, nil
}

// streamedRow is an outbox row committed after a log relay's broker link
// was cut and streamed to the relay since: the row's event, a WAL position
// its commit record ends at or before, and the slot as it was when the
// walsender was seen past it.
type streamedRow struct {
	eventID, commitBound string
	state                slotState
}

// streamedSinceCut waits, the relay's broker link cut, for an outbox row
// committed after the cut (the audit trail) and then for the slot's
// walsender to have sent past its commit (pg_stat_replication.sent_lsn),
// each at most within.
func streamedSinceCut(ctx context.Context, env *Env, w *waits, pool *pgxpool.Pool, slot string, within time.Duration) (streamedRow, error) {
	var row streamedRow
	trail, err := env.Audit(ctx, 0)
	if err != nil {
		return row, fmt.Errorf("read the audit trail: %w", err)
	}
	var mark int64 // read after the cut: a row above it committed after
	if len(trail) > 0 {
		mark = trail[len(trail)-1].ID
	}
	err = awaitLog(ctx, w, within, "an outbox row committed after the cut", func() (bool, error) {
		more, err := env.Audit(ctx, mark)
		if err != nil {
			return false, err
		}
		for _, a := range more {
			if a.Op == "INSERT" {
				row.eventID = a.EventID
				// Read after the row was seen committed: its commit record
				// ends at or before this position.
				return true, pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&row.commitBound)
			}
		}
		return false, nil
	})
	if err != nil {
		return row, err
	}
	err = awaitLog(ctx, w, within, fmt.Sprintf("slot %s's walsender past %s (row %s)", slot, row.commitBound, row.eventID), func() (bool, error) {
		var err error
		row.state, err = readSlot(ctx, pool, slot, row.commitBound)
		return row.state.sent, err
	})
	return row, err
}

// awaitLog polls done until it holds, at most within, and records the
// wait for cause in w; not seen by then, the window did not open.
func awaitLog(ctx context.Context, w *waits, within time.Duration, cause string, done func() (bool, error)) error {
	return w.wait(cause, within, func() (string, error) {
		err := poll.Until(ctx, within, logPoll, done)
		if err != nil && ctx.Err() == nil {
			return "", fmt.Errorf("window not opened: %w: %s: %w", errUnseen, cause, err)
		}
		return "", err
	})
}

// slotState is what the server says of a slot against a WAL position:
// whether its walsender has sent past it and its confirmed position passed
// it, that position, the walsender's last reply from the client, and the
// server's clock when read.
type slotState struct {
	sent, passed bool
	confirmed    string
	reply        *time.Time
	now          time.Time
	pid          int32 // the slot's walsender (active_pid), 0 while none
}

// readSlot reads slotState of slot against lsn.
func readSlot(ctx context.Context, pool *pgxpool.Pool, slot, lsn string) (slotState, error) {
	var st slotState
	err := pool.QueryRow(ctx, `SELECT coalesce(r.sent_lsn >= $2::pg_lsn, false), coalesce(s.confirmed_flush_lsn >= $2::pg_lsn, false),
			coalesce(s.confirmed_flush_lsn::text, ''), r.reply_time, clock_timestamp(), coalesce(s.active_pid, 0)
		FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
		WHERE s.slot_name = $1`, slot, lsn).Scan(&st.sent, &st.passed, &st.confirmed, &st.reply, &st.now, &st.pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, fmt.Errorf("slot %s is gone", slot)
	}
	return st, err
}

// activeSlot is the one logical replication slot in use in the pool's
// database, waited for at most within (a relay can be reconnecting).
func activeSlot(ctx context.Context, pool *pgxpool.Pool, within time.Duration) (string, error) {
	var slots []string
	var several error
	err := poll.Until(ctx, within, logPoll, func() (bool, error) {
		rows, err := pool.Query(ctx, `SELECT slot_name::text FROM pg_replication_slots
			WHERE database = current_database() AND slot_type = 'logical' AND active ORDER BY slot_name`)
		if err == nil {
			slots, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if len(slots) > 1 {
			several = fmt.Errorf("%d logical slots active in the outbox's database (%s): which is the relay's is not known", len(slots), strings.Join(slots, ", "))
			return true, nil
		}
		return len(slots) == 1, err
	})
	switch {
	case several != nil:
		return "", several
	case err != nil && ctx.Err() == nil:
		return "", fmt.Errorf("%w: no logical replication slot active in the outbox's database: %w", errUnseen, err)
	case err != nil:
		return "", err
	}
	return slots[0], nil
}

// slotBehindAtDeath says whether a log relay, just killed, died with its
// slot's confirmed position still behind the outbox row of eventID: its
// window (published, not yet confirmed past) was open. It waits, at most
// within, for no walsender to stream the slot (the dead relay's gone, so
// no answer of its can move the position any more), then compares the
// position with the row's insert in the audit trail (the commit comes
// after it). It says what it saw; with no slot, no audit trail or no
// insert of the event, it cannot tell and says so, with ok true.
func slotBehindAtDeath(ctx context.Context, env *Env, eventID string, within time.Duration) (ok bool, saw string, err error) {
	pool, found := env.DB[env.Observe.Outbox.Database]
	if !found || env.Audit == nil || eventID == "" {
		return true, "the slot's position at the kill not compared (no outbox database, audit trail or eventId)", nil
	}
	var slot infra.LogSlot
	var one bool
	err = poll.Until(ctx, within, logPoll, func() (bool, error) {
		var err error
		slot, one, err = infra.RelaySlot(ctx, pool)
		return !one || !slot.Active, err
	})
	if err != nil {
		return false, "", fmt.Errorf("window not opened: %w: the killed relay's walsender gone from its slot within %s: %w", errUnseen, within, err)
	}
	if !one {
		return true, "no one slot with a confirmed position at the kill: the position not compared", nil
	}
	trail, err := env.Audit(ctx, 0)
	if err != nil {
		return false, "", fmt.Errorf("read the audit trail: %w", err)
	}
	insert, passed := positionPassed(slot, trail, eventID)
	switch {
	case insert == 0:
		return true, fmt.Sprintf("no insert of %s in the audit trail: the position not compared", eventID), nil
	case passed:
		return false, "", fmt.Errorf("window not opened: %w: slot %s's position %s had passed the published row %s (inserted at byte %d) when the relay died", errUnseen, slot.Name, slot.Confirmed, eventID, insert)
	}
	return true, fmt.Sprintf("slot %s's position %s behind the published row %s when the relay died", slot.Name, slot.Confirmed, eventID), nil
}

// positionPassed finds eventID's outbox insert in the audit trail (its
// WAL position as bytes; 0: none) and says whether slot's confirmed
// position is past it. The row's commit ends after its insert, so a
// position at the insert has not confirmed the row.
func positionPassed(slot infra.LogSlot, trail []history.AuditRow, eventID string) (insert int64, passed bool) {
	for _, a := range trail {
		if a.Op == "INSERT" && a.EventID == eventID && a.LSN != 0 {
			return a.LSN, slot.ConfirmedBytes > a.LSN
		}
	}
	return 0, false
}
