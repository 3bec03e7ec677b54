package observe

import (
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/target"
)

// eventIDOf is the eventId a message carries where the target file says
// (topology.event_id; target.MessageID.Of).
func eventIDOf(at target.MessageID, d amqp.Delivery) string {
	return at.Of(d.MessageId, d.Headers, d.Body)
}

// tracedEventID is the eventId of a firehose copy: the original's message
// id and headers are in the copy's "properties" header, its body is the
// original's.
func tracedEventID(at target.MessageID, d amqp.Delivery) string {
	props, _ := d.Headers["properties"].(amqp.Table)
	id, _ := props["message_id"].(string)
	headers, _ := props["headers"].(amqp.Table)
	return at.Of(id, headers, d.Body)
}
