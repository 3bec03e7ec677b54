package fault

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/poll"
	amqp "github.com/rabbitmq/amqp091-go"
)

// refusalPoll is how often the wait for a refusing queue reads the
// queue's counters: several reads per statistics interval.
const refusalPoll = 100 * time.Millisecond

// waitRefused waits, at most within, until the broker is seen refusing a
// publish to the target's queue while frozen (its consumer) is frozen; it
// records the waits in w and says what it saw. Two things, both from the
// broker, so the window opens the same way whether a relay waits for the
// broker's nack or not (one that does not, logs none, and loses what was
// nacked):
//
//  1. The queue refusing (history.QueueInfo.Refusing): its ready messages at
//     its length limit, whose overflow rejects publishes. A queue holds
//     ready messages only while no consumer has room for them (the broker
//     hands a message to a consumer with room as it takes it), and the
//     frozen consumer acks nothing, so until the thaw nothing leaves them:
//     the queue goes on refusing. The management API's counters lag, which
//     only delays the sighting.
//  2. A publish routed to it after that: faultline binds a queue of its
//     own to the target's exchange with the routing keys of the target's
//     queue once the queue is seen refusing, so a message in it was routed
//     after the sighting, into the refusing queue, and the broker nacked it
//     to its publisher. (A quorum queue refuses through its publishers'
//     channels, which it tells as it goes over its limit, before any
//     count shows it; a publish a channel had read before it was told and
//     routes only after the binding is still taken — a channel that far
//     behind is what this reading cannot tell apart.) The queue is
//     faultline's connection's alone
//     (exclusive): it goes with the connection, when the wait is over. It
//     routes only what the target's queue is bound to take, so it makes
//     nothing routable that the target's topology does not — while the
//     target's queue is bound (a fault that unbinds it unbinds the taps
//     first; it must not run beside this wait).
func waitRefused(ctx context.Context, env *Env, w *waits, frozen history.Ref, within time.Duration) (seen string, err error) {
	deadline := time.Now().Add(within)
	queue := env.Topology.Queue
	var sighted history.QueueInfo
	err = w.wait(fmt.Sprintf("the broker to refuse publishes to %s (its ready messages at its length limit) while %s is frozen", queue, frozen), within, func() (string, error) {
		if queue == "" || env.Topology.Exchange == "" || len(env.Topology.RoutingKeys) == 0 {
			return "", fmt.Errorf("window not opened: %w: the target names no queue, exchange and routing keys to watch", errUnseen)
		}
		wctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		var readErr, never error
		var seen string
		err := poll.Until(wctx, time.Until(deadline), refusalPoll, func() (bool, error) {
			q, err := env.Infra.Queue(wctx, env.VHost, queue)
			readErr = err
			if err != nil {
				return false, nil
			}
			sighted = q
			refusing, why := refusal(q)
			switch {
			case why != "":
				never = fmt.Errorf("window not opened: %w: %s %s", errUnseen, queue, why)
			case refusing:
				seen = fmt.Sprintf("%d ready of at most %d (%s, %s)", q.Ready, q.MaxLength, q.Type, q.Overflow)
			}
			return never != nil || seen != "", nil
		})
		switch {
		case never != nil:
			return "", never
		case err == nil:
			return seen, nil
		case ctx.Err() != nil:
			return "", ctx.Err()
		}
		why := fmt.Sprintf("%d ready of at most %d", sighted.Ready, sighted.MaxLength)
		if readErr != nil {
			why = readErr.Error()
		}
		return "", fmt.Errorf("window not opened: %w: %s did not refuse publishes within %s while %s was frozen (%s)",
			errUnseen, queue, within.Round(time.Millisecond), frozen, why)
	})
	if err != nil {
		return "", err
	}
	var key string
	err = w.wait(fmt.Sprintf("a publish routed to %s while it refuses them", queue), time.Until(deadline), func() (string, error) {
		started := time.Now()
		var err error
		if key, err = routedAfter(ctx, env, time.Until(deadline)); err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", fmt.Errorf("window not opened: %w: no publish was routed to %s while it refused them: %w", errUnseen, queue, err)
		}
		seen = fmt.Sprintf("the broker refused a publish (%s) to %s, %d ready of at most %d, %s after it was seen full",
			key, queue, sighted.Ready, sighted.MaxLength, time.Since(started).Round(time.Millisecond))
		return key, nil
	})
	return seen, err
}

// refusal says whether the queue refuses publishes now and, if it never
// can (no length limit, or an overflow that drops the oldest message
// rather than refuse the publish), why.
func refusal(q history.QueueInfo) (refusing bool, never string) {
	switch {
	case q.MaxLength <= 0:
		return false, "has no length limit (x-max-length): it never refuses a publish"
	case q.Overflow != "reject-publish" && q.Overflow != "reject-publish-dlx":
		overflow := q.Overflow
		if overflow == "" {
			overflow = "drop-head, the default"
		}
		return false, fmt.Sprintf("overflows by %s (x-overflow): it drops its oldest message rather than refuse a publish", overflow)
	}
	return q.Refusing(), ""
}

// routedAfter binds a queue of faultline's own to the target's exchange,
// with the routing keys of the target's queue, and waits, at most within,
// for a message in it: one routed after the binding. It says the
// message's eventId (its message id, else the one in its body).
func routedAfter(ctx context.Context, env *Env, within time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	conn, ch, err := env.Admin(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return "", fmt.Errorf("declare the probe queue: %w", err)
	}
	for _, key := range env.Topology.RoutingKeys {
		if err := ch.QueueBind(q.Name, key, env.Topology.Exchange, false, nil); err != nil {
			return "", fmt.Errorf("bind the probe queue to %s with %s: %w", env.Topology.Exchange, key, err)
		}
	}
	deliveries, err := ch.ConsumeWithContext(ctx, q.Name, "", true, true, false, false, nil)
	if err != nil {
		return "", fmt.Errorf("consume the probe queue: %w", err)
	}
	select {
	case d, ok := <-deliveries:
		if !ok {
			return "", errors.New("the probe queue's channel closed")
		}
		return probeID(env, d), nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Errorf("none in %s", within.Round(time.Millisecond))
		}
		return "", ctx.Err()
	}
}

// probeID names a probed message by the event's id it carries
// (topology.event_id), else "a message".
func probeID(env *Env, d amqp.Delivery) string {
	return cmp.Or(env.Topology.EventID.Of(d.MessageId, d.Headers, d.Body), "a message")
}

// waitDrained waits, at most within, until the target's queue has been
// seen refusing publishes and then seen with no message ready: the broker
// told its publishers to go on again (a quorum queue does so once it is
// back under its limit). Not seen within the bound is said, not an error:
// the toxic it ends is not itself the window.
func waitDrained(ctx context.Context, env *Env, w *waits, within time.Duration) (string, error) {
	queue := env.Topology.Queue
	refused := false
	var last history.QueueInfo
	err := w.wait(fmt.Sprintf("%s, seen refusing publishes, to be seen with none ready", queue), within, func() (string, error) {
		err := poll.Until(ctx, within, refusalPoll, func() (bool, error) {
			q, err := env.Infra.Queue(ctx, env.VHost, queue)
			if err != nil {
				return false, err
			}
			last = q
			refused = refused || q.Refusing()
			return refused && q.Ready == 0, nil
		})
		if err != nil {
			return "", fmt.Errorf("%s: seen refusing %t, last %d ready of at most %d", err, refused, last.Ready, last.MaxLength)
		}
		return fmt.Sprintf("seen refusing, then none ready of at most %d", last.MaxLength), nil
	})
	if err != nil && ctx.Err() == nil {
		return "not seen drained: " + err.Error(), nil
	}
	return "queue seen drained", err
}
