package observe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/target"
)

// notifyChannel is the LISTEN channel of the triggers faultline installs.
const notifyChannel = "faultline_commits"

func (w *Watch) missing(format string, args ...any) {
	w.why = append(w.why, fmt.Sprintf(format, args...))
}

// Install puts the triggers on the target's tables (they exist once its
// processes have started: some make their own schema), listens for their
// commits, binds the tap queue, and starts the sources with an install of
// their own that need names. What cannot be installed is recorded
// (Missing), not fatal: the checks that rest on it say so, and
// Unobservable refuses a run that needed it.
func (w *Watch) Install(ctx context.Context, need map[history.Source]bool) {
	listen := map[string]bool{}
	for _, tb := range observedTables(w.run.Target) {
		if err := w.installTrigger(ctx, tb.name, tb.tbl); err != nil {
			w.missing("observe.%s: %v", tb.name, err)
			if tb.name == history.TableOutbox {
				w.failed[history.SourceAudit] = fmt.Errorf("observe.%s: %w", tb.name, err)
			}
			continue
		}
		switch tb.name {
		case history.TableOutbox:
			w.audit = true
		case history.TablePosition:
			w.position = true
		case history.TableEffects:
			w.effects = true
		}
		listen[tb.tbl.Database] = true
	}
	for db := range listen {
		if err := w.listen(ctx, db); err != nil {
			w.missing("listen on %s: %v", db, err)
		}
	}
	if len(w.why) > 0 {
		err := errors.New(strings.Join(w.why, "; "))
		w.commits.Fail(err)
		w.failed[history.SourceCommits] = err
	}
	if w.tapErr = retryInternalError(ctx, w.bindTap, time.Second); w.tapErr != nil {
		w.missing("tap queue: %v", w.tapErr)
		w.failed[history.SourceTap] = fmt.Errorf("the tap queue could not be bound: %w", w.tapErr)
	}
	w.installNeeded(ctx, need)
}

// installTrigger installs, in the table's database, the trigger that
// notifies each committed write (and, on the outbox, audits it).
func (w *Watch) installTrigger(ctx context.Context, name string, tbl target.Table) error {
	pool, ok := w.run.DB[tbl.Database]
	if !ok {
		return fmt.Errorf("no database %q in this run", tbl.Database)
	}
	var exists *string
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1)::text`, tbl.Name).Scan(&exists); err != nil {
		return fmt.Errorf("look up table %s: %w", tbl.Name, err)
	}
	if exists == nil {
		field := "observe." + name
		if name == history.TablePosition {
			field = "relay.position"
		}
		return fmt.Errorf("table %s does not exist in database %s once the target started (give %s in the target file)", tbl.Name, tbl.Database, field)
	}
	table := pgx.Identifier(target.Ident(tbl.Name)).Sanitize()
	col := func(c string) string {
		if c == "" {
			return "NULL"
		}
		return "NEW." + pgx.Identifier{c}.Sanitize() + "::text"
	}
	old := func(c string) string {
		if c == "" {
			return "NULL"
		}
		return "CASE WHEN TG_OP = 'UPDATE' THEN OLD." + pgx.Identifier{c}.Sanitize() + "::text END"
	}
	// The due and lease columns are copied where the outbox has them as a
	// time; one the file named and the table lacks is an error, one left
	// to its default is watched without.
	timeCol := func(column string, byDefault bool, field string) (string, error) {
		if name != history.TableOutbox || column == "" {
			return "NULL", nil
		}
		ok, err := timeColumn(ctx, pool, tbl.Name, column)
		switch {
		case err != nil:
			return "", err
		case ok:
			return "NEW." + pgx.Identifier{column}.Sanitize() + "::timestamptz", nil
		case !byDefault:
			return "", fmt.Errorf("table %s has no column %s of type timestamptz or timestamp (%s)", tbl.Name, column, field)
		}
		return "NULL", nil
	}
	due, err := timeCol(tbl.Due, tbl.DueDefault, "observe.outbox.due")
	if err != nil {
		return err
	}
	lease, err := timeCol(tbl.Lease, tbl.LeaseDefault, "observe.outbox.lease")
	if err != nil {
		return err
	}
	var body strings.Builder
	fn := "faultline_observe_" + name
	fmt.Fprintf(&body, "CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $fl$\nBEGIN\n", fn)
	if name == history.TableOutbox {
		fmt.Fprintf(&body, "  INSERT INTO faultline_audit (op, event_id, old_status, new_status, old_claim, new_claim, new_due, new_lease) VALUES (TG_OP, %s, %s, %s, %s, %s, %s, %s);\n",
			col(tbl.EventID), old(tbl.Status), col(tbl.Status), old(tbl.Claim), col(tbl.Claim), due, lease)
	}
	fmt.Fprintf(&body, "  PERFORM pg_notify('%s', json_build_object('table', '%s', 'op', TG_OP, 'writer', current_setting('application_name'), 'event_id', %s, 'status', %s, 'claim', %s)::text);\n",
		notifyChannel, name, col(tbl.EventID), col(tbl.Status), col(tbl.Claim))
	body.WriteString("  RETURN NULL;\nEND\n$fl$;\n")
	stmts := []string{}
	if name == history.TableOutbox {
		stmts = append(stmts, `CREATE TABLE IF NOT EXISTS faultline_audit (
  id bigserial PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  began timestamptz NOT NULL DEFAULT now(),
  writer text NOT NULL DEFAULT current_setting('application_name'),
  op text NOT NULL,
  event_id text, old_status text, new_status text, old_claim text, new_claim text,
  new_due timestamptz, new_lease timestamptz,
  lsn pg_lsn NOT NULL DEFAULT pg_current_wal_insert_lsn())`)
	}
	stmts = append(stmts, body.String(),
		fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s", fn, table),
		fmt.Sprintf("CREATE TRIGGER %s AFTER INSERT OR UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION %s()", fn, table, fn))
	for _, s := range stmts {
		if _, err := pool.Exec(ctx, s); err != nil {
			return fmt.Errorf("install trigger on %s: %w", tbl.Name, err)
		}
	}
	if name == history.TableOutbox && lease != "NULL" {
		w.leased = true
	}
	return nil
}

// timeColumn reports whether the table has the column as a time the audit
// trigger can copy: a column of another type would make the trigger fail,
// and with it the target's own writes.
func timeColumn(ctx context.Context, pool *pgxpool.Pool, table, column string) (bool, error) {
	var n int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped
  AND atttypid IN ('timestamptz'::regtype, 'timestamp'::regtype)`, table, column).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look up column %s of %s: %w", column, table, err)
	}
	return n > 0, nil
}
