package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/result"
)

// BrokerRestart kills the RabbitMQ node (SIGKILL) and starts it again
// after Down.
type BrokerRestart struct {
	Down    time.Duration `json:"down"`
	Trigger Trigger       `json:"trigger"`
}

// KindBrokerRestart is the broker-restart fault's kind, as a schedule
// names it.
const KindBrokerRestart = "broker-restart"

func init() {
	register(Desc[BrokerRestart]{
		Name:    KindBrokerRestart,
		Example: BrokerRestart{Trigger: Trigger{AfterOrders: 30, Delay: time.Second}, Down: 500 * time.Millisecond},
		Doc:     "the RabbitMQ node killed (SIGKILL) and started again after a while; runs alone, the broker is shared",
		Touches: func(BrokerRestart) Touch { return Touch{Shared: []string{"broker"}} },
		Trigger: func(b BrokerRestart) Trigger { return b.Trigger },
		Shrink: func(_ BrokerRestart, sh *Shrink[BrokerRestart]) {
			sh.Trigger(func(b *BrokerRestart) *Trigger { return &b.Trigger })
			sh.Shorter("down", func(b *BrokerRestart) *time.Duration { return &b.Down })
		},
	})
}

// Describe implements Fault.
func (b BrokerRestart) Describe() result.Fault {
	return result.Fault{Kind: KindBrokerRestart, Target: "rabbitmq", Detail: fmt.Sprintf("killed, down %s, %s", b.Down, b.Trigger)}
}

// Needs implements Needs.
func (b BrokerRestart) Needs() []string { return []string{CapBrokerRestart} }

// Inject implements Fault. Once triggered it waits until the broker's Ra
// registry on disk names every quorum queue (infra.QueueRegistry): a
// queue whose server a node has not saved there comes back from the
// crash leaderless, which would be the harness's doing, not the
// pipeline's. A provider that cannot read it (external) crashes the
// broker at once, and the wait says so.
func (b BrokerRestart) Inject(ctx context.Context, env *Env) result.Fault {
	return withWaits(func(w *waits) result.Fault {
		start := time.Now()
		if !env.Infra.CanRestartBroker() {
			return record(b, start, false, fmt.Errorf("the %s provider cannot restart the broker", env.Infra.Name()))
		}
		if err := env.Wait(ctx, b.Trigger); err != nil {
			return record(b, start, false, err)
		}
		if err := queuesSaved(ctx, env, w); err != nil {
			return record(b, start, false, err)
		}
		start = time.Now()
		if err := env.Infra.StopBroker(ctx); err != nil {
			return record(b, start, false, err)
		}
		env.Logf("broker killed")
		holdErr := pause(ctx, b.Down)
		if err := env.Infra.StartBroker(context.WithoutCancel(ctx)); err != nil {
			return notUndone(record(b, start, true, holdErr), fmt.Errorf("start the broker again: %w", err))
		}
		env.Logf("broker back")
		return record(b, start, true, holdErr)
	})
}

// causeQueuesSaved is the wait before a crash of the broker.
const causeQueuesSaved = "every quorum queue named in the broker's Ra registry on disk"

// queuesSaved waits until env's broker has saved every quorum queue's
// server in its Ra registry on disk, at most env.Deadline, polling every
// registryPoll (Ra saves every 500 ms).
func queuesSaved(ctx context.Context, env *Env, w *waits) error {
	reg, ok := env.Infra.(infra.QueueRegistry)
	if !ok {
		w.add(causeQueuesSaved, time.Now(), 0, "", fmt.Errorf("the %s provider cannot read it: crashed without waiting", env.Infra.Name()))
		return nil
	}
	return w.wait(causeQueuesSaved, env.Deadline, func() (string, error) {
		var last infra.RegistryCheck
		err := poll.Until(ctx, env.Deadline, registryPoll, func() (bool, error) {
			c, err := reg.QueueServersSaved(ctx)
			if err != nil {
				return false, err
			}
			last = c
			return c.Saved(), nil
		})
		return last.String(), err
	})
}

// registryPoll is how often queuesSaved reads the registries.
const registryPoll = 50 * time.Millisecond
