package inventory

import "github.com/faultline-dev/faultline/system/topology"

// limitWithoutDLX is the limit-without-dlx variant: the consumer declares
// its quorum queue with x-delivery-limit 2 and no dead-letter exchange, as
// a queue has on RabbitMQ 4 (a default limit of 20) when nobody set one.
// A quorum queue counts every return of a message — its consumer's channel
// closed, or the consumer killed, while it held it — as a delivery attempt;
// past the limit the message is dropped, with no dead-letter exchange to
// take it. A consumer that crashes in a loop on what it holds loses those
// events; the correct queue has no limit, and a dead-letter exchange.
func limitWithoutDLX(o *topology.QueueOptions) {
	o.DeliveryLimit = 2
	o.NoDeadLetter = true
}
