package observe

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/target"
)

// queuedWait bounds the wait, once the processes have stopped, for the
// broker to drop their consumers from the target's queue.
const queuedWait = 10 * time.Second

func init() {
	addSource(source{name: history.SourceDLQ, when: AtEnd,
		offered: func(t *target.Target, _ map[string]bool) bool { return t.Topology.DeadLetterQueue != "" },
		record:  (*Watch).recordDeadLetters})
}

// recordDeadLetters reads the dead-letter queue's counters and, where it
// holds messages, which events they are, for placing a lost one (nothing
// consumes it, so nothing is held unacked).
func (w *Watch) recordDeadLetters(ctx context.Context, o *history.Record) error {
	queue := w.run.Target.Topology.DeadLetterQueue
	if queue == "" {
		return nil
	}
	dlq := &history.DeadLetterQueue{ByEvent: map[string]int{}}
	var err error
	if dlq.Queue, err = w.Queue(ctx, queue); err != nil {
		return err
	}
	if dlq.Queue.Messages > 0 {
		if dlq.ByEvent, err = w.readMessages(ctx, queue); err != nil {
			return err
		}
	}
	o.DeadLetter = dlq
	return nil
}

// readQueued reads the eventIds of the messages still in the target's
// queue, ready or unacked, without taking them. It runs once the processes
// have stopped: it waits until the queue has no consumer (the broker has
// then returned what they held unacked to ready), then reads them
// (readMessages).
func (w *Watch) readQueued(ctx context.Context) (map[string]int, error) {
	queue := w.run.Target.Topology.Queue
	wctx, cancel := context.WithTimeout(ctx, queuedWait)
	err := w.probe.waitNoConsumer(wctx, queue, ConsumerPoll)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("read the messages left in %s: %w", queue, err)
	}
	return w.readMessages(ctx, queue)
}

// readMessages counts, per eventId, the ready messages of a queue, without
// taking them: it gets every message without acknowledging it, and puts
// them all back with one nack.
func (w *Watch) readMessages(ctx context.Context, queue string) (map[string]int, error) {
	conn, ch, err := w.dialVHost()
	if err != nil {
		return nil, fmt.Errorf("read the messages left in %s: %w", queue, err)
	}
	defer conn.Close()
	defer ch.Close()
	out := map[string]int{}
	var last uint64
	for ctx.Err() == nil {
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			return nil, fmt.Errorf("read the messages left in %s: %w", queue, err)
		}
		if !ok {
			break
		}
		out[eventIDOf(w.run.Target.Topology.EventID, d)]++
		last = d.DeliveryTag
	}
	if last > 0 {
		if err := ch.Nack(last, true, true); err != nil {
			return nil, fmt.Errorf("put back the messages left in %s: %w", queue, err)
		}
	}
	return out, ctx.Err()
}

// dialVHost opens a connection and a channel to the run's vhost.
func (w *Watch) dialVHost() (*amqp.Connection, *amqp.Channel, error) {
	conn, err := amqp.DialConfig(w.run.Infra.AMQPURL(w.run.VHost), infra.OwnAMQPConfig(3*time.Second))
	if err != nil {
		return nil, nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, ch, nil
}
