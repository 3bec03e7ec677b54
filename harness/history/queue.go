package history

// QueueInfo are a queue's counters as the management API reports them.
type QueueInfo struct {
	Messages  int // ready + unacked
	Ready     int
	Unacked   int
	Consumers int
	// Redelivered is the broker's count of deliveries it redelivered
	// (message_stats.redeliver; lags by the statistics interval).
	Redelivered int
	// Delivered is the broker's count of deliveries to consumers and gets
	// (message_stats.deliver_get; lags likewise).
	Delivered int
	// Acked is the broker's count of acks from consumers
	// (message_stats.ack; lags likewise).
	Acked int
	// DeliveryLimit is the queue's x-delivery-limit (its argument, or a
	// policy's delivery-limit), 0 for none: a quorum queue drops, or
	// dead-letters, a message delivered that many times.
	DeliveryLimit int
	// DeadLetterExchange is the queue's x-dead-letter-exchange (its
	// argument, or a policy's dead-letter-exchange), "" for none.
	DeadLetterExchange string
	// Type is the queue's type: "classic", "quorum" or "stream".
	Type string
	// MaxLength is the queue's x-max-length (the lower of its argument
	// and a policy's max-length, as RabbitMQ applies them), 0 for none:
	// how many ready messages it holds.
	MaxLength int
	// Overflow is what the queue does with a publish past MaxLength: its
	// x-overflow (its argument, or a policy's overflow); "" is
	// RabbitMQ's default, drop-head.
	Overflow string
}

// Refusing reports whether the queue, as q shows it, refuses publishes:
// its overflow rejects them (reject-publish, reject-publish-dlx: the
// publisher is nacked, other queues bound to the exchange still take the
// message) and it holds as many ready messages as it takes. A classic
// queue refuses a publish once it holds MaxLength ready messages; a quorum
// queue takes publishes until its ready count is above MaxLength, and then
// tells every publisher to refuse what follows (so it may hold more than
// its limit).
func (q QueueInfo) Refusing() bool {
	if q.MaxLength <= 0 || (q.Overflow != "reject-publish" && q.Overflow != "reject-publish-dlx") {
		return false
	}
	if q.Type == "quorum" {
		return q.Ready > q.MaxLength
	}
	return q.Ready >= q.MaxLength
}
