package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/observe"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/harness/workload"
)

// TargetProblem is one thing wrong with a target, found by starting it.
type TargetProblem struct {
	Field   string // the target file's field it concerns, e.g. processes[1] or contract.facts
	Line    int    // its line in the file, where known
	Message string
}

func (p TargetProblem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%d: %s: %s", p.Line, p.Field, p.Message)
	}
	return fmt.Sprintf("%s: %s", p.Field, p.Message)
}

// CheckTarget starts the target once on fresh databases and a fresh vhost
// and checks every part of its file against what the pipeline does: each
// process becomes ready, the consumer declares its queue, the exchange and
// dead-letter queue exist, the crash points the file maps are served, one
// fact of the workload goes through and takes effect, and every contract
// query runs and returns its columns. It returns what held and one problem
// per thing wrong, and stops and removes everything it started.
func (sh *Shared) CheckTarget(ctx context.Context) (held []string, problems []TargetProblem) {
	t := sh.Target
	// A problem can quote an error with a URL or a process's output: it is
	// printed, so it is masked (see redactResult).
	red := sh.redactor()
	add := func(field string, line int, format string, args ...any) {
		problems = append(problems, TargetProblem{Field: field, Line: line, Message: red.String(fmt.Sprintf(format, args...))})
	}
	sc := Scenario{Name: "check-target", Workload: workload.Spec{Orders: 1, Concurrency: 1, EventsPerOrder: 1 + len(t.Workload.Steps)}}
	r := sh.newRun(sc, Options{}, "correct", func(suffix string) string { return "check-target-" + suffix })
	sh.track(r.dir, nil)
	defer func() {
		teardownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		r.teardown(teardownCtx)
		sh.untrack(r.dir)
		_ = os.RemoveAll(r.dir)
	}()
	held = append(held, fmt.Sprintf("timing: lease %s: a past-lease window waits up to %s for another relay to take the rows over, a run up to %s",
		t.Lease, fault.TakeoverWait(0, t.Lease), runBound(t.Lease)))
	p, err := r.provision(ctx)
	if err != nil {
		field := "databases / schema"
		if errors.Is(err, errRunFolder) {
			field = "run folder"
		}
		add(field, 0, "%v", err)
		return held, problems
	}
	p.watchAlways = true // every observer must install on a target
	held = append(held, fmt.Sprintf("databases %s and a vhost created, schema in place", strings.Join(t.Databases, ", ")))
	if t.Relay.Model == history.ModelLog {
		r.checkLogical(ctx, add, &held)
	}

	// Every process, consumers first; one that fails is reported and the
	// others are still tried.
	failed := map[string]bool{}
	s, err := r.start(ctx, p, func(in instance, err error) bool {
		if in.name == "" {
			failed["queue"] = true
			add("topology.queue", 0, "the target never declared queue %q with a consumer on it: %v", t.Topology.Queue, err)
			return true
		}
		failed[in.proc.Role] = true
		field, line := processField(t, in.proc)
		add(field, line, "%s never became ready: %s", in.name, lastLines(err.Error(), 8))
		return true
	})
	if err != nil {
		add("run folder", 0, "%v", err)
		return held, problems
	}
	for _, in := range r.instances {
		if _, ok := r.sup.Process(in.name); ok {
			held = append(held, fmt.Sprintf("%s (%s) started and became ready", in.name, in.proc.Role))
		}
	}
	if !failed["consumer"] && !failed["queue"] {
		held = append(held, fmt.Sprintf("queue %s declared and consumed", t.Topology.Queue))
	}
	r.checkTopology(ctx, add, &held)
	r.checkCrashPoints(ctx, add, &held)
	if len(s.watch.Missing()) == 0 {
		held = append(held, "observe: triggers on the outbox, facts and effects tables, and the tap queue, in place")
	}
	for _, why := range s.watch.Missing() {
		add("observe", 0, "%s", why)
	}
	if failed["producer"] || failed["consumer"] || failed["queue"] {
		add("workload", t.Workload.Create.Line, "not tried: the pipeline did not start")
		r.checkQueries(ctx, "", add, &held)
		return held, problems
	}

	// One fact through the whole pipeline.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	wl := workload.New(sc.Workload, t.Workload, 1, r.producerAddr())
	err = wl.Run(wctx)
	cancel()
	if err != nil {
		add("workload", t.Workload.Create.Line, "one fact with its %d steps did not go through: %v", len(t.Workload.Steps), err)
	} else {
		held = append(held, fmt.Sprintf("one fact created and its %d follow-up steps answered", len(t.Workload.Steps)))
	}
	eventID := ""
	if err == nil {
		if _, err := waitConverged(ctx, s.watch, r.sup.Down, converge{Timeout: 30 * time.Second, Quiet: QuietWindow, Events: int(wl.Acknowledged())}); err != nil {
			add("contract.effects", t.Contract.Effects.Line, "the fact never took effect as the contract reads it: %v", err)
		} else if obs, err := s.watch.End(ctx, r.ends()); err == nil {
			switch {
			case len(obs.Facts) == 0:
				add("contract.facts", t.Contract.Facts.Line, "the facts query returns no row after a fact was created")
			case len(obs.Effects) < len(obs.Facts):
				add("contract.effects", t.Contract.Effects.Line, "%d facts but %d effects after convergence", len(obs.Facts), len(obs.Effects))
			default:
				held = append(held, fmt.Sprintf("the fact took effect: %d facts, %d effects", len(obs.Facts), len(obs.Effects)))
			}
			for _, f := range obs.Facts {
				if f.EventID != "" {
					eventID = f.EventID
				}
			}
			for _, o := range obs.Outbox {
				if eventID == "" {
					eventID = o.EventID
				}
			}
		}
	}
	r.checkPosition(s.watch, p.env.Commits, eventID != "", add, &held)
	r.checkQueries(ctx, eventID, add, &held)
	return held, problems
}

func processField(t *target.Target, p target.Process) (string, int) {
	for i, q := range t.Processes {
		if q.Name == p.Name {
			return fmt.Sprintf("processes[%d] (%s)", i, p.Name), p.Line
		}
	}
	return "processes", p.Line
}

// checkTopology declares the exchange and the dead-letter queue passively.
func (r *run) checkTopology(ctx context.Context, add func(string, int, string, ...any), held *[]string) {
	tp := r.sh.Target.Topology
	conn, err := amqp.DialConfig(r.sh.Infra.AMQPURL(r.id), infra.OwnAMQPConfig(3*time.Second))
	if err != nil {
		add("topology", 0, "broker: %v", err)
		return
	}
	defer conn.Close()
	passive := func(what string, declare func(ch *amqp.Channel) error) {
		ch, err := conn.Channel()
		if err != nil {
			add("topology", 0, "broker channel: %v", err)
			return
		}
		defer ch.Close()
		if err := declare(ch); err != nil {
			add("topology."+what, 0, "%v", err)
			return
		}
		*held = append(*held, "topology: "+what+" exists")
	}
	passive("exchange", func(ch *amqp.Channel) error {
		if err := ch.ExchangeDeclarePassive(tp.Exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
			return fmt.Errorf("exchange %q was never declared by the target: %v", tp.Exchange, err)
		}
		return nil
	})
	if tp.DeadLetterQueue != "" {
		passive("dead_letter_queue", func(ch *amqp.Channel) error {
			if _, err := ch.QueueDeclarePassive(tp.DeadLetterQueue, true, false, false, false, nil); err != nil {
				return fmt.Errorf("queue %q was never declared by the target: %v", tp.DeadLetterQueue, err)
			}
			return nil
		})
	}
}

// checkCrashPoints asks each instance that maps crash points which it
// serves: every point the file maps must be among them.
func (r *run) checkCrashPoints(ctx context.Context, add func(string, int, string, ...any), held *[]string) {
	t := r.sh.Target
	for _, in := range r.instances {
		if len(in.proc.CrashPoints) == 0 {
			continue
		}
		p, ok := r.sup.Process(in.name)
		if !ok {
			continue // did not start: already reported
		}
		field, line := processField(t, in.proc)
		served, err := p.CrashPoints(ctx)
		if err != nil {
			add(field+".crashpoints", line, "%s: %v", in.name, err)
			continue
		}
		have := map[string]bool{}
		var names []string
		for _, s := range served {
			have[s.Name] = true
			names = append(names, s.Name)
		}
		bad := 0
		for window, own := range in.proc.CrashPoints {
			if !have[own] {
				bad++
				add(field+".crashpoints."+window, line, "%s does not serve crash point %q (it serves: %s)", in.name, own, strings.Join(names, ", "))
			}
		}
		if bad == 0 {
			*held = append(*held, fmt.Sprintf("%s serves its %d crash points", in.name, len(in.proc.CrashPoints)))
		}
	}
}

// checkQueries runs every contract query on the run's databases and reads
// its columns. The queries that read run in a read-only transaction (a write
// in one is refused); inbox_expire, which deletes by design, runs in a
// transaction that is rolled back.
func (r *run) checkQueries(ctx context.Context, eventID string, add func(string, int, string, ...any), held *[]string) {
	c := r.sh.Target.Contract
	one := func(name string, q *target.Query, run func() error) {
		if q == nil {
			return
		}
		if err := run(); err != nil {
			add("contract."+name, q.Line, "%v", err)
			return
		}
		*held = append(*held, "contract: "+name+" runs")
	}
	only := func(name string, q *target.Query) func() error {
		return func() error {
			// every other query a no-op, so one problem is reported once
			alone := target.Contract{
				Facts:   target.Query{Database: c.Facts.Database, SQL: "SELECT '' AS aggregate_id WHERE false"},
				Effects: target.Query{Database: c.Effects.Database, SQL: "SELECT '' AS event_id, '' AS aggregate_id WHERE false"},
			}
			switch name {
			case "facts":
				alone.Facts = c.Facts
			case "effects":
				alone.Effects = c.Effects
			case "outbox":
				alone.Outbox = q
			case "held_back":
				alone.HeldBack = q
			case "pending":
				alone.Pending = q
			case "inbox_pending":
				alone.InboxPending = q
			}
			return observe.ReadContract(ctx, r.pools, alone, r.sh.Target.Relay.Model, &history.Record{})
		}
	}
	one("facts", &c.Facts, only("facts", &c.Facts))
	one("effects", &c.Effects, only("effects", &c.Effects))
	one("outbox", c.Outbox, only("outbox", c.Outbox))
	one("held_back", c.HeldBack, only("held_back", c.HeldBack))
	one("pending", c.Pending, only("pending", c.Pending))
	one("inbox_pending", c.InboxPending, only("inbox_pending", c.InboxPending))
	one("inbox", c.Inbox, func() error {
		return infra.ReadOnly(ctx, r.pools[c.Inbox.Database], func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, c.Inbox.SQL)
			if err != nil {
				return err
			}
			defer rows.Close()
			found := false
			for _, f := range rows.FieldDescriptions() {
				found = found || f.Name == "event_id"
			}
			if !found {
				rows.Close()
				if err := rows.Err(); err != nil {
					return err // refused: no columns, and the reason
				}
				return fmt.Errorf("the query returns no column \"event_id\"")
			}
			for rows.Next() {
			}
			return rows.Err()
		})
	})
	one("payload", c.Payload, func() error {
		if eventID == "" {
			return fmt.Errorf("not tried: no eventId to ask for (no fact went through)")
		}
		var key string
		var body []byte
		return infra.ReadOnly(ctx, r.pools[c.Payload.Database], func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, c.Payload.SQL, eventID).Scan(&key, &body); err != nil {
				return fmt.Errorf("for eventId %s: %w (want one row: routing key, body)", eventID, err)
			}
			return nil
		})
	})
	one("inbox_expire", c.InboxExpire, func() error {
		tx, err := r.pools[c.InboxExpire.Database].Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a check: nothing is kept
		_, err = tx.Exec(ctx, c.InboxExpire.SQL)
		return err
	})
}

// lastLines keeps the first line of a message and its last n lines (a
// process's output can be a whole usage text).
func lastLines(msg string, n int) string {
	lines := strings.Split(strings.TrimRight(msg, "\n"), "\n")
	if len(lines) <= n+1 {
		return msg
	}
	return lines[0] + "\n  …\n" + strings.Join(lines[len(lines)-n:], "\n")
}

// checkLogical says in one line whether the server lets a relay that
// tails the write-ahead log (relay: {model: log}) create its slot: it must
// run with wal_level=logical, and the run's user needs the REPLICATION
// attribute (or to be a superuser).
func (r *run) checkLogical(ctx context.Context, add func(string, int, string, ...any), held *[]string) {
	t := r.sh.Target
	var db string
	if len(t.Databases) > 0 {
		db = t.Databases[0]
	}
	pool, ok := r.pools[cmp.Or(t.Observe.Outbox.Database, db)]
	if !ok {
		add("relay", t.Relay.Line, "no database of the run to ask whether the server serves logical replication")
		return
	}
	var level, user string
	var replication bool
	if err := pool.QueryRow(ctx, `SELECT current_setting('wal_level'), current_user, rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user`).
		Scan(&level, &user, &replication); err != nil {
		add("relay", t.Relay.Line, "could not read whether the server serves logical replication: %v", err)
		return
	}
	var missing []string
	if level != "logical" {
		missing = append(missing, fmt.Sprintf("the server runs wal_level=%s (it needs wal_level=logical)", level))
	}
	if !replication {
		missing = append(missing, fmt.Sprintf("user %s has no REPLICATION attribute", user))
	}
	if len(missing) > 0 {
		add("relay", t.Relay.Line, "a relay that tails the write-ahead log cannot create its slot: %s", strings.Join(missing, "; "))
		return
	}
	*held = append(*held, fmt.Sprintf("logical replication served (wal_level=logical, user %s may replicate): slot %s, publication %s for this run", user, r.slot(), r.publication()))
}
