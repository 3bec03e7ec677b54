package fault

import (
	"context"
	"fmt"
	"time"

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

// Inject implements Fault.
func (b BrokerRestart) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	if !env.Infra.CanRestartBroker() {
		return record(b, start, false, fmt.Errorf("the %s provider cannot restart the broker", env.Infra.Name()))
	}
	if err := env.Wait(ctx, b.Trigger); err != nil {
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
}
