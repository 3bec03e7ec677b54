package observe

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
)

// ConsumerPoll is how often a wait on a queue's consumers asks, with a
// passive declare, whether it has them yet.
const ConsumerPoll = 20 * time.Millisecond

// queueProbe asks the broker about a queue of the run's vhost. Depths and
// consumer counts come from a passive declare over AMQP, which the queue
// itself answers at once; the management API's counters lag by a stats
// interval (and by longer for a queue declared a moment ago), so only the
// unacked count, which AMQP does not give, is read there.
type queueProbe struct {
	infra infra.Infra
	vhost string

	mu   sync.Mutex
	conn *amqp.Connection
}

func (p *queueProbe) queue(ctx context.Context, queue string) (history.QueueInfo, error) {
	q, m, err := p.read(ctx, queue)
	if err != nil {
		return history.QueueInfo{}, err
	}
	return history.QueueInfo{Ready: q.Messages, Unacked: m.Unacked, Messages: q.Messages + m.Unacked, Consumers: q.Consumers, Redelivered: m.Redelivered,
		DeliveryLimit: m.DeliveryLimit, DeadLetterExchange: m.DeadLetterExchange}, nil
}

// read asks about queue both ways: a passive declare (q) and the
// management API (m).
func (p *queueProbe) read(ctx context.Context, queue string) (q amqp.Queue, m history.QueueInfo, err error) {
	if q, err = p.declare(queue); err != nil {
		return q, m, err
	}
	m, err = p.infra.Queue(ctx, p.vhost, queue)
	return q, m, err
}

// declare passively declares queue: its exact ready count and consumer
// count, or an error if it does not exist (yet). A failed passive declare
// closes its channel, so every call opens a channel of its own on the one
// connection.
func (p *queueProbe) declare(queue string) (amqp.Queue, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil || p.conn.IsClosed() {
		conn, err := amqp.DialConfig(p.infra.AMQPURL(p.vhost), infra.OwnAMQPConfig(3*time.Second))
		if err != nil {
			return amqp.Queue{}, fmt.Errorf("probe %s: %w", queue, err)
		}
		p.conn = conn
	}
	ch, err := p.conn.Channel()
	if err != nil {
		return amqp.Queue{}, fmt.Errorf("probe %s: %w", queue, err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return amqp.Queue{}, fmt.Errorf("probe %s: %w", queue, err)
	}
	return q, nil
}

// WaitConsumer polls, every interval, until queue exists and has a
// consumer, or ctx ends.
func (w *Watch) WaitConsumer(ctx context.Context, queue string, interval time.Duration) error {
	return w.probe.wait(ctx, queue, interval, "a consumer", func(q amqp.Queue) bool { return q.Consumers > 0 })
}

// waitNoConsumer polls, every interval, until queue exists and has no
// consumer, or ctx ends: the broker has then taken back what its consumers
// held unacked.
func (p *queueProbe) waitNoConsumer(ctx context.Context, queue string, interval time.Duration) error {
	return p.wait(ctx, queue, interval, "no consumer", func(q amqp.Queue) bool { return q.Consumers == 0 })
}

// wait polls, every interval, until queue exists and is as wanted (what
// says how), or ctx ends.
func (p *queueProbe) wait(ctx context.Context, queue string, interval time.Duration, what string, want func(amqp.Queue) bool) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		q, err := p.declare(queue)
		if err == nil && want(q) {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("queue %s has %d consumers", queue, q.Consumers)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s on %s: %w (last: %v)", what, queue, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func (p *queueProbe) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		_ = p.conn.CloseDeadline(time.Now().Add(time.Second))
	}
}

// Waiting is how many messages wait for queue's consumers: ready, or
// delivered to a consumer and not yet acked (a frozen consumer holds its
// prefetch so). Both counts are lower bounds of the queue's total while
// nothing is acked: the passive declare's ready count, exact at once, and
// the management API's messages (ready and unacked), exact as of its
// last statistics sample; Waiting is the larger. A frozen consumer's
// prefetch is counted once the sample shows it, whether or not the broker
// has since dropped the consumer and made it ready again.
func (w *Watch) Waiting(ctx context.Context, queue string) (int, error) {
	q, m, err := w.probe.read(ctx, queue)
	if err != nil {
		return 0, err
	}
	return max(q.Messages, m.Messages), nil
}
