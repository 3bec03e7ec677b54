// Package topology declares the RabbitMQ exchanges, queues and bindings of
// the pipeline. Every declaration is idempotent, so each process declares
// what it needs at start and after every reconnect.
package topology

import (
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Names of the pipeline's broker objects.
const (
	Exchange           = "orders.events"
	Queue              = "inventory.order-events"
	DeadLetterExchange = "orders.events.dlx"
	DeadLetterQueue    = "inventory.order-events.dead"
)

// RoutingKeys are the event types the inventory queue is bound with.
var RoutingKeys = []string{"order.created", "order.paid", "order.cancelled"}

// DeclareExchange declares the durable events exchange (what a publisher needs).
func DeclareExchange(ch *amqp.Channel) error {
	if err := ch.ExchangeDeclare(Exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", Exchange, err)
	}
	return nil
}

// QueueOptions are the optional arguments of the inventory queue.
type QueueOptions struct {
	// MaxLength > 0 adds x-max-length with x-overflow reject-publish, so a
	// full queue nacks publishes (the broker-nack scenario).
	MaxLength int
	// Classic declares the queue as a classic durable queue, which lives
	// on one node, instead of a quorum queue replicated across the
	// cluster: the classic-queue variant only. Every process that
	// declares the queue must agree on its type (a redeclaration with
	// another x-queue-type fails with PRECONDITION_FAILED); only the
	// inventory consumer declares it.
	Classic bool
	// Transient declares the queue as a classic queue that is not durable,
	// which a broker restart deletes with every message in it: the
	// transient-queue variant only.
	Transient bool
	// DeliveryLimit > 0 adds x-delivery-limit, and NoDeadLetter leaves out
	// x-dead-letter-exchange: together, a message returned more times than
	// the limit is dropped (the limit-without-dlx variant only).
	DeliveryLimit int
	NoDeadLetter  bool
}

// DeclareConsumer declares everything the inventory consumer needs: the
// exchange, the quorum queue with its dead-letter exchange, the bindings,
// and the dead-letter exchange and queue.
func DeclareConsumer(ch *amqp.Channel, opts QueueOptions) error {
	if err := DeclareExchange(ch); err != nil {
		return err
	}
	if err := ch.ExchangeDeclare(DeadLetterExchange, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", DeadLetterExchange, err)
	}
	if _, err := ch.QueueDeclare(DeadLetterQueue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		return fmt.Errorf("declare queue %s: %w", DeadLetterQueue, err)
	}
	if err := ch.QueueBind(DeadLetterQueue, "", DeadLetterExchange, false, nil); err != nil {
		return fmt.Errorf("bind %s: %w", DeadLetterQueue, err)
	}
	args := amqp.Table{
		"x-queue-type":           "quorum",
		"x-dead-letter-exchange": DeadLetterExchange,
	}
	if opts.Classic {
		args["x-queue-type"] = "classic"
	}
	if opts.DeliveryLimit > 0 {
		args["x-delivery-limit"] = int64(opts.DeliveryLimit)
	}
	if opts.NoDeadLetter {
		delete(args, "x-dead-letter-exchange")
	}
	if opts.MaxLength > 0 {
		args["x-max-length"] = int64(opts.MaxLength)
		args["x-overflow"] = "reject-publish"
	}
	durable := true
	if opts.Transient {
		// A quorum queue is always durable.
		args["x-queue-type"], durable = "classic", false
	}
	if _, err := ch.QueueDeclare(Queue, durable, false, false, false, args); err != nil {
		return fmt.Errorf("declare queue %s: %w", Queue, err)
	}
	for _, key := range RoutingKeys {
		if err := ch.QueueBind(Queue, key, Exchange, false, nil); err != nil {
			return fmt.Errorf("bind %s to %s with %s: %w", Queue, Exchange, key, err)
		}
	}
	return nil
}
