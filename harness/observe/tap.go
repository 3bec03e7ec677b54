package observe

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/target"
)

// TapQueue is the queue faultline binds to the target's exchange with the
// target's routing keys, in the run's own vhost, to count what was routed
// per eventId without the target's help.
const TapQueue = "faultline.tap"

// tapAttempts bounds retryInternalError: a broker that answered
// INTERNAL_ERROR to faultline's own declare three times over several
// seconds is not having a moment.
const tapAttempts = 3

// retryInternalError calls do until it returns anything but the broker's
// INTERNAL_ERROR (541), at most tapAttempts times, waiting step, then
// twice step, between calls; it returns the last call's error. A busy
// broker can give that answer to a declare it would take a moment later,
// and a run without its tap cannot count routed publishes; the declare
// and the binds are idempotent.
func retryInternalError(ctx context.Context, do func() error, step time.Duration) error {
	for attempt := 1; ; attempt++ {
		err := do()
		var ae *amqp.Error
		if err == nil || attempt == tapAttempts || !errors.As(err, &ae) || ae.Code != amqp.InternalError {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * step):
		}
	}
}

func init() {
	addSource(source{name: history.SourceTap, when: Live,
		offered: func(t *target.Target, _ map[string]bool) bool { return t.Topology.Exchange != "" },
		record:  (*Watch).recordTap})
}

// recordTap counts the tap's routings per eventId, where it was bound.
func (w *Watch) recordTap(ctx context.Context, o *history.Record) error {
	if !w.Tapped() {
		return nil
	}
	tap, err := w.readTap(ctx)
	if err != nil {
		return err
	}
	if tap == nil {
		tap = map[string]int{}
	}
	o.Tap = tap
	return nil
}

// bindTap declares the tap queue and binds it to the exchange with every
// routing key of the target's topology.
func (w *Watch) bindTap() error {
	tp := w.run.Target.Topology
	// A loaded broker can take seconds to open a connection: the bound is
	// not a test of its speed.
	conn, err := amqp.DialConfig(w.run.Infra.AMQPURL(w.run.VHost), infra.OwnAMQPConfig(10*time.Second))
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return err
	}
	// On a clustered broker the tap is a quorum queue: a classic one lives
	// on one node, and while that node is down every publish routed to it
	// is nacked — faultline's own queue would then be the fault.
	var args amqp.Table
	if _, ok := w.run.Infra.(infra.Cluster); ok {
		args = amqp.Table{"x-queue-type": "quorum"}
	}
	if _, err := ch.QueueDeclare(TapQueue, true, false, false, false, args); err != nil {
		conn.Close()
		return fmt.Errorf("declare %s: %w", TapQueue, err)
	}
	for _, key := range tp.RoutingKeys {
		if err := ch.QueueBind(TapQueue, key, tp.Exchange, false, nil); err != nil {
			conn.Close()
			return fmt.Errorf("bind %s to %s with %s: %w", TapQueue, tp.Exchange, key, err)
		}
	}
	// The queue and its bindings outlive the connection, and are in place
	// once the broker answered the last bind: a close a loaded broker is
	// slow to answer does not undo them.
	_ = conn.CloseDeadline(time.Now().Add(time.Second))
	return nil
}

// readTap drains the tap queue: how many times each eventId was routed.
func (w *Watch) readTap(ctx context.Context) (map[string]int, error) {
	conn, ch, err := w.dialVHost()
	if err != nil {
		return nil, fmt.Errorf("tap: %w", err)
	}
	defer conn.Close()
	defer ch.Close()
	out := map[string]int{}
	for ctx.Err() == nil {
		d, ok, err := ch.Get(TapQueue, true)
		if err != nil {
			return nil, fmt.Errorf("tap: %w", err)
		}
		if !ok {
			return out, nil
		}
		out[eventIDOf(w.run.Target.Topology.EventID, d)]++
	}
	return out, ctx.Err()
}
