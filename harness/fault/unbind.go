package fault

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/faultline-dev/faultline/harness/result"
)

// Unbind removes the consumer queue's binding for RoutingKey (empty: for
// every routing key of the target's topology), so publishes with that key
// are unroutable (returned to a mandatory publisher). With Duration > 0 the
// binding is restored after it; with 0 it stays removed.
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
	key := u.RoutingKey
	if key == "" {
		key = "every routing key"
	}
	return result.Fault{Kind: "unbind", Target: "queue", Detail: fmt.Sprintf("binding %s removed, %s, %s", key, d, u.Trigger)}
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
	keys := env.Topology.RoutingKeys
	if u.RoutingKey != "" {
		keys = []string{u.RoutingKey}
	}
	// The tap goes first and comes back last: a message routable to the
	// tap alone would be confirmed, not returned, and lost to the
	// consumer's queue — the harness must never make routable what the
	// target's topology does not.
	queues := []string{env.Topology.Queue}
	if env.Tap != "" {
		queues = []string{env.Tap, env.Topology.Queue}
	}
	for _, q := range queues {
		for _, key := range keys {
			if err := ch.QueueUnbind(q, key, env.Topology.Exchange, nil); err != nil {
				return record(u, start, false, fmt.Errorf("unbind %s from %s: %w", key, q, err))
			}
		}
	}
	env.Logf("bindings %v removed", keys)
	if u.Duration <= 0 {
		return record(u, start, true, nil)
	}
	holdErr := pause(ctx, u.Duration)
	for _, q := range slices.Backward(queues) {
		for _, key := range keys {
			if err := ch.QueueBind(q, key, env.Topology.Exchange, false, nil); err != nil {
				return notUndone(record(u, start, true, holdErr), fmt.Errorf("restore binding %s to %s: %w", key, q, err))
			}
		}
	}
	env.Logf("bindings %v restored", keys)
	return record(u, start, true, holdErr)
}
