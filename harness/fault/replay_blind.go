package fault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/target"
)

// injectBlind is the retention replay on a consumer that writes no event
// log, seen from outside: the event replayed is the first the effects
// query shows; a replay is handled once the broker has delivered it and
// the queue is empty again (its counters); absorbed means the effects
// query still shows the event once, and after the inbox expired, the
// second replay shows it twice. w records what it waits for.
func (r RetentionReplay) injectBlind(ctx context.Context, env *Env, w *waits) result.Fault {
	start := time.Now()
	fail := recorder(r, &start)
	eq, epool, err := env.Query(&env.Contract.Effects, "effects")
	if err != nil {
		return fail(false, err)
	}
	effectsOf := func(id string) (int, error) {
		effects, err := eventIDs(ctx, epool, eq, "effects")
		n := 0
		for _, e := range effects {
			if e == id {
				n++
			}
		}
		return n, err
	}
	// The first event the consumer applied.
	var id string
	if err := w.wait("the effects query to show an effect", env.Deadline, func() (string, error) {
		return id, pollUntil(ctx, env.Deadline, func() (bool, error) {
			effects, err := eventIDs(ctx, epool, eq, "effects")
			if err == nil && len(effects) > 0 {
				id = effects[0]
			}
			return id != "", err
		})
	}); err != nil {
		return fail(false, fmt.Errorf("no effect seen: %w", err))
	}
	msg, err := payloadOf(ctx, env, id)
	if err != nil {
		return fail(false, err, id)
	}
	start = time.Now()
	delivered, err := r.replayHandled(ctx, env, id, msg, w)
	if err != nil {
		return fail(false, err, id)
	}
	if n, err := effectsOf(id); err != nil || n != 1 {
		return fail(true, fmt.Errorf("replay inside the retention was not absorbed: %d effects of %s (%v)", n, id, err), id)
	}
	env.Logf("replay of %s delivered (%d deliveries since) and absorbed: one effect", id, delivered)
	if err := r.expireAndReplay(ctx, env, id, msg); err != nil {
		return fail(true, err, id)
	}
	if err := w.wait(fmt.Sprintf("the effects query to show %s twice after the inbox expired", id), env.Deadline, func() (string, error) {
		return "", pollUntil(ctx, env.Deadline, func() (bool, error) {
			n, err := effectsOf(id)
			return n >= 2, err
		})
	}); err != nil {
		return fail(true, fmt.Errorf("replay after the inbox expired did not take effect: %w", err), id)
	}
	env.Logf("replay of %s after the retention took effect again", id)
	res := fail(true, nil, id)
	res.Detail += fmt.Sprintf(" — %s replayed: delivered and absorbed (one effect, the broker's counters), then after the inbox expired taken twice (the effects query)", id)
	return res
}

// replayHandled publishes the replay once the target's queue is quiet (empty,
// its delivery count steady over a statistics interval) and waits until
// the broker has delivered it and the queue is empty again; it returns how
// many deliveries the broker counted since. w records what it waits for.
func (r RetentionReplay) replayHandled(ctx context.Context, env *Env, id string, msg replayed, w *waits) (int, error) {
	queue := func() (history.QueueInfo, error) { return env.Infra.Queue(ctx, env.VHost, env.Topology.Queue) }
	var baseline history.QueueInfo
	prev := -1
	if err := w.wait(fmt.Sprintf("%s to be quiet before the replay (empty, its deliveries steady)", env.Topology.Queue), env.Deadline, func() (string, error) {
		return "", poll.Until(ctx, env.Deadline, statsInterval, func() (bool, error) {
			q, err := queue()
			if err != nil {
				return false, err
			}
			quiet := q.Messages == 0 && q.Delivered == prev
			prev, baseline = q.Delivered, q
			return quiet, nil
		})
	}); err != nil {
		return 0, fmt.Errorf("the queue %s never went quiet before the replay: %w", env.Topology.Queue, err)
	}
	if err := publishCopy(ctx, env, id, msg); err != nil {
		return 0, err
	}
	var now history.QueueInfo
	if err := w.wait(fmt.Sprintf("the broker to deliver the replay of %s and %s to be empty again", id, env.Topology.Queue), env.Deadline, func() (string, error) {
		return "", pollUntil(ctx, env.Deadline, func() (bool, error) {
			q, err := queue()
			now = q
			return err == nil && q.Delivered > baseline.Delivered && q.Messages == 0, err
		})
	}); err != nil {
		return 0, fmt.Errorf("the replay of %s was not delivered and acked: %w", id, err)
	}
	return now.Delivered - baseline.Delivered, nil
}

// pollUntil calls done every 50 ms until it says so, fails, or within ends.
func pollUntil(ctx context.Context, within time.Duration, done func() (bool, error)) error {
	return poll.Until(ctx, within, 50*time.Millisecond, done)
}

// replayed is the message faultline publishes again for an event.
type replayed struct {
	RoutingKey string
	Body       []byte
	// Headers are the AMQP headers the target's publisher sets (a
	// library that reads the event's id from a header of its own, not
	// from MessageId); none when the payload query gives no headers
	// column.
	Headers amqp.Table
}

// payloadOf is the message of the event id, from the contract's payload
// query (read-only: it comes from the target file): its routing_key and
// payload columns, and an optional headers column, a JSON object of
// strings.
func payloadOf(ctx context.Context, env *Env, id string) (replayed, error) {
	q, pool, err := env.Query(env.Contract.Payload, "payload")
	if err != nil {
		return replayed{}, err
	}
	var msg replayed
	err = infra.ReadOnly(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, q.SQL, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return err
			}
			return pgx.ErrNoRows
		}
		// By name: the body and the headers as their text (JSON stays
		// as the target wrote it), any other column ignored.
		var headers []byte
		dest := make([]any, len(rows.FieldDescriptions()))
		seen := map[string]bool{}
		for i, f := range rows.FieldDescriptions() {
			seen[f.Name] = true
			switch f.Name {
			case "routing_key":
				dest[i] = &msg.RoutingKey
			case "payload":
				dest[i] = &msg.Body
			case "headers":
				dest[i] = &headers
			default:
				dest[i] = new(any)
			}
		}
		if !seen["routing_key"] || !seen["payload"] {
			return errors.New("want the columns routing_key and payload")
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if headers != nil {
			var err error
			if msg.Headers, err = headersOf(headers); err != nil {
				return fmt.Errorf("column headers: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return replayed{}, fmt.Errorf("contract payload of %s: %w", id, err)
	}
	return msg, nil
}

// headersOf reads a headers column: a JSON object whose values are
// strings.
func headersOf(raw []byte) (amqp.Table, error) {
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("want a JSON object of strings: %w", err)
	}
	out := amqp.Table{}
	for k, val := range m {
		out[k] = val
	}
	return out, nil
}

// expireAndReplay expires the consumer's inbox (the contract's
// inbox_expire: the one contract statement that keeps write rights, it
// deletes by design) and publishes the replay again.
func (r RetentionReplay) expireAndReplay(ctx context.Context, env *Env, id string, msg replayed) error {
	q, pool, err := env.Query(env.Contract.InboxExpire, "inbox_expire")
	if err != nil {
		return err
	}
	tag, err := pool.Exec(ctx, q.SQL)
	if err != nil {
		return fmt.Errorf("contract inbox_expire: %w", err)
	}
	env.Logf("inbox expired: %d rows", tag.RowsAffected())
	return publishCopy(ctx, env, id, msg)
}

// eventIDs are the eventIds the contract's query q (named name: "effects",
// "inbox") returns, in its order (for the effects query, the order the
// consumer applied them).
func eventIDs(ctx context.Context, pool *pgxpool.Pool, q target.Query, name string) ([]string, error) {
	var out []string
	err := infra.ReadOnly(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, q.SQL)
		if err != nil {
			return fmt.Errorf("%s query: %w", name, err)
		}
		defer rows.Close()
		col := -1
		for i, f := range rows.FieldDescriptions() {
			if f.Name == "event_id" {
				col = i
			}
		}
		if col < 0 {
			return fmt.Errorf("%s query: no event_id column", name)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				return fmt.Errorf("%s query: %w", name, err)
			}
			switch v := vals[col].(type) {
			case []byte:
				out = append(out, string(v))
			default:
				out = append(out, fmt.Sprint(v))
			}
		}
		return rows.Err()
	})
	return out, err
}
