package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/safe"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
)

// TapQueue is the queue faultline binds to the target's exchange with the
// target's routing keys, in the run's own vhost, to count what was routed
// per eventId without the target's help.
const TapQueue = "faultline.tap"

// notifyChannel is the LISTEN channel of the triggers faultline installs.
const notifyChannel = "faultline_commits"

// observers are what faultline installs in a run to watch a target from
// outside: triggers on the observed tables (an audit trail of every outbox
// write with its writer, and a notification of each write when its
// transaction commits), a listener per database feeding the commits to the
// faults, and the tap queue.
type observers struct {
	commits *fault.Commits
	// audit is set once the outbox's audit trigger is in place.
	audit  bool
	why    []string // what could not be installed
	tapped bool
}

func (o *observers) missing(format string, args ...any) {
	o.why = append(o.why, fmt.Sprintf(format, args...))
}

// observeNeeds are what a run needs watched from outside: what its faults
// are timed by and its evidence read from.
func (r *run) observeNeeds(faults []fault.Fault) map[check.Need]bool {
	need := map[check.Need]bool{}
	for _, e := range r.sc.Evidence {
		for _, n := range e.Needs {
			switch n {
			case check.NeedAudit, check.NeedTap, check.NeedCommits:
				need[n] = true
			}
		}
	}
	for _, f := range faults {
		if _, ok := f.(fault.CommitWaiter); ok {
			need[check.NeedCommits] = true
		}
	}
	return need
}

// watches says whether the run installs the observers: when it needs them,
// or when the target's relays write no event log (then fencing rests on the
// audit trail, and the publishes are counted by the tap). A run of a target
// that speaks the protocol and needs none of it installs nothing: no
// trigger slows the target's writes, no tap doubles its routing.
func (r *run) watches(need map[check.Need]bool) bool {
	return len(need) > 0 || !r.logRoles()[protocol.Relay]
}

// installObservers puts the triggers on the target's tables (they exist
// once its processes have started: some make their own schema), listens
// for their commits, and binds the tap queue. What cannot be installed is
// recorded, not fatal: the checks that rest on it say so.
func (r *run) installObservers(ctx context.Context) {
	obs := r.obsv
	t := r.sh.Target
	tables := []struct {
		name string
		tbl  target.Table
	}{{fault.TableOutbox, t.Observe.Outbox}, {fault.TableFacts, t.Observe.Facts}, {fault.TableEffects, t.Observe.Effects}}
	listen := map[string]bool{}
	for _, tb := range tables {
		if err := r.installTrigger(ctx, tb.name, tb.tbl); err != nil {
			obs.missing("observe.%s: %v", tb.name, err)
			continue
		}
		if tb.name == fault.TableOutbox {
			obs.audit = true
		}
		listen[tb.tbl.Database] = true
	}
	for db := range listen {
		if err := r.listen(ctx, db); err != nil {
			obs.missing("listen on %s: %v", db, err)
		}
	}
	if len(obs.why) > 0 {
		obs.commits.Fail(errors.New(strings.Join(obs.why, "; ")))
	}
	if err := r.bindTap(); err != nil {
		obs.missing("tap queue: %v", err)
	} else {
		obs.tapped = true
	}
}

// installTrigger installs, in the table's database, the trigger that
// notifies each committed write (and, on the outbox, audits it).
func (r *run) installTrigger(ctx context.Context, name string, tbl target.Table) error {
	pool, ok := r.pools[tbl.Database]
	if !ok {
		return fmt.Errorf("no database %q in this run", tbl.Database)
	}
	var exists *string
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1)::text`, tbl.Name).Scan(&exists); err != nil {
		return fmt.Errorf("look up table %s: %w", tbl.Name, err)
	}
	if exists == nil {
		return fmt.Errorf("table %s does not exist in database %s once the target started (give observe.%s in the target file)", tbl.Name, tbl.Database, name)
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
	var body strings.Builder
	fn := "faultline_observe_" + name
	fmt.Fprintf(&body, "CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $fl$\nBEGIN\n", fn)
	if name == fault.TableOutbox {
		fmt.Fprintf(&body, "  INSERT INTO faultline_audit (op, event_id, old_status, new_status, old_claim, new_claim) VALUES (TG_OP, %s, %s, %s, %s, %s);\n",
			col(tbl.EventID), old(tbl.Status), col(tbl.Status), old(tbl.Claim), col(tbl.Claim))
	}
	fmt.Fprintf(&body, "  PERFORM pg_notify('%s', json_build_object('table', '%s', 'op', TG_OP, 'writer', current_setting('application_name'), 'event_id', %s, 'status', %s, 'claim', %s)::text);\n",
		notifyChannel, name, col(tbl.EventID), col(tbl.Status), col(tbl.Claim))
	body.WriteString("  RETURN NULL;\nEND\n$fl$;\n")
	stmts := []string{}
	if name == fault.TableOutbox {
		stmts = append(stmts, `CREATE TABLE IF NOT EXISTS faultline_audit (
  id bigserial PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  writer text NOT NULL DEFAULT current_setting('application_name'),
  op text NOT NULL,
  event_id text, old_status text, new_status text, old_claim text, new_claim text)`)
	}
	stmts = append(stmts, body.String(),
		fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s", fn, table),
		fmt.Sprintf("CREATE TRIGGER %s AFTER INSERT OR UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION %s()", fn, table, fn))
	for _, s := range stmts {
		if _, err := pool.Exec(ctx, s); err != nil {
			return fmt.Errorf("install trigger on %s: %w", tbl.Name, err)
		}
	}
	return nil
}

// listen feeds the commit notifications of database db to the faults, on a
// connection of its own (straight to PostgreSQL, not through a link),
// until the run's teardown.
func (r *run) listen(ctx context.Context, db string) error {
	conn, err := pgx.Connect(ctx, r.sh.Infra.PostgresURL(r.dbs[db]))
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	safe.Go("commit stream (LISTEN)", func() {
		defer close(done)
		for {
			n, err := conn.WaitForNotification(lctx)
			if err != nil {
				return
			}
			var c struct {
				Table, Op, Writer, Status, Claim string
				EventID                          string `json:"event_id"`
			}
			if json.Unmarshal([]byte(n.Payload), &c) != nil {
				continue
			}
			if c.Table == fault.TableOutbox {
				c.Status = r.sh.Target.Observe.Outbox.ArticleStatus(c.Status)
			}
			r.obsv.commits.Publish(fault.Commit{Table: c.Table, Op: c.Op, Writer: c.Writer, EventID: c.EventID, Status: c.Status, Claim: c.Claim, At: time.Now()})
		}
	}, r.onPanic)
	r.cleanup = append(r.cleanup, func(context.Context) {
		cancel()
		<-done
		conn.Close(context.Background())
	})
	return nil
}

// bindTap declares the tap queue and binds it to the exchange with every
// routing key of the target's topology.
func (r *run) bindTap() error {
	tp := r.sh.Target.Topology
	conn, err := amqp.DialConfig(r.sh.Infra.AMQPURL(r.id), amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return err
	}
	if _, err := ch.QueueDeclare(TapQueue, true, false, false, false, nil); err != nil {
		conn.Close()
		return fmt.Errorf("declare %s: %w", TapQueue, err)
	}
	for _, key := range tp.RoutingKeys {
		if err := ch.QueueBind(TapQueue, key, tp.Exchange, false, nil); err != nil {
			conn.Close()
			return fmt.Errorf("bind %s to %s with %s: %w", TapQueue, tp.Exchange, key, err)
		}
	}
	// the queue and its bindings outlive the connection
	return conn.CloseDeadline(time.Now().Add(time.Second))
}

// readTap drains the tap queue: how many times each eventId (its
// MessageId, else the body's eventId) was routed.
func (r *run) readTap(ctx context.Context) (map[string]int, error) {
	conn, err := amqp.DialConfig(r.sh.Infra.AMQPURL(r.id), amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
	if err != nil {
		return nil, fmt.Errorf("tap: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("tap: %w", err)
	}
	defer ch.Close()
	out := map[string]int{}
	for ctx.Err() == nil {
		d, ok, err := ch.Get(TapQueue, true)
		if err != nil {
			return nil, fmt.Errorf("tap: %w", err)
		}
		if !ok {
			return out, nil
		}
		id := d.MessageId
		if id == "" {
			var body struct {
				EventID string `json:"eventId"`
			}
			_ = json.Unmarshal(d.Body, &body)
			id = body.EventID
		}
		out[id]++
	}
	return out, ctx.Err()
}

// readAudit reads the outbox's audit trail, in the order the writes were made.
func (r *run) readAudit(ctx context.Context) ([]check.AuditRow, error) {
	outbox := r.sh.Target.Observe.Outbox
	pool := r.pools[outbox.Database]
	rows, err := pool.Query(ctx, `SELECT id, at, writer, op, coalesce(event_id, ''), coalesce(old_status, ''), coalesce(new_status, ''), coalesce(old_claim, ''), coalesce(new_claim, '') FROM faultline_audit ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("audit trail: %w", err)
	}
	defer rows.Close()
	var out []check.AuditRow
	for rows.Next() {
		var a check.AuditRow
		if err := rows.Scan(&a.ID, &a.At, &a.Writer, &a.Op, &a.EventID, &a.OldStatus, &a.NewStatus, &a.OldClaim, &a.NewClaim); err != nil {
			return nil, fmt.Errorf("audit trail: %w", err)
		}
		a.OldStatus, a.NewStatus = outbox.ArticleStatus(a.OldStatus), outbox.ArticleStatus(a.NewStatus)
		out = append(out, a)
	}
	return out, rows.Err()
}
