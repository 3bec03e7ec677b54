package fault

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
)

// claimHold freezes a relay between its claim's COMMIT and what it does
// next, whatever the machine's speed. Frozen once the commit is told, a
// relay left running could already have published its claim, had it
// confirmed and written it Published. So the claim is held at its
// COMMIT: a deferred constraint trigger on the outbox makes the writer's
// Nth transaction that writes a row Processing wait, at its COMMIT, for an
// advisory lock faultline holds. Its backend seen waiting there
// (pg_locks), the relay is frozen (SIGSTOP) and the lock released: the
// claim commits while the relay, frozen, cannot have read that it did.
// Nothing is timed: each step waits for what PostgreSQL shows.
type claimHold struct {
	pool   *pgxpool.Pool
	table  string // the outbox, quoted
	writer string // the relay, by its application_name
	name   string // the trigger's, function's and sequence's name, quoted
	objID  int32  // the advisory lock is (claimLockClass, objID)
	lock   *pgx.Conn
}

// claimLockClass is the first key of the hold's advisory lock: faultline's
// own ("facl"), in the run's own database; the second is the writer's.
const claimLockClass = 0x6661636c

// holdClaim installs and arms the hold of writer's nth claim. It returns
// nil (and why) where the outbox has no status column to tell a claim by;
// the caller then freezes the relay once the commit is told.
func holdClaim(ctx context.Context, env *Env, writer string, nth int) (*claimHold, string, error) {
	ob := env.Observe.Outbox
	pool, ok := env.DB[ob.Database]
	if !ok || ob.Status == "" {
		return nil, "no outbox status column to hold a claim by", nil
	}
	sum := fnv.New32a()
	sum.Write([]byte(writer))
	h := &claimHold{pool: pool, table: pgx.Identifier(target.Ident(ob.Name)).Sanitize(), writer: writer,
		name: pgx.Identifier{"faultline_claim_hold_" + writer}.Sanitize(), objID: int32(sum.Sum32() & 0x7fffffff)}
	// The writer's name is faultline's own and the status value comes from
	// the target file: both go in as quoted literals (a trigger takes no
	// parameters), the table and column as quoted identifiers. The first
	// row of a transaction counts it (a sequence: counted even when it
	// rolls back, as a crash point counts its hits); its number is kept
	// for the transaction's other rows in a setting local to it.
	status := pgx.Identifier{ob.Status}.Sanitize()
	fn := fmt.Sprintf(`CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $fl$
DECLARE n bigint;
BEGIN
  IF current_setting('application_name') <> %s OR NEW.%s::text IS DISTINCT FROM %s THEN
    RETURN NULL;
  END IF;
  IF coalesce(current_setting('faultline.claim_hold', true), '') = '' THEN
    n := nextval(%s);
    PERFORM set_config('faultline.claim_hold', n::text, true);
    IF n = %d THEN
      PERFORM pg_advisory_xact_lock_shared(%d, %d);
    END IF;
  END IF;
  RETURN NULL;
END
$fl$`, h.name, quoteLiteral(writer), status, quoteLiteral(ob.TargetStatus("Processing")), quoteLiteral(h.name), nth, claimLockClass, h.objID)
	if err := h.arm(ctx); err != nil {
		return nil, "", err
	}
	err := outboxDDL(ctx, pool,
		fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s", h.name, h.table),
		fmt.Sprintf("DROP SEQUENCE IF EXISTS %s", h.name),
		fmt.Sprintf("CREATE SEQUENCE %s", h.name),
		fn,
		fmt.Sprintf("CREATE CONSTRAINT TRIGGER %s AFTER INSERT OR UPDATE ON %s DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION %s()", h.name, h.table, h.name))
	if err != nil {
		return nil, "", errors.Join(fmt.Errorf("install the claim hold on %s: %w", ob.Name, err), h.release(ctx))
	}
	return h, "", nil
}

// arm takes the advisory lock: from now on the writer's nth claim waits
// at its COMMIT until release.
func (h *claimHold) arm(ctx context.Context) error {
	conn, err := advisoryLock(ctx, h.pool, claimLockClass, h.objID)
	if err != nil {
		return fmt.Errorf("arm the claim hold: %w", err)
	}
	h.lock = conn
	return nil
}

// release lets the held claim commit.
func (h *claimHold) release(ctx context.Context) error {
	if err := unlock(ctx, &h.lock); err != nil {
		return fmt.Errorf("release the held claim: %w", err)
	}
	return nil
}

// heldClaim is the writer's backend seen waiting at its claim's COMMIT.
type heldClaim struct {
	pid int32
	xid string
}

// waitHeld waits, at most within, for the writer's claim to be held at its
// COMMIT: its backend waiting for the hold's lock.
func (h *claimHold) waitHeld(ctx context.Context, within time.Duration) (heldClaim, error) {
	var b heldClaim
	err := poll.Until(ctx, within, 10*time.Millisecond, func() (bool, error) {
		err := h.pool.QueryRow(ctx, `SELECT a.pid, coalesce(a.backend_xid::text, '') FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND NOT l.granted AND l.classid = $1 AND l.objid = $2 AND l.objsubid = 2
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND a.application_name = $3
LIMIT 1`, uint32(claimLockClass), uint32(h.objID), h.writer).Scan(&b.pid, &b.xid)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	})
	return b, err
}

// freeze waits for the held claim, freezes p, lets the claim commit and
// waits for its commit on the run's commit feed, recording the waits in
// w. It returns the claim's commit with p frozen, or an error with p
// running.
func (h *claimHold) freeze(ctx context.Context, env *Env, p *supervisor.Process, nth int, w *waits) (history.Commit, error) {
	var held heldClaim
	err := w.wait(fmt.Sprintf("%s's claim #%d held at its COMMIT (pg_locks)", h.writer, nth), env.Deadline, func() (string, error) {
		var err error
		if held, err = h.waitHeld(ctx, env.Deadline); err != nil {
			return "", fmt.Errorf("no claim #%d of %s seen at its COMMIT within %s: %w", nth, h.writer, env.Deadline, err)
		}
		return fmt.Sprintf("backend %d, transaction %s", held.pid, held.xid), nil
	})
	if err != nil {
		return history.Commit{}, errors.Join(err, h.release(ctx))
	}
	if err := p.Pause(); err != nil {
		return history.Commit{}, errors.Join(fmt.Errorf("freeze %s at its claim: %w", h.writer, err), h.release(ctx))
	}
	var commit history.Commit
	err = w.wait(fmt.Sprintf("the commit of %s's held claim, %s frozen", h.writer, h.writer), env.Deadline, func() (string, error) {
		wctx, cancel := context.WithTimeout(ctx, env.Deadline)
		defer cancel()
		// Subscribed before the claim can commit: its commit is the first
		// claim of the frozen writer told from now on.
		await := env.Commits.Subscribe(func(cm history.Commit) bool {
			return cm.Table == history.TableOutbox && cm.Writer == h.writer && cm.Status == "Processing"
		})
		if err := h.release(ctx); err != nil {
			cancel()
			_, _ = await(wctx) // unsubscribes
			return "", err
		}
		var err error
		if commit, err = await(wctx); err != nil {
			return "", fmt.Errorf("the held claim's commit not told within %s: %w", env.Deadline, err)
		}
		return commit.EventID, nil
	})
	if err != nil {
		if rerr := p.Resume(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("resume %s: %w", h.writer, rerr))
		}
		return history.Commit{}, err
	}
	return commit, nil
}

// drop releases the claim if still held and removes the trigger.
func (h *claimHold) drop(ctx context.Context) error {
	err := h.release(ctx)
	return errors.Join(err, outboxDDL(context.WithoutCancel(ctx), h.pool,
		fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s", h.name, h.table),
		fmt.Sprintf("DROP FUNCTION IF EXISTS %s()", h.name),
		fmt.Sprintf("DROP SEQUENCE IF EXISTS %s", h.name)))
}
