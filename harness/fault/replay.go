package fault

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/history"
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
	Consumer history.Ref `json:"consumer"` // the consumer instance reference
	Trigger  Trigger     `json:"trigger"`
}

// KindReplay is the retention replay fault's kind, as a schedule names it.
const KindReplay = "replay"

func init() {
	register(Desc[RetentionReplay]{
		Name:    KindReplay,
		Example: RetentionReplay{Consumer: "consumer", Trigger: Trigger{AfterOrders: 30}},
		Doc:     "one event replayed inside the inbox retention, then again after the consumer's inbox expired",
		Check: func(p RetentionReplay) error {
			return Need(KindReplay, p.Consumer != "", "consumer")
		},
		Touches: func(r RetentionReplay) Touch { return Touch{Instances: []history.Ref{r.Consumer}} },
		Trigger: func(r RetentionReplay) Trigger { return r.Trigger },
		Shrink: func(_ RetentionReplay, sh *Shrink[RetentionReplay]) {
			sh.Trigger(func(r *RetentionReplay) *Trigger { return &r.Trigger })
		},
	})
}

// Describe implements Fault.
func (r RetentionReplay) Describe() result.Fault {
	return result.Fault{Kind: KindReplay, Target: string(r.Consumer), Detail: "one event replayed inside the inbox retention, then again after the inbox expired, " + r.Trigger.String()}
}

// Require implements Requirer: the consumer's event log (to see the
// replays land) and the payload and inbox_expire queries.
func (r RetentionReplay) Require(env *Env) error {
	in, err := env.Roles.Instance(r.Consumer)
	if err != nil {
		return err
	}
	if !in.EventLog && env.Topology.Queue == "" {
		return fmt.Errorf("the target's %s writes no event log, and its topology names no queue to see the replays handled", in.Role)
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
	return withWaits(func(w *waits) result.Fault { return r.inject(ctx, env, w) })
}

// inject is Inject, recording what it waits for in w.
func (r RetentionReplay) inject(ctx context.Context, env *Env, w *waits) result.Fault {
	start := time.Now()
	fail := recorder(r, &start)
	if err := env.Wait(ctx, r.Trigger); err != nil {
		return fail(false, err)
	}
	if in, err := env.Roles.Instance(r.Consumer); err == nil && !in.EventLog {
		return r.injectBlind(ctx, env, w)
	}
	// The first event the consumer applied.
	var first eventlog.Entry
	err := w.wait(fmt.Sprintf("%s to apply an event (its event log)", r.Consumer), env.Deadline, func() (string, error) {
		var err error
		first, err = env.WaitLog(ctx, r.Consumer, func(e eventlog.Entry) bool { return e.Event == eventlog.Reserved })
		return first.EventID, err
	})
	if err != nil {
		return fail(false, err)
	}
	id := first.EventID
	msg, err := payloadOf(ctx, env, id)
	if err != nil {
		return fail(false, err, id)
	}
	start = time.Now()
	if err := publishCopy(ctx, env, id, msg); err != nil {
		return fail(false, err, id)
	}
	if err := w.wait(fmt.Sprintf("%s to absorb the replay of %s (its event log)", r.Consumer, id), env.Deadline, func() (string, error) {
		_, err := env.WaitLog(ctx, r.Consumer, func(e eventlog.Entry) bool { return e.Event == eventlog.Duplicate && e.EventID == id })
		return "", err
	}); err != nil {
		return fail(true, fmt.Errorf("replay inside the retention was not absorbed: %w", err), id)
	}
	env.Logf("replay of %s absorbed by the inbox", id)
	if err := r.expireAndReplay(ctx, env, id, msg); err != nil {
		return fail(true, err, id)
	}
	reserved := 0
	if err := w.wait(fmt.Sprintf("%s to apply the replay of %s again after the inbox expired (its event log)", r.Consumer, id), env.Deadline, func() (string, error) {
		_, err := env.WaitLog(ctx, r.Consumer, func(e eventlog.Entry) bool {
			if e.Event == eventlog.Reserved && e.EventID == id {
				reserved++
			}
			return reserved >= 2
		})
		return "", err
	}); err != nil {
		return fail(true, fmt.Errorf("replay after the inbox expired did not take effect: %w", err), id)
	}
	env.Logf("replay of %s after the retention took effect again", id)
	return fail(true, nil, id)
}

// publishCopy publishes msg again as event id (mandatory, confirmed) to
// the target's exchange.
func publishCopy(ctx context.Context, env *Env, id string, msg replayed) error {
	conn, ch, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("confirm mode: %w", err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, env.Topology.Exchange, msg.RoutingKey, true, false, amqp.Publishing{
		MessageId: id, Type: msg.RoutingKey, ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: msg.Body, Headers: msg.Headers,
	})
	if err != nil {
		return fmt.Errorf("replay %s: %w", id, err)
	}
	if ok, err := dc.WaitContext(ctx); err != nil || !ok {
		return fmt.Errorf("replay %s not confirmed: %v", id, err)
	}
	return nil
}
