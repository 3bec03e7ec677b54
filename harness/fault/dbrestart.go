package fault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
)

// DatabaseRestart crashes the run's PostgreSQL server at the commit of an
// outbox row and starts it again on its data: every backend SIGKILLed at
// once, the server recovering from its WAL, as after an OOM kill or a
// host's reboot. Every process loses its connections and reconnects; a
// log relay's slot comes back at the position last written to disk,
// which can be behind what the relay had confirmed, so the server streams
// those changes again.
//
// The processes' database links are down from the crash until faultline
// has read what the crash left — the outbox rows committed, the effects,
// a log relay's slot, with its own connections — so that no process
// writes before that is read: the processes see a server that takes a
// little longer to come back. The window opened only if the crash left a
// committed event without its effect (work in flight across the
// restart); where every one had taken effect, it did not.
//
// With Slow, a link ("consumer.pg") has each statement slowed by 300 ms
// from the trigger to the crash: a consumer that commits in milliseconds
// would otherwise have applied nearly everything the moment the server
// dies, and its transactions cut by the crash are much of what the window
// is about.
type DatabaseRestart struct {
	Trigger Trigger `json:"trigger"`
	// Within bounds the wait for an outbox commit after the trigger.
	Within time.Duration `json:"within"`
	Slow   history.Link  `json:"slow"` // a link reference slowed from the trigger to the crash; "" none
}

// KindDatabaseRestart is the database-restart fault's kind, as a schedule
// names it.
const KindDatabaseRestart = "database-restart"

// Observes implements Observer: the crash lands at an outbox commit, and
// the rows it left committed are read from the outbox's audit trail.
func (DatabaseRestart) Observes() []history.Source {
	return []history.Source{history.SourceCommits, history.SourceAudit}
}

func init() {
	register(Desc[DatabaseRestart]{
		Name:    KindDatabaseRestart,
		Example: DatabaseRestart{Trigger: Trigger{AfterOrders: 30}, Within: 30 * time.Second, Slow: "consumer.pg"},
		Doc:     "the database server crashed (every backend SIGKILLed) at an outbox commit and started again on its data; runs on a database of its own",
		Opens:   protocol.DatabaseRestart,
		Check: func(p DatabaseRestart) error {
			return Need(KindDatabaseRestart, p.Within > 0, "within")
		},
		Window: func(DatabaseRestart) (history.Ref, string) { return "", "" },
		Touches: func(d DatabaseRestart) Touch {
			t := Touch{Shared: []string{"database"}}
			if d.Slow != "" {
				t.Links = []history.Link{d.Slow}
			}
			return t
		},
		Trigger: func(d DatabaseRestart) Trigger { return d.Trigger },
		Shrink: func(_ DatabaseRestart, sh *Shrink[DatabaseRestart]) {
			sh.Trigger(func(d *DatabaseRestart) *Trigger { return &d.Trigger })
		},
	})
}

// Describe implements Fault.
func (d DatabaseRestart) Describe() result.Fault {
	slow := ""
	if d.Slow != "" {
		slow = fmt.Sprintf(" (link %s slowed %s a statement until then)", d.Slow, slowLatency)
	}
	return result.Fault{Kind: KindDatabaseRestart, Target: "database",
		Detail: fmt.Sprintf("the server crashed (every backend SIGKILLed) at the next outbox commit (seen within %s)%s, %s, and started again on its data", d.Within, slow, d.Trigger)}
}

// Needs implements Needs.
func (DatabaseRestart) Needs() []string { return []string{CapDatabaseRestart} }

// Require implements Requirer.
func (d DatabaseRestart) Require(env *Env) error {
	if ob := env.Observe.Outbox; ob.Name == "" || ob.Database == "" {
		return errors.New("what the crash left is read from the outbox's audit trail: the target file's observe section names no outbox table")
	}
	if d.Slow != "" {
		if _, err := env.Roles.Link(d.Slow); err != nil {
			return err
		}
	}
	return nil
}

// Inject implements Fault.
func (d DatabaseRestart) Inject(ctx context.Context, env *Env) result.Fault {
	return withWaits(func(w *waits) result.Fault { return d.inject(ctx, env, w) })
}

func (d DatabaseRestart) inject(ctx context.Context, env *Env, w *waits) result.Fault {
	start := time.Now()
	restarter, ok := env.Infra.(infra.DatabaseRestarter)
	if !ok {
		return record(d, start, false, fmt.Errorf("the %s provider cannot restart the database", env.Infra.Name()))
	}
	pool, ok := env.DB[env.Observe.Outbox.Database]
	if !ok {
		return record(d, start, false, fmt.Errorf("no pool for the outbox's database %q", env.Observe.Outbox.Database))
	}
	if env.Audit == nil {
		return record(d, start, false, errors.New("the outbox's audit trail is not installed"))
	}
	eq, epool, err := env.Query(&env.Contract.Effects, "effects")
	if err != nil {
		return record(d, start, false, err)
	}
	if err := env.Wait(ctx, d.Trigger); err != nil {
		return record(d, start, false, err)
	}
	// The latency comes off once the link is down (before the server is
	// back, so the recovery is not slowed), or when the fault ends sooner.
	unslow := func() error { return nil }
	if d.Slow != "" {
		remove, err := slowLink(ctx, env, d.Slow)
		if err != nil {
			return record(d, start, false, err)
		}
		done := false
		unslow = func() error {
			if done {
				return nil
			}
			done = true
			return remove()
		}
		defer func() { _ = unslow() }()
	}
	var at history.Commit
	err = w.wait("an outbox row committed", d.Within, func() (string, error) {
		wctx, cancel := context.WithTimeout(ctx, d.Within)
		defer cancel()
		var err error
		at, err = env.Commits.Wait(wctx, func(c history.Commit) bool { return c.Table == history.TableOutbox && c.Op == "INSERT" })
		if err != nil && ctx.Err() == nil {
			return "", fmt.Errorf("window not opened: %w: no outbox row committed within %s: %w", errUnseen, d.Within, err)
		}
		return at.EventID, err
	})
	if err != nil {
		return record(d, start, false, err)
	}
	// Read before the crash, for the report: the position the slot had
	// confirmed by then (it can only have moved on until the kill).
	var before infra.LogSlot
	var hadSlot bool
	if env.RelayModel == history.ModelLog {
		before, hadSlot, _ = infra.RelaySlot(ctx, pool)
	}
	start = time.Now()
	if err := restarter.CrashPostgres(ctx); err != nil {
		// Part of the server may be dead: whatever it is now, the
		// infrastructure is not trusted again (not undone).
		return notUndone(record(d, start, false, err), errors.Join(err, restarter.StartPostgres(context.WithoutCancel(ctx))))
	}
	env.Logf("database crashed at the commit of %s", at.EventID)
	r := record(d, start, true, nil)
	var up []func() error
	heal := func() error {
		var errs []error
		for _, u := range up {
			errs = append(errs, u())
		}
		up = nil
		return errors.Join(errs...)
	}
	for _, name := range dbLinks(env) {
		l := env.Links[name]
		if err := l.Down(ctx); err != nil {
			r.Error = fmt.Sprintf("hold %s down while the server restarts: %v", name, err)
			break
		}
		up = append(up, func() error { return l.Up(context.WithoutCancel(ctx)) })
	}
	crashed := time.Now()
	if err := unslow(); err != nil {
		return notUndone(r, errors.Join(err, heal()))
	}
	if err := restarter.StartPostgres(context.WithoutCancel(ctx)); err != nil {
		return notUndone(r, errors.Join(fmt.Errorf("start the database again: %w", err), heal()))
	}
	recovered := time.Since(crashed)
	// Faultline's own pools hold connections to the dead server.
	for _, p := range env.DB {
		p.Reset()
	}
	left, err := d.leftByCrash(ctx, env, eq, epool, pool, before, hadSlot)
	if herr := heal(); herr != nil {
		return notUndone(r, herr)
	}
	r.End = time.Now()
	r.EventIDs = []string{at.EventID}
	saw := fmt.Sprintf("crashed at the commit of %s, answering again %s later", at.EventID, recovered.Round(time.Millisecond))
	switch {
	case r.Error != "":
		r.Hit = false // a process may have reached the server first
	case err != nil:
		r.Hit, r.Error = false, fmt.Sprintf("read what the crash left: %v", err)
	case left.inFlight == 0:
		r.Hit, r.Error = false, fmt.Sprintf("window not opened: %v: every one of the %d outbox events committed had taken effect when the server died", errUnseen, left.committed)
	default:
		saw += "; " + left.String()
	}
	r.Detail += "; " + saw
	env.Logf("database back: %s", saw)
	return r
}

// crashLeft is what a database crash left, read after the server
// recovered and before any process reached it again.
type crashLeft struct {
	committed, inFlight int // outbox events committed; of them, without an effect
	unpublished         int // where the outbox has a status: rows not Published
	status              bool
	slot                string // a log relay's slot and what it says, "" where none was read
}

func (c crashLeft) String() string {
	s := fmt.Sprintf("the crash left %d of %d committed outbox events without their effect", c.inFlight, c.committed)
	if c.status {
		s += fmt.Sprintf(", %d rows not Published", c.unpublished)
	}
	if c.slot != "" {
		s += ", " + c.slot
	}
	return s
}

// leftByCrash reads what the crash left with faultline's own connections:
// the outbox rows committed (the audit trail), the effects (eq on epool),
// the rows' statuses where the outbox has one, and a log relay's slot (in
// the outbox's database) against the
// rows, compared with before (the slot read just before the crash, if
// hadSlot).
func (d DatabaseRestart) leftByCrash(ctx context.Context, env *Env, eq target.Query, epool, outbox *pgxpool.Pool, before infra.LogSlot, hadSlot bool) (crashLeft, error) {
	var left crashLeft
	trail, err := env.Audit(ctx, 0)
	if err != nil {
		return left, fmt.Errorf("read the audit trail: %w", err)
	}
	effects, err := eventIDs(ctx, epool, eq, "effects")
	if err != nil {
		return left, err
	}
	effected := map[string]bool{}
	for _, id := range effects {
		effected[id] = true
	}
	status := map[string]string{}
	var inserts []history.AuditRow
	for _, a := range trail {
		if a.Op == "INSERT" {
			inserts = append(inserts, a)
		}
		if a.NewStatus != "" {
			status[a.EventID] = a.NewStatus
		}
	}
	left.committed = len(inserts)
	left.status = env.RelayModel != history.ModelLog && env.RelayModel != history.ModelOffset && env.Observe.Outbox.Status != ""
	for _, a := range inserts {
		if !effected[a.EventID] {
			left.inFlight++
		}
		if left.status && status[a.EventID] != "Published" {
			left.unpublished++
		}
	}
	if env.RelayModel == history.ModelLog {
		slot, one, err := infra.RelaySlot(ctx, outbox)
		if err != nil {
			return left, fmt.Errorf("read the relay's slot: %w", err)
		}
		left.slot = slotAfterCrash(slot, one, before, hadSlot, inserts)
	}
	return left, nil
}

// slotAfterCrash says where a log relay's slot came back after a crash:
// its confirmed position, how many committed rows are past it (the
// server streams them again) and whether it went back from where it was
// before the crash.
func slotAfterCrash(slot infra.LogSlot, one bool, before infra.LogSlot, hadSlot bool, inserts []history.AuditRow) string {
	if !one {
		return "no one slot with a confirmed position after the crash"
	}
	past := 0
	for _, a := range inserts {
		if a.LSN != 0 && slot.ConfirmedBytes <= a.LSN {
			past++
		}
	}
	s := fmt.Sprintf("slot %s back at %s with %d committed rows past it", slot.Name, slot.Confirmed, past)
	if hadSlot && before.Name == slot.Name && before.ConfirmedBytes > slot.ConfirmedBytes {
		s += fmt.Sprintf(" (it had confirmed %s before the crash: the server streams again what the relay had confirmed)", before.Confirmed)
	}
	return s
}

// dbLinks are the run's processes' database links, by their names in
// env.Links (an instance's own name, "inventory.pg"), sorted.
func dbLinks(env *Env) []string {
	var out []string
	for name := range env.Links {
		if strings.HasSuffix(name, dbLinkSuffix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
