package fault

import (
	"context"
	"fmt"
	"time"

	"faultline/harness/result"
	"faultline/system/topology"
)

// Unbind removes the inventory queue's binding for RoutingKey, so publishes
// with that key are unroutable (returned to a mandatory publisher). With
// Duration > 0 the binding is restored after it; with 0 it stays removed.
type Unbind struct {
	RoutingKey string
	Trigger    Trigger
	Duration   time.Duration
}

// Describe implements Fault.
func (u Unbind) Describe() result.Fault {
	d := "never restored"
	if u.Duration > 0 {
		d = "restored after " + u.Duration.String()
	}
	return result.Fault{Kind: "unbind", Target: topology.Queue, Detail: fmt.Sprintf("binding %s removed, %s, %s", u.RoutingKey, d, u.Trigger)}
}

// Inject implements Fault.
func (u Unbind) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	if err := env.Wait(ctx, u.Trigger); err != nil {
		return record(u, start, false, err)
	}
	conn, ch, err := env.Admin(ctx)
	if err != nil {
		return record(u, start, false, err)
	}
	defer conn.Close()
	start = time.Now()
	if err := ch.QueueUnbind(topology.Queue, u.RoutingKey, topology.Exchange, nil); err != nil {
		return record(u, start, false, fmt.Errorf("unbind: %w", err))
	}
	env.Logf("binding %s removed", u.RoutingKey)
	if u.Duration <= 0 {
		return record(u, start, true, nil)
	}
	holdErr := pause(ctx, u.Duration)
	if err := ch.QueueBind(topology.Queue, u.RoutingKey, topology.Exchange, false, nil); err != nil {
		return record(u, start, true, fmt.Errorf("restore binding: %w", err))
	}
	env.Logf("binding %s restored", u.RoutingKey)
	return record(u, start, true, holdErr)
}
