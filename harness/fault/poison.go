package fault

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/result"
)

// poisonBody is the i-th malformed message Poison publishes.
func poisonBody(i int) string {
	bodies := [...]string{
		`{not json`,
		`{"eventType":"order.created","orderId":"ORD-X"}`,
		`["an", "array"]`,
		``,
		`{"eventId":"","eventType":"order.created"}`,
	}
	return bodies[i%len(bodies)]
}

// Poison publishes Count malformed messages into the events exchange.
// With Ahead, it publishes them once the target's queue holds that many
// ready messages (a passive declare), so valid deliveries are queued ahead
// of the poison; a queue that never holds them leaves the window unopened.
type Poison struct {
	Count   int     `json:"count"`
	Ahead   int     `json:"ahead"`
	Trigger Trigger `json:"trigger"`
}

// KindPoison is the poison fault's kind, as a schedule names it.
const KindPoison = "poison"

func init() {
	register(Desc[Poison]{
		Name:    KindPoison,
		Example: Poison{Count: 5, Trigger: Trigger{AfterOrders: 20}},
		Doc:     "malformed messages published into the events exchange",
		Check: func(p Poison) error {
			return Need(KindPoison, p.Count > 0, "a count of 1 or more")
		},
		Touches: func(Poison) Touch { return Touch{Shared: []string{"queue"}} },
		Trigger: func(p Poison) Trigger { return p.Trigger },
		Shrink: func(_ Poison, sh *Shrink[Poison]) {
			sh.Trigger(func(p *Poison) *Trigger { return &p.Trigger })
			sh.Fewer("count", func(p *Poison) *int { return &p.Count }, 1)
		},
	})
}

// Describe implements Fault.
func (p Poison) Describe() result.Fault {
	ahead := ""
	if p.Ahead > 0 {
		ahead = fmt.Sprintf(" behind %d ready messages", p.Ahead)
	}
	return result.Fault{Kind: KindPoison, Target: "queue", Detail: fmt.Sprintf("%d malformed messages%s, %s", p.Count, ahead, p.Trigger)}
}

// Inject implements Fault.
func (p Poison) Inject(ctx context.Context, env *Env) result.Fault {
	return withWaits(func(w *waits) result.Fault { return p.inject(ctx, env, w) })
}

// inject is Inject, recording what it waits for in w.
func (p Poison) inject(ctx context.Context, env *Env, w *waits) result.Fault {
	start := time.Now()
	if err := env.Wait(ctx, p.Trigger); err != nil {
		return record(p, start, false, err)
	}
	conn, ch, err := env.Admin(ctx)
	if err != nil {
		return record(p, start, false, err)
	}
	defer conn.Close()
	if p.Ahead > 0 {
		queue := env.Topology.Queue
		if err := w.wait(fmt.Sprintf("%d messages ready in %s ahead of the poison (a passive declare)", p.Ahead, queue), env.Deadline, func() (string, error) {
			ready, err := waitReady(ctx, ch, queue, env.Deadline, func(ready int) bool { return ready >= p.Ahead })
			if err != nil {
				return "", fmt.Errorf("window not opened: %w: %s never held %d ready messages (last seen %d): %w", errUnseen, queue, p.Ahead, ready, err)
			}
			return fmt.Sprintf("%d ready", ready), nil
		}); err != nil {
			return record(p, start, false, err)
		}
	}
	if err := ch.Confirm(false); err != nil {
		return record(p, start, false, fmt.Errorf("confirm mode: %w", err))
	}
	start = time.Now()
	confirmed := 0
	published := func(r result.Fault) result.Fault {
		r.Poisoned = confirmed
		return r
	}
	for i := 0; i < p.Count; i++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, env.Topology.Exchange, env.Topology.RoutingKeys[0], true, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent,
			MessageId: fmt.Sprintf("poison-%d", i), Body: []byte(poisonBody(i)),
		})
		if err != nil {
			return published(record(p, start, i > 0, fmt.Errorf("publish poison %d: %w", i, err)))
		}
		if ok, err := dc.WaitContext(ctx); err != nil || !ok {
			return published(record(p, start, i > 0, fmt.Errorf("poison %d not confirmed: %v", i, err)))
		}
		confirmed++
	}
	env.Logf("%d poison messages published", p.Count)
	return published(record(p, start, true, nil))
}
