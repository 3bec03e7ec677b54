package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// RetentionReplay shows the article's retention boundary on one event that
// already took effect: it replays the event (same eventId) while its inbox
// row exists — the inbox absorbs it — then expires the consumer's inbox as
// if the retention had passed (the contract's inbox_expire statement), and
// replays it again: the second replay takes effect twice. The replayed
// eventId is in the result. The message is rebuilt from the contract's
// payload query (routing key and body by eventId).
type RetentionReplay struct {
	Consumer string // the consumer instance reference
	Trigger  Trigger
}

// Describe implements Fault.
func (r RetentionReplay) Describe() result.Fault {
	return result.Fault{Kind: "replay", Target: r.Consumer, Detail: "one event replayed inside the inbox retention, then again after the inbox expired, " + r.Trigger.String()}
}

// Require implements Requirer: the consumer's event log (to see the
// replays land) and the payload and inbox_expire queries.
func (r RetentionReplay) Require(env *Env) error {
	in, err := env.Roles.Instance(r.Consumer)
	if err != nil {
		return err
	}
	if !in.EventLog {
		return fmt.Errorf("the target's %s writes no event log", in.Role)
	}
	if env.Contract.Payload == nil {
		return fmt.Errorf("the target's contract has no payload query")
	}
	if env.Contract.InboxExpire == nil {
		return fmt.Errorf("the target's contract has no inbox_expire query")
	}
	return nil
}

// Inject implements Fault.
func (r RetentionReplay) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	fail := func(hit bool, err error, ids ...string) result.Fault {
		res := record(r, start, hit, err)
		res.EventIDs = ids
		return res
	}
	if err := env.Wait(ctx, r.Trigger); err != nil {
		return fail(false, err)
	}
	// The first event the consumer applied.
	first, err := env.WaitLog(ctx, r.Consumer, func(e eventlog.Entry) bool { return e.Event == eventlog.Reserved })
	if err != nil {
		return fail(false, err)
	}
	id := first.EventID
	q, pool, err := env.Query(env.Contract.Payload, "payload")
	if err != nil {
		return fail(false, err, id)
	}
	var routingKey string
	var payload []byte
	// The payload query comes from the target file: read-only.
	err = check.ReadOnly(ctx, pool, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, q.SQL, id).Scan(&routingKey, &payload)
	})
	if err != nil {
		return fail(false, fmt.Errorf("contract payload of %s: %w", id, err), id)
	}
	start = time.Now()
	if err := r.publish(ctx, env, id, routingKey, payload); err != nil {
		return fail(false, err, id)
	}
	if _, err := env.WaitLog(ctx, r.Consumer, func(e eventlog.Entry) bool { return e.Event == eventlog.Duplicate && e.EventID == id }); err != nil {
		return fail(true, fmt.Errorf("replay inside the retention was not absorbed: %w", err), id)
	}
	env.Logf("replay of %s absorbed by the inbox", id)
	// inbox_expire deletes by design: the one contract statement that
	// keeps write rights.
	q, pool, err = env.Query(env.Contract.InboxExpire, "inbox_expire")
	if err != nil {
		return fail(true, err, id)
	}
	tag, err := pool.Exec(ctx, q.SQL)
	if err != nil {
		return fail(true, fmt.Errorf("contract inbox_expire: %w", err), id)
	}
	env.Logf("inbox expired: %d rows", tag.RowsAffected())
	if err := r.publish(ctx, env, id, routingKey, payload); err != nil {
		return fail(true, err, id)
	}
	reserved := 0
	if _, err := env.WaitLog(ctx, r.Consumer, func(e eventlog.Entry) bool {
		if e.Event == eventlog.Reserved && e.EventID == id {
			reserved++
		}
		return reserved >= 2
	}); err != nil {
		return fail(true, fmt.Errorf("replay after the inbox expired did not take effect: %w", err), id)
	}
	env.Logf("replay of %s after the retention took effect again", id)
	return fail(true, nil, id)
}

func (r RetentionReplay) publish(ctx context.Context, env *Env, id, routingKey string, payload []byte) error {
	conn, ch, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("confirm mode: %w", err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, env.Topology.Exchange, routingKey, true, false, amqp.Publishing{
		MessageId: id, Type: routingKey, ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: payload,
	})
	if err != nil {
		return fmt.Errorf("replay %s: %w", id, err)
	}
	if ok, err := dc.WaitContext(ctx); err != nil || !ok {
		return fmt.Errorf("replay %s not confirmed: %v", id, err)
	}
	return nil
}
