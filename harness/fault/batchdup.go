package fault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
)

// BatchDuplicate puts two copies of one new event in one consumer batch:
// the consumer is frozen at consumer.after-receive holding a batch, the
// producer's next outbox write is seen to commit, faultline publishes that
// event twice (same eventId, the contract's payload query), and the
// consumer stays frozen until the broker has handed it every message of
// its queue, both copies among them (no ready message: the passive
// declare's count, not the management API's sampled one). Thawed, it
// finishes the batch it holds and takes what it was handed as its next:
// a consumer whose in-batch de-duplication is gone applies the event
// twice. The eventId is in the result. Where the queue still had ready
// messages when the wait ended (the consumer's prefetch full), the window
// did not open.
type BatchDuplicate struct {
	Consumer history.Ref `json:"consumer"` // the consumer instance reference
	Hit      int64       `json:"hit"`      // freeze on this hit of consumer.after-receive, counted from the trigger
	Trigger  Trigger     `json:"trigger"`
}

// KindBatchDuplicate is the fault's kind, as a schedule names it.
const KindBatchDuplicate = "batch-duplicate"

func init() {
	register(Desc[BatchDuplicate]{
		Name:    KindBatchDuplicate,
		Example: BatchDuplicate{Consumer: "consumer", Hit: 2, Trigger: Trigger{AfterOrders: 20}},
		Doc:     "two copies of a new event handed to the consumer while it holds a batch, so its next batch holds both",
		Opens:   "two deliveries of one eventId in one consumer batch",
		Check: func(p BatchDuplicate) error {
			if err := Need(KindBatchDuplicate, p.Consumer != "", "consumer"); err != nil {
				return err
			}
			if p.Hit < 0 {
				return fmt.Errorf("%s fault: hit %d: want 1 or more", KindBatchDuplicate, p.Hit)
			}
			return nil
		},
		Touches: func(b BatchDuplicate) Touch { return Touch{Instances: []history.Ref{b.Consumer}} },
		Trigger: func(b BatchDuplicate) Trigger { return b.Trigger },
		Shrink: func(_ BatchDuplicate, sh *Shrink[BatchDuplicate]) {
			sh.Trigger(func(b *BatchDuplicate) *Trigger { return &b.Trigger })
		},
	})
}

// Observes implements Observer: the event copied is the producer's next
// outbox write, seen as it commits.
func (BatchDuplicate) Observes() []history.Source { return []history.Source{history.SourceCommits} }

// Describe implements Fault.
func (b BatchDuplicate) Describe() result.Fault {
	return result.Fault{Kind: KindBatchDuplicate, Target: string(b.Consumer),
		Detail: fmt.Sprintf("frozen at %s (hit %d), two copies of the producer's next event handed to it, then thawed, %s", protocol.ConsumerAfterReceive, max(b.Hit, 1), b.Trigger)}
}

// Require implements Requirer: the consumer's point, a producer, the
// payload query and a queue to read.
func (b BatchDuplicate) Require(env *Env) error {
	if _, err := env.Point(b.Consumer, protocol.ConsumerAfterReceive); err != nil {
		return err
	}
	if _, err := env.Roles.Instance("producer"); err != nil {
		return err
	}
	if env.Contract.Payload == nil {
		return errors.New("the target's contract has no payload query")
	}
	if env.Topology.Queue == "" || env.Topology.Exchange == "" {
		return errors.New("the target's topology names no queue and exchange")
	}
	return nil
}

// Inject implements Fault.
func (b BatchDuplicate) Inject(ctx context.Context, env *Env) result.Fault {
	return withWaits(func(w *waits) result.Fault { return b.inject(ctx, env, w) })
}

// inject is Inject, recording what it waits for in w.
func (b BatchDuplicate) inject(ctx context.Context, env *Env, w *waits) result.Fault {
	start := time.Now()
	fail := recorder(b, &start)
	p, err := env.Process(b.Consumer)
	if err != nil {
		return fail(false, err)
	}
	own, err := env.Point(b.Consumer, protocol.ConsumerAfterReceive)
	if err != nil {
		return fail(false, err)
	}
	producer, err := env.Roles.Instance("producer")
	if err != nil {
		return fail(false, err)
	}
	if err := env.Wait(ctx, b.Trigger); err != nil {
		return fail(false, err)
	}
	start = time.Now()
	if err := p.Arm(ctx, own, crashpoint.Arming{Action: crashpoint.Pause, Hit: max(b.Hit, 1)}.String()); err != nil {
		return fail(false, err)
	}
	if _, err := reachPoint(ctx, env, w, b.Consumer, protocol.ConsumerAfterReceive, own, time.Time{}); err != nil {
		return fail(false, fmt.Errorf("crash point %s never fired: %w", protocol.ConsumerAfterReceive, err))
	}
	if err := waitStopped(ctx, env, b.Consumer, w); err != nil {
		return fail(false, err)
	}
	id, handed, err := b.handTwice(ctx, env, w, producer.Name)
	if rerr := p.Resume(); rerr != nil {
		return notUndone(fail(handed, err, id), fmt.Errorf("resume %s: %w", b.Consumer, rerr))
	}
	if err != nil {
		return fail(handed, err, id)
	}
	env.Logf("two copies of %s handed to %s while it held a batch; thawed", id, b.Consumer)
	return fail(true, nil, id)
}

// handTwice, with the consumer frozen, waits for the producer's next
// outbox write to commit, publishes that event twice and waits until the
// broker has handed every message of the queue to the consumer. handed
// says the window opened.
func (b BatchDuplicate) handTwice(ctx context.Context, env *Env, w *waits, writer string) (id string, handed bool, err error) {
	err = w.wait(fmt.Sprintf("a commit of %s's outbox write while %s is frozen", writer, b.Consumer), env.Deadline, func() (string, error) {
		wctx, cancel := context.WithTimeout(ctx, env.Deadline)
		defer cancel()
		c, err := env.Commits.Wait(wctx, func(c history.Commit) bool {
			return c.Table == history.TableOutbox && c.Writer == writer && c.Op == "INSERT" && c.EventID != ""
		})
		id = c.EventID
		return id, err
	})
	if err != nil {
		return "", false, err
	}
	msg, err := payloadOf(ctx, env, id)
	if err != nil {
		return id, false, err
	}
	for range 2 {
		if err := publishCopy(ctx, env, id, msg); err != nil {
			return id, false, err
		}
	}
	conn, ch, err := env.Admin(ctx)
	if err != nil {
		return id, false, err
	}
	defer conn.Close()
	queue := env.Topology.Queue
	err = w.wait(fmt.Sprintf("the broker to hand every message of %s (both copies among them) to the frozen %s", queue, b.Consumer), env.Deadline, func() (string, error) {
		ready, err := waitReady(ctx, ch, queue, env.Deadline, func(ready int) bool { return ready == 0 })
		if err != nil {
			return "", fmt.Errorf("window not opened: %w: %d messages still ready on %s (the consumer's prefetch full?): %w", errUnseen, ready, queue, err)
		}
		return fmt.Sprintf("0 ready on %s", queue), nil
	})
	return id, err == nil, err
}
