package fault

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/target"
)

// KindHeldCommit is the held-commit fault's kind, as a schedule names it.
const KindHeldCommit = "held-commit"

// HeldCommit opens the window before a writer's COMMIT from outside: after
// the trigger it puts a constraint trigger DEFERRABLE INITIALLY DEFERRED
// on the watched table the instance writes (observe.facts for a producer,
// observe.effects for a consumer) that, at the COMMIT of the instance's
// Nth write there (told by the application_name faultline gave it), sleeps.
// While pg_stat_activity shows that backend asleep in its COMMIT, the
// process is SIGKILLed and its backend terminated (pg_terminate_backend):
// killing the client alone would let the server finish the commit. The
// transaction never commits; its result shows the hold (the backend, its
// transaction id) and, from txid_status, that the transaction aborted.
//
// With Cut, the process is not killed: its link Cut goes down (for
// CutFor) and its backend is terminated while the COMMIT is held, so the
// COMMIT it sent meets a dead connection and the process cannot know
// whether it committed (it did not).
type HeldCommit struct {
	Process      history.Ref   `json:"process"` // instance reference: "producer", "consumer"
	Table        string        `json:"table"`   // history.TableFacts or history.TableEffects
	Nth          int           `json:"hit"`
	RestartAfter time.Duration `json:"restart_after"`
	NoRestart    bool          `json:"no_restart"`
	Cut          history.Link  `json:"cut"` // a link reference ("consumer.pg"); "" kills the process instead
	CutFor       time.Duration `json:"cut_for"`
	Trigger      Trigger       `json:"trigger"`
}

func init() {
	register(Desc[HeldCommit]{
		Name:    KindHeldCommit,
		Example: HeldCommit{Process: "consumer", Table: history.TableEffects, Nth: 3, Trigger: Trigger{AfterOrders: 5}, RestartAfter: RestartAfter},
		Doc:     "an instance's transaction held at its COMMIT (a deferred trigger sleeps there), then the process SIGKILLed and its backend terminated: it never commits",
		Opens:   "producer.before-commit, consumer.before-commit (from outside)",
		Check: func(p HeldCommit) error {
			errs := []error{Need(KindHeldCommit, p.Process != "", "process")}
			if p.Table != history.TableFacts && p.Table != history.TableEffects {
				errs = append(errs, fmt.Errorf("held-commit fault: table %q: want %s or %s", p.Table, history.TableFacts, history.TableEffects))
			}
			if p.Nth < 0 {
				errs = append(errs, fmt.Errorf("held-commit fault: hit %d: want 1 or more", p.Nth))
			}
			return errors.Join(errs...)
		},
		Window: func(h HeldCommit) (history.Ref, string) {
			return h.Process, h.Process.Role() + ".before-commit"
		},
		Touches: func(h HeldCommit) Touch {
			t := Touch{Instances: []history.Ref{h.Process}}
			if h.Cut != "" {
				t.Links = []history.Link{h.Cut}
			}
			return t
		},
		Trigger: func(h HeldCommit) Trigger { return h.Trigger },
	})
}

// Names of what the fault creates in the table's database.
const (
	heldCommitFn  = "faultline_held_commit" // trigger and function: sleep at the COMMIT
	heldCommitSeq = "faultline_held_commit_writes"
	// heldCommitSleep bounds the hold should faultline never end it.
	heldCommitSleep = 60 * time.Second
)

// Describe implements Fault.
func (h HeldCommit) Describe() result.Fault {
	detail := fmt.Sprintf("the COMMIT of %s's write #%d to %s held, %s; then SIGKILL and its backend terminated", h.Process, max(h.Nth, 1), h.Table, h.Trigger)
	if h.Cut != "" {
		detail = fmt.Sprintf("the COMMIT of %s's write #%d to %s held, %s; then link %s down for %s and its backend terminated", h.Process, max(h.Nth, 1), h.Table, h.Trigger, h.Cut, h.CutFor)
		return result.Fault{Kind: "link-down", Target: string(h.Process), Detail: detail}
	}
	if !h.NoRestart {
		detail += fmt.Sprintf(", restarted after %s", h.RestartAfter)
	}
	return result.Fault{Kind: "crash", Target: string(h.Process), Detail: detail}
}

// table is the watched table the fault holds writes to.
func (h HeldCommit) table(env *Env) target.Table {
	if h.Table == history.TableEffects {
		return env.Observe.Effects
	}
	return env.Observe.Facts
}

// Require implements Requirer: the instance, and the table named in the
// target file's observe section.
func (h HeldCommit) Require(env *Env) error {
	if _, err := env.Roles.Instance(h.Process); err != nil {
		return err
	}
	if t := h.table(env); t.Name == "" || t.Database == "" {
		return fmt.Errorf("held-commit fault: the target file names no %s table faultline can watch (observe.%s)", h.Table, h.Table)
	}
	if h.Cut != "" {
		if _, err := env.Roles.Link(h.Cut); err != nil {
			return err
		}
	}
	return nil
}

// Inject implements Fault.
func (h HeldCommit) Inject(ctx context.Context, env *Env) result.Fault {
	return withWaits(func(w *waits) result.Fault { return h.inject(ctx, env, w) })
}

// inject is Inject, recording what it waits for in w.
func (h HeldCommit) inject(ctx context.Context, env *Env, w *waits) result.Fault {
	start := time.Now()
	in, err := env.Roles.Instance(h.Process)
	if err != nil {
		return record(h, start, false, err)
	}
	p, err := env.Process(h.Process)
	if err != nil {
		return record(h, start, false, err)
	}
	tbl := h.table(env)
	pool, ok := env.DB[tbl.Database]
	if !ok {
		return record(h, start, false, fmt.Errorf("no database %q in this run", tbl.Database))
	}
	if err := env.Wait(ctx, h.Trigger); err != nil {
		return record(h, start, false, err)
	}
	start = time.Now()
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, s := range h.install(tbl, in.Name) {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return record(h, start, false, fmt.Errorf("install the held-commit trigger on %s: %w", tbl.Name, err))
	}
	env.Logf("held-commit trigger on %s: %s's write #%d held at its COMMIT", tbl.Name, in.Name, max(h.Nth, 1))
	var held heldBackend
	holdErr := w.wait(fmt.Sprintf("%s's write #%d to %s to be held at its COMMIT (pg_stat_activity)", in.Name, max(h.Nth, 1), tbl.Name), env.Deadline, func() (string, error) {
		var err error
		if held, err = waitHeld(ctx, env, pool, in.Name); err != nil {
			return "", err
		}
		return fmt.Sprintf("backend %d, transaction %s", held.pid, held.xid), nil
	})
	var killErr, termErr error
	var up func() error
	var cutAt time.Time
	switch {
	case holdErr != nil:
	case h.Cut != "":
		link, err := env.Link(h.Cut)
		if err == nil {
			err = link.Down(ctx)
		}
		if killErr = err; killErr == nil {
			cutAt = time.Now()
			up = func() error { return link.Up(context.WithoutCancel(ctx)) }
			env.Logf("link %s down with transaction %s held at its COMMIT (backend %d)", h.Cut, held.xid, held.pid)
		}
	default:
		if killErr = p.Kill(); killErr == nil {
			env.Logf("%s killed (SIGKILL) with transaction %s held at its COMMIT (backend %d)", in.Name, held.xid, held.pid)
		}
	}
	// The backend is terminated on every way out (a hold that came after
	// faultline stopped waiting would otherwise sleep on): the trigger
	// cannot be dropped while a held transaction keeps its table locked.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	terminated, termErr := terminateHeld(uctx, pool, in.Name)
	status, statusErr := "", error(nil)
	if holdErr == nil {
		status, statusErr = xidStatus(uctx, pool, held.xid)
	}
	dropErr := h.drop(uctx, pool, tbl, in.Name)
	r := func(hit bool, err error) result.Fault {
		res := record(h, start, hit, err)
		if holdErr == nil {
			res.Detail += fmt.Sprintf(" — pg_stat_activity: backend %d of %s asleep in %q (transaction %s) at %s; backends terminated %v; transaction %s %s",
				held.pid, in.Name, held.query, held.xid, held.at.Format("15:04:05.000"), terminated, held.xid, status)
		}
		if dropErr != nil {
			res.UndoError = fmt.Sprintf("drop the held-commit trigger from %s: %v", tbl.Name, dropErr)
		}
		if up != nil { // the link comes back on its own clock, from the cut
			_ = pause(ctx, h.CutFor-time.Since(cutAt))
			if err := up(); err != nil {
				res.UndoError = strings.TrimPrefix(res.UndoError+"; ", "; ") + err.Error()
			}
			up = nil
		}
		return res
	}
	switch {
	case holdErr != nil:
		return r(false, holdErr)
	case killErr != nil:
		return r(true, killErr)
	case termErr != nil:
		return r(true, fmt.Errorf("terminate %s's backend: %w", in.Name, termErr))
	case statusErr != nil:
		return r(true, statusErr)
	case status != "aborted":
		return r(false, fmt.Errorf("the held transaction %s is %s, not aborted", held.xid, status))
	}
	if h.NoRestart || h.Cut != "" {
		return r(true, nil)
	}
	if err := pause(ctx, h.RestartAfter); err != nil {
		return r(true, err)
	}
	if err := p.Restart(ctx); err != nil {
		res := r(true, nil)
		res.UndoError = strings.TrimPrefix(res.UndoError+"; ", "; ") + fmt.Sprintf("restart %s: %v", in.Name, err)
		return res
	}
	return r(true, nil)
}

// heldBackend is a backend pg_stat_activity shows asleep in a held COMMIT.
type heldBackend struct {
	pid   int32
	xid   string
	query string
	at    time.Time
}

// waitHeld polls pg_stat_activity until the writer's backend sleeps in its
// COMMIT (the trigger's pg_sleep), up to the fault deadline.
func waitHeld(ctx context.Context, env *Env, pool *pgxpool.Pool, writer string) (heldBackend, error) {
	ctx, cancel := context.WithTimeout(ctx, env.Deadline)
	defer cancel()
	var b heldBackend
	var failed error // a read that failed, not one that found none
	err := poll.Until(ctx, env.Deadline, 10*time.Millisecond, func() (bool, error) {
		err := pool.QueryRow(ctx, `SELECT pid, coalesce(backend_xid::text, ''), left(query, 60) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event = 'PgSleep' AND datname = current_database() LIMIT 1`, writer).Scan(&b.pid, &b.xid, &b.query)
		switch {
		case err == nil:
			b.at = time.Now()
			return true, nil
		case !errors.Is(err, pgx.ErrNoRows) && ctx.Err() == nil:
			failed = fmt.Errorf("read pg_stat_activity: %w", err)
			return true, nil
		}
		return false, nil
	})
	switch {
	case failed != nil:
		return heldBackend{}, failed
	case err != nil:
		return heldBackend{}, fmt.Errorf("no transaction of %s held at its COMMIT within %s (pg_stat_activity)", writer, env.Deadline)
	}
	return b, nil
}

// terminateHeld terminates every backend of the writer asleep in a held
// COMMIT and waits until none is left; it returns their pids.
func terminateHeld(ctx context.Context, pool *pgxpool.Pool, writer string) ([]int32, error) {
	var pids []int32
	for {
		rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event = 'PgSleep' AND datname = current_database()`, writer)
		if err != nil {
			return pids, err
		}
		left, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return pids, err
		}
		if len(left) == 0 {
			return pids, nil
		}
		for _, pid := range left {
			if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend($1, 5000)", pid); err != nil {
				return pids, err
			}
			pids = append(pids, pid)
		}
	}
}

// xidStatus is the fate of a transaction: committed, aborted, in progress.
// The run's cluster is fresh, so a transaction id is within its first
// epoch and its 32-bit form is its full one.
func xidStatus(ctx context.Context, pool *pgxpool.Pool, xid string) (string, error) {
	n, err := strconv.ParseInt(xid, 10, 64)
	if err != nil {
		return "", fmt.Errorf("held transaction id %q: %w", xid, err)
	}
	var status *string
	if err := pool.QueryRow(ctx, "SELECT txid_status($1)", n).Scan(&status); err != nil {
		return "", fmt.Errorf("txid_status(%d): %w", n, err)
	}
	if status == nil {
		return "unknown", nil
	}
	return *status, nil
}

// install is the SQL that puts the hold in place: a counter of the
// writer's writes (a sequence: counted even by transactions that roll
// back, as the crash point counts its hits) and the deferred trigger that
// sleeps at the COMMIT of the Nth. The writer's name and the numbers are
// faultline's own; the table's name comes from the target file (checked as
// an identifier when it was loaded) and is quoted.
func (h HeldCommit) install(tbl target.Table, writer string) []string {
	table := pgx.Identifier(target.Ident(tbl.Name)).Sanitize()
	return []string{
		"CREATE SEQUENCE " + heldCommitSeq,
		fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $fl$
BEGIN
  IF current_setting('application_name') = %s THEN
    IF nextval('%s') = %d THEN
      PERFORM pg_sleep(%f);
    END IF;
  END IF;
  RETURN NULL;
END
$fl$`, heldCommitFn, quoteLiteral(writer), heldCommitSeq, max(h.Nth, 1), heldCommitSleep.Seconds()),
		fmt.Sprintf("CREATE CONSTRAINT TRIGGER %s AFTER INSERT OR UPDATE ON %s DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION %s()", heldCommitFn, table, heldCommitFn),
	}
}

// drop removes what install put in place. A hold that began after the
// held backends were terminated keeps the table locked for its sleep, and
// DROP TRIGGER waiting behind it would stall every writer queued behind
// the drop: so the drop waits for its lock a second at most, and the
// backends asleep in a hold are terminated again before the next try.
func (h HeldCommit) drop(ctx context.Context, pool *pgxpool.Pool, tbl target.Table, writer string) error {
	table := pgx.Identifier(target.Ident(tbl.Name)).Sanitize()
	var err error
	for range 10 {
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = '1s'; DROP TRIGGER IF EXISTS %s ON %s; DROP FUNCTION IF EXISTS %s(); DROP SEQUENCE IF EXISTS %s",
				heldCommitFn, table, heldCommitFn, heldCommitSeq))
			return err
		})
		if err == nil || ctx.Err() != nil {
			return err
		}
		if _, terr := terminateHeld(ctx, pool, writer); terr != nil {
			return errors.Join(err, terr)
		}
	}
	return err
}

// quoteLiteral is s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
