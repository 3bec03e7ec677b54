package observe

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/safe"
	"github.com/faultline-dev/faultline/harness/target"
)

// observedTable is a table of the target faultline puts its commit
// trigger on, by the name faults and the commit stream know it by.
type observedTable struct {
	name string
	tbl  target.Table
}

// observedTables are the tables faultline watches in a run: the outbox,
// the facts and the effects, and an offset relay's position table, whose
// committed writes are the relay's marks.
func observedTables(t *target.Target) []observedTable {
	out := []observedTable{{history.TableOutbox, t.Observe.Outbox}, {history.TableFacts, t.Observe.Facts}, {history.TableEffects, t.Observe.Effects}}
	if p := t.Relay.Position; t.Relay.Model == history.ModelOffset && p != nil {
		out = append(out, observedTable{history.TablePosition, *p})
	}
	return out
}

// PositionWatched reports whether an offset relay's position table has
// its commit trigger.
func (w *Watch) PositionWatched() bool { return w.position }

// positionTrail is what the commit stream saw of the position table so
// far.
func (w *Watch) positionTrail() history.PositionTrail {
	seen := w.commits.Seen(history.TablePosition)
	return history.PositionTrail{Writes: seen.Commits, Last: seen.Last, Until: time.Now()}
}

// queryColumns are the names of the columns q's answer has, read without
// reading a row.
func queryColumns(ctx context.Context, pool *pgxpool.Pool, q target.Query, what string) (map[string]bool, error) {
	out := map[string]bool{}
	err := infra.ReadOnly(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT * FROM (`+q.SQL+`) AS q LIMIT 0`)
		if err != nil {
			return queryError(what, q, err)
		}
		for _, f := range rows.FieldDescriptions() {
			out[f.Name] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return queryError(what, q, err)
		}
		return nil
	})
	return out, err
}

// outboxHasStatus says whether the contract's outbox query returns a
// status column; for a claim relay one is required (readOutbox says so
// if it lacks one).
func outboxHasStatus(ctx context.Context, db map[string]*pgxpool.Pool, model string, q target.Query) (bool, error) {
	if model == history.ModelClaim {
		return true, nil
	}
	pool, err := poolFor(db, q, "outbox")
	if err != nil {
		return false, err
	}
	cols, err := queryColumns(ctx, pool, q, "outbox")
	if err != nil {
		return false, err
	}
	return cols["status"], nil
}

// outboxHasStatus is outboxHasStatus asked once per run: the convergence
// wait samples every 200 ms, and the query's columns do not change.
func (w *Watch) outboxHasStatus(ctx context.Context, model string, q target.Query) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.withStatus == nil {
		has, err := outboxHasStatus(ctx, w.run.DB, model, q)
		if err != nil {
			return false, err
		}
		w.withStatus = &has
	}
	return *w.withStatus, nil
}

// readEventIDs reads a contract query (named what) that lists eventIds
// in its column event_id: pending, the committed outbox events the relay
// has not settled; inbox_pending, the events the consumer has taken in and
// not applied.
func readEventIDs(ctx context.Context, db map[string]*pgxpool.Pool, q target.Query, what string) ([]string, error) {
	pool, err := poolFor(db, q, what)
	if err != nil {
		return nil, err
	}
	out := []string{}
	err = scanAll(ctx, pool, q, what, []string{"event_id"}, nil, func(get func(string) any) error {
		out = append(out, asString(get("event_id")))
		return nil
	})
	return out, err
}

// countRows counts the rows of the contract query q (named what) that
// match where ("" for all of them).
func countRows(ctx context.Context, db map[string]*pgxpool.Pool, q target.Query, what, where string) (int, error) {
	pool, err := poolFor(db, q, what)
	if err != nil {
		return 0, err
	}
	n := 0
	err = infra.ReadOnly(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM (`+q.SQL+`) AS q `+where).Scan(&n); err != nil {
			return queryError(what, q, err)
		}
		return nil
	})
	return n, err
}

// unsettled counts the outbox events the relay has not settled: the
// pending query's, and the rows Pending or Processing where the outbox
// query has a status. shown is false where the target has neither: its
// relay's backlog cannot be seen.
func (w *Watch) unsettled(ctx context.Context) (total int, shown bool, err error) {
	c, model := w.run.Target.Contract, w.run.Target.Relay.Model
	if q := c.Pending; q != nil {
		n, err := countRows(ctx, w.run.DB, *q, "pending", "")
		if err != nil {
			return 0, false, err
		}
		total, shown = total+n, true
	}
	if q := c.Outbox; q != nil {
		withStatus, err := w.outboxHasStatus(ctx, model, *q)
		if err != nil {
			return 0, false, err
		}
		if withStatus {
			n, err := countRows(ctx, w.run.DB, *q, "outbox", `WHERE status IN ('Pending', 'Processing')`)
			if err != nil {
				return 0, false, err
			}
			total, shown = total+n, true
		}
	}
	return total, shown, nil
}

// readRelay gives the observation the relay's model and, where it was
// watched, the trail of its position.
func (w *Watch) readRelay(o *history.Record) {
	t := w.run.Target
	o.Model = t.Relay.Model
	if t.Relay.Model == history.ModelOffset && w.position {
		trail := w.positionTrail()
		o.Position = &trail
	}
}

// LiveTapQueue is the queue faultline binds beside the target's, as the
// tap queue is, and consumes while the run lasts, when a fault is timed by
// the target's publishes: each message routed to it is a publish, told to
// the faults the moment the broker routes it. It is exclusive to
// faultline's connection, so the broker removes it when the run ends.
const LiveTapQueue = "faultline.tap.live"

func init() {
	addSource(source{name: history.SourcePublishes, when: Live,
		offered: func(t *target.Target, _ map[string]bool) bool { return t.Topology.Exchange != "" },
		install: (*Watch).watchPublishes})
}

// watchPublishes binds and consumes the live tap; what cannot be done
// stops the commit feed too, so the faults waiting on it say why. What it
// sees goes to the faults, not the record.
func (w *Watch) watchPublishes(ctx context.Context) (recorder, error) {
	if err := w.consumeLiveTap(ctx); err != nil {
		w.commits.Fail(fmt.Errorf("live tap queue (publishes): %w", err))
		return nil, err
	}
	return nil, nil
}

func (w *Watch) consumeLiveTap(ctx context.Context) error {
	tp := w.run.Target.Topology
	return w.consumeRouted(ctx, LiveTapQueue, "publish stream (live tap)", tp.Exchange, tp.RoutingKeys, func(d amqp.Delivery) {
		w.commits.Publish(history.Commit{Table: history.TablePublish, EventID: eventIDOf(tp.EventID, d), At: time.Now()})
	})
}

// consumeRouted declares queue in the run's vhost (exclusive to
// faultline's connection: the broker removes it when the run ends), binds
// it to exchange with each of keys, and hands each message routed there to
// each, in order, until Close. Bound to the target's exchange, it makes
// what it is bound for routable: a mandatory publish that only it takes is
// not returned (the unbind faults leave no such queue).
func (w *Watch) consumeRouted(ctx context.Context, queue, what, exchange string, keys []string, each func(amqp.Delivery)) error {
	conn, ch, err := w.dialVHost()
	if err != nil {
		return err
	}
	fail := func(err error) error {
		conn.Close()
		return err
	}
	if _, err := ch.QueueDeclare(queue, false, true, true, false, nil); err != nil {
		return fail(fmt.Errorf("declare %s: %w", queue, err))
	}
	for _, key := range keys {
		if err := ch.QueueBind(queue, key, exchange, false, nil); err != nil {
			return fail(fmt.Errorf("bind %s to %s with %s: %w", queue, exchange, key, err))
		}
	}
	deliveries, err := ch.ConsumeWithContext(ctx, queue, "", true, true, false, false, nil)
	if err != nil {
		return fail(fmt.Errorf("consume %s: %w", queue, err))
	}
	done := make(chan struct{})
	safe.Go(what, func() {
		defer close(done)
		for d := range deliveries {
			each(d)
		}
	}, w.run.OnPanic)
	w.onClose(func() {
		conn.Close() // ends the deliveries
		<-done
	})
	return nil
}
