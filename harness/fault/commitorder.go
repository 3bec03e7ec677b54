package fault

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
)

// KindCommitOrder is the commit-order fault's kind, as results name it.
const KindCommitOrder = "commit-order"

// CommitOrder inverts the commit order of outbox inserts, with no change
// in the target: faultline owns the run's databases, so after the trigger
// it puts two triggers on the target's outbox table (observe.outbox). One
// numbers each insert as it is made (the order a SERIAL id would give);
// the other, a constraint trigger DEFERRABLE INITIALLY DEFERRED, runs at
// the inserting transaction's COMMIT and, for every Every-th insert (up
// to Holds of them), holds it there until a relay is seen to have read a
// later insert, so the inserts made after it commit, and are read, first.
// A relay that reads the outbox by a position (an id, an offset) has moved
// past such a row by the time it commits; one that claims rows by their
// status finds it.
//
// A relay is past a held insert once faultline sees it write an insert
// made after it (a claim, a mark: the audit trail names the writer), or
// begin and finish a read of the outbox (a SELECT or WITH naming it,
// pg_stat_activity) once such an insert has committed: a relay that reads
// by position has read past the held row then. Faultline writes the writes
// it saw into a table of its own, and the held transaction waits until
// every relay is past it, at most Hold, or until the target's own
// sessions wait for it (its inserts are serialized: nothing later can
// commit first). After Duration the triggers are dropped (that waits for
// the held transactions). The fault happened when every relay was past a
// held insert before it committed: only then has a relay that reads by
// position skipped it, however slow the machine. Its result names those
// held rows' eventIds.
type CommitOrder struct {
	Hold     time.Duration `json:"hold"`     // the longest a held insert waits at its commit for the relays to pass it
	Duration time.Duration `json:"duration"` // how long the triggers stay in place
	Every    int           `json:"every"`    // hold every Every-th insert after the triggers are in place
	Holds    int           `json:"holds"`    // hold at most this many
	Trigger  Trigger       `json:"trigger"`
}

func init() {
	register(Desc[CommitOrder]{
		Name:    KindCommitOrder,
		Example: CommitOrder{Trigger: Trigger{AfterOrders: 20}, Every: 4, Holds: 5, Hold: 600 * time.Millisecond, Duration: 3 * time.Second},
		Doc:     "every n-th outbox insert held at its COMMIT until every relay is seen past it (a relay reading by position skips it)",
		Opens:   protocol.OutboxCommitOrder,
		Check: func(p CommitOrder) error {
			if err := errors.Join(Need(KindCommitOrder, p.Every > 0, "every of 1 or more"), Need(KindCommitOrder, p.Holds > 0, "holds of 1 or more"),
				Need(KindCommitOrder, p.Hold > 0, "a hold")); err != nil {
				return err
			}
			return nil
		},
		Window:  func(CommitOrder) (history.Ref, string) { return "", protocol.OutboxCommitOrder },
		Trigger: func(c CommitOrder) Trigger { return c.Trigger },
		// Explored when faultline watches the outbox: every 4th insert, five
		// of them, each held until every relay is past it (as in
		// blackbox-outbox-commit-order).
		Enumerate: func(s *Surface, _ int) []Candidate {
			if !s.Watches(history.TableOutbox) {
				return nil
			}
			c := CommitOrder{Trigger: Trigger{AfterOrders: PlainAfter}, Every: 4, Holds: 5, Hold: CommitOrderHold, Duration: 3 * time.Second}
			return []Candidate{{Faults: []Fault{c}, Keys: []string{KindCommitOrder}}}
		},
		Offered: func(s *Surface) []Offer {
			if !s.Watches(history.TableOutbox) {
				return nil
			}
			return []Offer{{Name: protocol.OutboxCommitOrder, Role: protocol.Producer, By: []string{"(the outbox's commits)"}}}
		},
		Shrink: func(_ CommitOrder, sh *Shrink[CommitOrder]) {
			sh.Trigger(func(c *CommitOrder) *Trigger { return &c.Trigger })
			sh.Shorter("hold", func(c *CommitOrder) *time.Duration { return &c.Hold })
			sh.Fewer("holds", func(c *CommitOrder) *int { return &c.Holds }, 1)
		},
	})
}

// CommitOrderHold is the longest a catalogue scenario holds an insert
// waiting for a later one to be read: a bound, reached only when no relay
// reads or queries (the window then did not open), and within the
// workload's own patience for an answer.
const CommitOrderHold = 5 * time.Second

// outboxName is the outbox table's own name, without its schema, as a
// relay's query names it.
func outboxName(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// relayNames are the session names (application_name) of the target's
// relay instances.
func relayNames(env *Env) []string {
	var out []string
	for n := 1; n <= env.Roles.Count(protocol.Relay); n++ {
		if in, err := env.Roles.Instance(history.RefOf(protocol.Relay, n)); err == nil {
			out = append(out, in.Name)
		}
	}
	return out
}

// readEvery is how often the fault hands the reads it saw to the held
// transactions, and how often they look.
const readEvery = 20 * time.Millisecond

// Names of what the fault creates in the target's database.
const (
	commitOrderInserts = "faultline_commit_order_inserts" // each insert's number, by eventId
	commitOrderRead    = "faultline_commit_order_read"    // the eventIds faultline saw a relay read
	commitOrderRelays  = "faultline_commit_order_relays"  // the relays' session names (application_name)
	commitOrderHeld    = "faultline_commit_order_held"    // each held insert: its hold, the later inserts committed and read first
	commitOrderNumber  = "faultline_commit_order_number"  // trigger and function: number the insert
	commitOrderHoldFn  = "faultline_commit_order_hold"    // trigger and function: hold it at its commit
)

// Describe implements Fault.
func (c CommitOrder) Describe() result.Fault {
	return result.Fault{Kind: KindCommitOrder, Target: "outbox",
		Detail: fmt.Sprintf("every %s outbox insert (up to %d) held at its commit until every relay is past it (at most %s), for %s, %s",
			ordinal(c.Every), c.Holds, c.Hold, c.Duration, c.Trigger)}
}

// ordinal is 1st, 2nd, 3rd, 4th, ...
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// Require implements Requirer: the target file names its outbox table and
// the table's eventId column, and the fault's numbers are sound.
func (c CommitOrder) Require(env *Env) error {
	var errs []error
	if ob := env.Observe.Outbox; ob.Name == "" || ob.EventID == "" || ob.Database == "" {
		errs = append(errs, errors.New("commit-order fault: the target file names no outbox table with its database and event_id column (observe.outbox)"))
	}
	if c.Every < 1 || c.Holds < 1 || c.Hold <= 0 {
		errs = append(errs, fmt.Errorf("commit-order fault: every %d, holds %d, hold %s: want each above 0", c.Every, c.Holds, c.Hold))
	}
	return errors.Join(errs...)
}

// Observes implements Observer: a relay's write to a later insert's row
// (a claim, a mark), in the outbox's audit trail, shows that relay past
// the held one.
func (CommitOrder) Observes() []history.Source { return []history.Source{history.SourceAudit} }

// Inject implements Fault.
func (c CommitOrder) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	ob := env.Observe.Outbox
	pool, ok := env.DB[ob.Database]
	if !ok {
		return record(c, start, false, fmt.Errorf("no database %q in this run", ob.Database))
	}
	if err := env.Wait(ctx, c.Trigger); err != nil {
		return record(c, start, false, err)
	}
	start = time.Now()
	pace, err := newPacer(env, c)
	if err != nil {
		return record(c, start, false, fmt.Errorf("keep the relays in step: %w", err))
	}
	// One transaction: on an error nothing of it stays in place.
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, s := range c.install(ob, env.RelayModel) {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+commitOrderRelays+" (name, outbox) SELECT unnest($1::text[]), $2", relayNames(env), outboxName(ob.Name))
		return err
	}); err != nil {
		return record(c, start, false, fmt.Errorf("install the commit-order triggers on %s: %w", ob.Name, err))
	}
	env.Logf("commit-order triggers on %s: every %s insert held at its commit until every relay is past it, at most %s", ob.Name, ordinal(c.Every), c.Hold)
	readCtx, stopReads := context.WithCancel(ctx)
	readErr := make(chan error, 1)
	go func() { readErr <- tellReads(readCtx, env, pool, pace) }()
	onErr := pause(ctx, c.Duration)
	// The relays are thawed, and the pacer done, before the triggers go:
	// it reads a table that goes with them.
	if err := pace.end(); err != nil && onErr == nil {
		onErr = err
	}

	// Undone on its own clock even when ctx ended: dropping the triggers
	// waits for the transactions they hold (each at most Hold), then the
	// held rows, all committed by then, are read in the same transaction.
	// The reads go on being told until the triggers are gone: a held
	// transaction waits for them.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second+c.Hold)
	defer cancel()
	var held []heldInsert
	inserts := 0
	err = pgx.BeginFunc(uctx, pool, func(tx pgx.Tx) error {
		table := pgx.Identifier(target.Ident(ob.Name)).Sanitize()
		for _, trg := range []string{commitOrderHoldFn, commitOrderNumber} {
			if _, err := tx.Exec(uctx, fmt.Sprintf("DROP TRIGGER %s ON %s", trg, table)); err != nil {
				return err
			}
		}
		var err error
		if held, inserts, err = readHeld(uctx, tx); err != nil {
			return err
		}
		_, err = tx.Exec(uctx, fmt.Sprintf("DROP FUNCTION %s(), %s(); DROP TABLE %s, %s, %s", commitOrderHoldFn, commitOrderNumber, commitOrderHeld, commitOrderInserts, commitOrderRelays))
		return err
	})
	// No transaction waits for a read any more: the reads stop, and then
	// their table goes.
	stopReads()
	if rerr := <-readErr; rerr != nil && onErr == nil && !errors.Is(rerr, context.Canceled) {
		onErr = rerr
	}
	if err == nil {
		_, err = pool.Exec(uctx, "DROP TABLE "+commitOrderRead)
	}
	if err != nil {
		return notUndone(record(c, start, true, onErr), fmt.Errorf("drop the commit-order triggers from %s: %w", ob.Name, err))
	}
	opened, passed, why, notOffered := judgeCommitOrder(held, inserts)
	if err = onErr; err == nil && !opened {
		err = errors.New("window not opened: " + why)
	}
	r := record(c, start, opened, err)
	r.NotOffered = notOffered
	var b strings.Builder
	for _, h := range held {
		fmt.Fprintf(&b, "; %s (insert #%d) held %dms, %d later inserts committed first, %d of %d relays past it, %d sessions waiting for it", h.eventID, h.number, h.heldMS, h.later, h.passedBy, h.relays, h.blocked)
	}
	b.WriteString(pace.String())
	r.Detail += fmt.Sprintf(" — %d inserts, %d held%s", inserts, len(held), b.String())
	r.EventIDs = passed
	r.Waits = commitOrderWaits(held, c.Hold)
	return r
}

// commitOrderWaits are the held inserts' waits, in insert order: each
// waited, at most hold, for every relay to be past it before it committed
// (seen), or ended its hold without that (the target's own sessions
// waiting for it, or the hold reached).
func commitOrderWaits(held []heldInsert, hold time.Duration) []result.Wait {
	var out []result.Wait
	for _, h := range held {
		cause := fmt.Sprintf("every relay to be past held insert #%d (%s) before its commit", h.number, h.eventID)
		detail := fmt.Sprintf("%d of %d relays past it, %d later inserts committed first", h.passedBy, h.relays, h.later)
		var err error
		switch {
		case h.relays > 0 && h.passedBy >= h.relays:
		case h.blocked > 0:
			err = fmt.Errorf("%d of the target's sessions waited for it", h.blocked)
		default:
			err = errors.New("not every relay was seen past it")
		}
		out = append(out, waitOf(cause, time.Duration(h.heldMS)*time.Millisecond, hold, detail, err))
	}
	return out
}

// judgeCommitOrder says whether the window opened — a held insert every
// relay was seen past before it committed (a relay that reads by position
// has then read past it; one that waits for earlier transactions has
// shown it does) — which held rows were passed so, and, when it did not
// open, why not. Where every
// held insert ended its hold because the target's own sessions waited for
// it (a producer that serializes its outbox commits), no commit order can
// be inverted on this target: notOffered says so.
func judgeCommitOrder(held []heldInsert, inserts int) (opened bool, passed []string, why, notOffered string) {
	blocked := 0
	for _, h := range held {
		if h.relays > 0 && h.passedBy >= h.relays {
			passed = append(passed, h.eventID)
		}
		if h.blocked > 0 {
			blocked++
		}
	}
	switch {
	case len(passed) > 0:
		return true, passed, "", ""
	case len(held) == 0:
		return false, nil, fmt.Sprintf("no outbox insert was held (%d inserts while the triggers were in place)", inserts), ""
	case blocked == len(held):
		why := fmt.Sprintf("the target's outbox inserts wait for one another: each of the %d held made the target's other sessions wait, so none committed after it", len(held))
		return false, nil, why, why
	default:
		return false, nil, fmt.Sprintf("%d inserts held, and for none of them was every relay seen past it (writing a later row, or reading the outbox once one had committed) before it committed", len(held)), ""
	}
}

// tellReads writes into the read table, every readEvery until ctx ends,
// the outbox rows the audit trail shows a relay wrote (an UPDATE) since
// the last time, with the relay, and hands the same rows to pace (nil:
// none) to keep the relays in step; it ends pace before it returns.
func tellReads(ctx context.Context, env *Env, pool *pgxpool.Pool, pace *pacer) (err error) {
	if env.Audit == nil {
		return nil // the relays' reads of the outbox are all there is to see
	}
	defer func() { err = errors.Join(err, pace.end()) }()
	relays := map[string]bool{}
	for _, name := range relayNames(env) {
		relays[name] = true
	}
	var after int64
	tick := time.NewTicker(readEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		rows, err := env.Audit(ctx, after)
		if err != nil {
			return fmt.Errorf("read the audit trail: %w", err)
		}
		if err := pace.step(ctx, pool, rows); err != nil {
			return fmt.Errorf("keep the relays in step: %w", err)
		}
		var ids, by []string
		for _, a := range rows {
			after = a.ID
			if a.Op == "UPDATE" && relays[a.Writer] {
				ids, by = append(ids, a.EventID), append(by, a.Writer)
			}
		}
		if len(ids) == 0 {
			continue
		}
		if _, err := pool.Exec(ctx, "INSERT INTO "+commitOrderRead+" (event_id, relay) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING", ids, by); err != nil {
			return fmt.Errorf("tell the held inserts what was read: %w", err)
		}
	}
}

// heldInsert is one insert the fault held at its commit.
type heldInsert struct {
	number  int64 // its place among the inserts
	eventID string
	heldMS  int64
	later   int64 // inserts made after it that had committed when its hold ended
	// passedBy are the relays seen past it — each wrote a later row, or
	// read the outbox once a later row had committed — of relays.
	passedBy, relays int64
	blocked          int64 // the target's sessions that waited for it when its hold ended
}

// readHeld reads the held inserts, in insert order, and how many inserts
// the fault numbered.
func readHeld(ctx context.Context, tx pgx.Tx) ([]heldInsert, int, error) {
	var inserts int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+commitOrderInserts).Scan(&inserts); err != nil {
		return nil, 0, err
	}
	rows, err := tx.Query(ctx, "SELECT ins, event_id, held_ms, later, passed_by, relays, blocked FROM "+commitOrderHeld+" ORDER BY ins")
	if err != nil {
		return nil, 0, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (heldInsert, error) {
		var h heldInsert
		err := row.Scan(&h.number, &h.eventID, &h.heldMS, &h.later, &h.passedBy, &h.relays, &h.blocked)
		return h, err
	})
	return out, inserts, err
}

// install is the SQL that puts the fault in place. The numbers in it are
// the fault's own, written by Go; the table and column names come from
// the target file (checked as identifiers when it was loaded) and are
// quoted.
//
// The number is drawn in the inserting transaction, as a SERIAL id would
// be, and becomes visible to others when that transaction commits. The
// held transaction looks, every readEvery, for a later number whose
// eventId faultline wrote into the read table, and counts the later
// numbers once its hold is over: in READ COMMITTED (PostgreSQL's default)
// each of those statements sees exactly what was committed by then —
// before its own commit, which follows.
func (c CommitOrder) install(ob target.Table, model string) []string {
	// Relays that claim rows each keep their own place: every one must be
	// past the held insert. Relays that keep one position between them (an
	// offset relay's group) pass it together, and a read of theirs that
	// finished once a later insert had committed shows where that position
	// is.
	shared := model == history.ModelOffset
	need := math.MaxInt32 // every relay
	if shared {
		need = 1
	}
	table := pgx.Identifier(target.Ident(ob.Name)).Sanitize()
	eventID := "NEW." + pgx.Identifier{ob.EventID}.Sanitize() + "::text"
	return []string{
		fmt.Sprintf("CREATE TABLE %s (ins bigserial PRIMARY KEY, event_id text NOT NULL)", commitOrderInserts),
		fmt.Sprintf("CREATE INDEX ON %s (event_id)", commitOrderInserts),
		fmt.Sprintf("CREATE TABLE %s (event_id text NOT NULL, relay text NOT NULL, PRIMARY KEY (event_id, relay))", commitOrderRead),
		fmt.Sprintf("CREATE TABLE %s (name text PRIMARY KEY, outbox text NOT NULL)", commitOrderRelays),
		fmt.Sprintf("CREATE TABLE %s (ins bigint PRIMARY KEY, event_id text NOT NULL, held_ms bigint NOT NULL, later bigint NOT NULL, passed_by bigint NOT NULL, relays bigint NOT NULL, blocked bigint NOT NULL)", commitOrderHeld),
		fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $fl$
BEGIN
  INSERT INTO %s (event_id) VALUES (%s);
  RETURN NULL;
END
$fl$`, commitOrderNumber, commitOrderInserts, eventID),
		fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $fl$
DECLARE
  mine bigint;
  later bigint;
  passed bigint := 0;
  relays bigint;
  blocked bigint;
  since timestamptz;
  committed timestamptz;
BEGIN
  SELECT ins INTO mine FROM %[2]s WHERE event_id = %[3]s;
  IF mine IS NULL OR mod(mine, %[4]d) <> 0 OR mine > %[5]d THEN
    RETURN NULL;
  END IF;
  SELECT least(count(*), %[12]d) INTO relays FROM %[11]s;
  since := clock_timestamp();
  LOOP
    -- pg_stat_activity is read once per transaction unless cleared.
    PERFORM pg_stat_clear_snapshot();
    IF committed IS NULL AND EXISTS (SELECT 1 FROM %[2]s WHERE ins > mine) THEN
      committed := clock_timestamp();
    END IF;
    -- The relays that have passed it: wrote a later row; and, where the
    -- relays share one position (looks), began and finished a read of the
    -- outbox once a later row had committed.
    SELECT count(*) INTO passed FROM (
      SELECT r.relay FROM %[2]s i JOIN %[8]s r ON r.event_id = i.event_id WHERE i.ins > mine
      UNION
      SELECT a.application_name FROM pg_stat_activity a JOIN %[11]s rl ON rl.name = a.application_name
        WHERE %[13]t AND committed IS NOT NULL AND a.query_start > committed AND a.state <> 'active'
          AND a.query ~* '^\s*(select|with)\M' AND strpos(lower(a.query), lower(rl.outbox)) > 0
    ) p;
    SELECT count(*) INTO blocked FROM pg_stat_activity
      WHERE application_name <> '%[10]s' AND pg_backend_pid() = ANY (pg_blocking_pids(pid));
    EXIT WHEN passed >= relays OR blocked > 0 OR clock_timestamp() - since >= make_interval(secs => %[6]f);
    PERFORM pg_sleep(%[9]f);
  END LOOP;
  SELECT count(*) INTO later FROM %[2]s WHERE ins > mine;
  INSERT INTO %[7]s (ins, event_id, held_ms, later, passed_by, relays, blocked)
    VALUES (mine, %[3]s, (1000 * extract(epoch FROM clock_timestamp() - since))::bigint, later, passed, relays, blocked);
  RETURN NULL;
END
$fl$`, commitOrderHoldFn, commitOrderInserts, eventID, c.Every, c.Every*c.Holds, c.Hold.Seconds(), commitOrderHeld, commitOrderRead, readEvery.Seconds(), infra.OwnApplicationName, commitOrderRelays, need, shared),
		fmt.Sprintf("CREATE TRIGGER %s AFTER INSERT ON %s FOR EACH ROW EXECUTE FUNCTION %s()", commitOrderNumber, table, commitOrderNumber),
		fmt.Sprintf("CREATE CONSTRAINT TRIGGER %s AFTER INSERT ON %s DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION %s()", commitOrderHoldFn, table, commitOrderHoldFn),
	}
}
