package fault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/target"
)

// takeoverHold orders a late write after the takeover it is late for. A
// relay held back past its lease (its writes held on the wire) is let go
// once another relay's claim of its rows is seen; but the other relay can
// publish and write the row Published before the late write lands, and a
// late write that finds the row Published changes nothing, fenced or not:
// the stale write the window is for is then never attempted against a live
// claim.
//
// So the other relay's takeover is held at its COMMIT: a deferred
// constraint trigger on the outbox makes a transaction that took a
// Processing row from one claim to another (not written by the held-back
// relay) wait, at its COMMIT, for an advisory lock faultline holds while
// armed. Holding the row's lock there, the takeover is seen (its backend
// waiting on the lock); the late write is then let through and seen waiting
// for that row's lock; releasing the takeover commits it first, and the
// late write meets the row as the takeover left it: refused by a fenced
// write's claim id, accepted by an unfenced one. Nothing is timed: each
// step waits for what pg_stat_activity and pg_locks show.
type takeoverHold struct {
	pool   *pgxpool.Pool
	table  target.Table
	writer string    // the held-back relay, by its application_name
	lock   *pgx.Conn // holds the advisory lock while armed
}

// Names and keys of what the hold creates in the outbox's database: the
// advisory lock is (takeoverLockClass, takeoverLockID), faultline's own in
// the run's own database.
const (
	takeoverHoldFn    = "faultline_takeover_hold"
	takeoverLockClass = 0x66617574 // "faut"
	takeoverLockID    = 0x6c74686f // "ltho"
)

// installTakeoverHold puts the hold's trigger on the outbox, inert until
// armed. It returns nil (and why) where the outbox has no status or claim
// column to tell a takeover by: the caller then waits for the takeover's
// commit instead.
func installTakeoverHold(ctx context.Context, env *Env, writer string) (*takeoverHold, string, error) {
	ob := env.Observe.Outbox
	pool, ok := env.DB[ob.Database]
	if !ok || ob.Status == "" || ob.Claim == "" {
		return nil, "no outbox status and claim column to hold a takeover by", nil
	}
	h := &takeoverHold{pool: pool, table: ob, writer: writer}
	table := pgx.Identifier(target.Ident(ob.Name)).Sanitize()
	status, claim := pgx.Identifier{ob.Status}.Sanitize(), pgx.Identifier{ob.Claim}.Sanitize()
	processing := ob.TargetStatus("Processing")
	// The writer's name is faultline's own and the status value comes from
	// the target file; both go in as quoted literals (a trigger takes no
	// parameters), the table and columns as quoted identifiers.
	fn := fmt.Sprintf(`CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $fl$
BEGIN
  IF current_setting('application_name') <> %s
     AND OLD.%s::text = %s AND NEW.%s::text = %s
     AND OLD.%s IS NOT NULL AND OLD.%s::text IS DISTINCT FROM NEW.%s::text THEN
    PERFORM pg_advisory_xact_lock_shared(%d, %d);
  END IF;
  RETURN NULL;
END
$fl$`, takeoverHoldFn, quoteLiteral(writer), status, quoteLiteral(processing), status, quoteLiteral(processing),
		claim, claim, claim, takeoverLockClass, takeoverLockID)
	trigger := fmt.Sprintf("CREATE CONSTRAINT TRIGGER %s AFTER UPDATE ON %s DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION %s()",
		takeoverHoldFn, table, takeoverHoldFn)
	if err := h.ddl(ctx, fn, fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s", takeoverHoldFn, table), trigger); err != nil {
		return nil, "", fmt.Errorf("install the takeover hold on %s: %w", ob.Name, err)
	}
	return h, "", nil
}

// holdTakeovers installs the hold for writer's late writes where the
// outbox allows one (hold nil, logged, where not); drop removes it, its
// error logged: nothing of the run's verdict rests on the removal.
func holdTakeovers(ctx context.Context, env *Env, writer string) (hold *takeoverHold, drop func(), err error) {
	hold, why, err := installTakeoverHold(ctx, env, writer)
	if err != nil || hold == nil {
		if err == nil {
			env.Logf("%s: the takeover is not held at its COMMIT: %s", writer, why)
		}
		return nil, func() {}, err
	}
	return hold, func() {
		if err := hold.drop(ctx); err != nil {
			env.Logf("remove the takeover hold: %v", err)
		}
	}, nil
}

// ddl runs statements on the outbox (see outboxDDL).
func (h *takeoverHold) ddl(ctx context.Context, stmts ...string) error {
	return outboxDDL(ctx, h.pool, stmts...)
}

// outboxDDL runs statements in one transaction that waits at most a
// second for its table lock each try: a writer's open transaction must
// not stall the outbox's other writers queued behind the DDL.
func outboxDDL(ctx context.Context, pool *pgxpool.Pool, stmts ...string) error {
	var err error
	for range 10 {
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '1s'"); err != nil {
				return err
			}
			for _, s := range stmts {
				if _, err := tx.Exec(ctx, s); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// arm takes the advisory lock: from now on a takeover waits at its
// COMMIT until release.
func (h *takeoverHold) arm(ctx context.Context) error {
	conn, err := advisoryLock(ctx, h.pool, takeoverLockClass, takeoverLockID)
	if err != nil {
		return fmt.Errorf("arm the takeover hold: %w", err)
	}
	h.lock = conn
	return nil
}

// advisoryLock takes the advisory lock (class, id) on a connection of its
// own, which it returns; closing it releases the lock. The lock is the
// session's, so a faultline that dies lets whatever waits for it go.
func advisoryLock(ctx context.Context, pool *pgxpool.Pool, class, id int32) (*pgx.Conn, error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	conn := c.Hijack()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, $2)", class, id); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// release lets every held takeover commit.
func (h *takeoverHold) release(ctx context.Context) error {
	if err := unlock(ctx, &h.lock); err != nil {
		return fmt.Errorf("release the held takeovers: %w", err)
	}
	return nil
}

// unlock closes *lock, a connection of advisoryLock's, releasing its
// lock, and forgets it: a second call, or one on nil, does nothing.
func unlock(ctx context.Context, lock **pgx.Conn) error {
	if *lock == nil {
		return nil
	}
	conn := *lock
	*lock = nil
	return conn.Close(context.WithoutCancel(ctx))
}

// waitHeld waits, at most within, for a takeover to be held at its COMMIT:
// a backend of another writer waiting for the hold's lock. It says whose.
func (h *takeoverHold) waitHeld(ctx context.Context, within time.Duration) (string, error) {
	started := time.Now()
	var who string
	err := poll.Until(ctx, within, 10*time.Millisecond, func() (bool, error) {
		err := h.pool.QueryRow(ctx, `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND NOT l.granted AND l.classid = $1 AND l.objid = $2 AND l.objsubid = 2
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
LIMIT 1`, uint32(takeoverLockClass), uint32(takeoverLockID)).Scan(&who)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("window not opened: %w: no takeover of %s's claims in %s: %v", errUnseen, h.writer, within, err)
	}
	return fmt.Sprintf("%s's takeover held at its COMMIT after %s", who, time.Since(started).Round(time.Millisecond)), nil
}

// waitLateWrite waits, at most within, for the held-back relay's late
// write to reach a held row: its backend waiting for a row's lock.
func (h *takeoverHold) waitLateWrite(ctx context.Context, within time.Duration) (string, error) {
	started := time.Now()
	err := poll.Until(ctx, within, 10*time.Millisecond, func() (bool, error) {
		var n int
		err := h.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE application_name = $1 AND wait_event_type = 'Lock' AND datname = current_database()`, h.writer).Scan(&n)
		return err == nil && n > 0, err
	})
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", err
	}
	return fmt.Sprintf("%s's late write waiting for the row after %s", h.writer, time.Since(started).Round(time.Millisecond)), nil
}

// drop releases any held takeover and removes the trigger.
func (h *takeoverHold) drop(ctx context.Context) error {
	err := h.release(ctx)
	table := pgx.Identifier(target.Ident(h.table.Name)).Sanitize()
	return errors.Join(err, h.ddl(context.WithoutCancel(ctx),
		fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s", takeoverHoldFn, table),
		fmt.Sprintf("DROP FUNCTION IF EXISTS %s()", takeoverHoldFn)))
}

// lateAfterTakeover keeps a relay's writes held back (by a toxic untoxic
// removes) until its claims are taken over, then lets them through after
// the takeover. With a hold (armed here) the takeover is held at its
// COMMIT, the toxic removed, and the takeover released once the relay's
// late write waits for the row, or once within passed without it (a write
// fenced by its lease's time, never locking the row, is never seen
// waiting). Without one, committed waits for the takeover's commit. It
// records the waits in w and returns what it saw; removing the toxic's
// error comes apart (undoErr), as the fault's result keeps it.
func lateAfterTakeover(ctx context.Context, w *waits, hold *takeoverHold, within time.Duration,
	committed func() (string, error), untoxic func() error) (seen string, err, undoErr error) {
	if hold != nil {
		if aerr := hold.arm(ctx); aerr != nil {
			hold = nil
			seen = fmt.Sprintf("(takeover not held: %v) ", aerr)
		}
	}
	if hold == nil {
		taken, err := committed()
		return seen + taken, err, untoxic()
	}
	err = w.wait(fmt.Sprintf("another relay's takeover of %s's claims, held at its COMMIT", hold.writer), within, func() (string, error) {
		var werr error
		seen, werr = hold.waitHeld(ctx, within)
		return seen, werr
	})
	if err != nil {
		return "", err, errors.Join(untoxic(), hold.release(ctx))
	}
	undoErr = untoxic()
	late := ""
	lateErr := w.wait(fmt.Sprintf("%s's late write to reach the held row", hold.writer), within, func() (string, error) {
		var werr error
		late, werr = hold.waitLateWrite(ctx, within)
		return late, werr
	})
	if lateErr != nil {
		if ctx.Err() != nil {
			return seen, ctx.Err(), errors.Join(undoErr, hold.release(ctx))
		}
		late = fmt.Sprintf("%s's late write not seen waiting for the row in %s", hold.writer, within)
	}
	return seen + "; " + late + "; the takeover released first", nil, errors.Join(undoErr, hold.release(ctx))
}
