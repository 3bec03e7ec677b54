package observe

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/harness/target"
)

// A message's eventId is read where the target file says: by default its
// MessageId, else its body's eventId; or one header; or a path into its
// JSON body. An envelope id in MessageId is then not taken for it.
func TestEventIDOf(t *testing.T) {
	body := []byte(`{"eventId":"B1","data":{"id":"D1","seq":12345678901234567890},"n":7}`)
	msg := amqp.Delivery{MessageId: "envelope-9", Headers: amqp.Table{"x-event-id": "H1", "x-num": int64(42), "x-bytes": []byte("HB")}, Body: body}
	for _, tc := range []struct {
		name string
		at   target.MessageID
		d    amqp.Delivery
		want string
	}{
		{"default: the message id", target.MessageID{}, msg, "envelope-9"},
		{"default without a message id: the body's eventId", target.MessageID{}, amqp.Delivery{Body: body}, "B1"},
		{"default, neither", target.MessageID{}, amqp.Delivery{Body: []byte(`not json`)}, ""},
		{"a header", target.MessageID{Header: "x-event-id"}, msg, "H1"},
		{"a number header", target.MessageID{Header: "x-num"}, msg, "42"},
		{"a byte-string header", target.MessageID{Header: "x-bytes"}, msg, "HB"},
		{"a header it lacks", target.MessageID{Header: "x-other"}, msg, ""},
		{"a body path", target.MessageID{Body: "data.id"}, msg, "D1"},
		{"a long number kept as written", target.MessageID{Body: "data.seq"}, msg, "12345678901234567890"},
		{"a path through a scalar", target.MessageID{Body: "n.id"}, msg, ""},
		{"a path to an object", target.MessageID{Body: "data"}, msg, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, eventIDOf(tc.at, tc.d))
		})
	}
}

// A firehose copy carries the original's message id and headers in its
// "properties" header, and the original's body.
func TestTracedEventID(t *testing.T) {
	copyOf := amqp.Delivery{Headers: amqp.Table{"properties": amqp.Table{"message_id": "envelope-9", "headers": amqp.Table{"x-event-id": "H1"}}},
		Body: []byte(`{"eventId":"B1"}`)}
	assert.Equal(t, "envelope-9", tracedEventID(target.MessageID{}, copyOf))
	assert.Equal(t, "H1", tracedEventID(target.MessageID{Header: "x-event-id"}, copyOf))
	assert.Equal(t, "B1", tracedEventID(target.MessageID{Body: "eventId"}, copyOf))
	assert.Equal(t, "B1", tracedEventID(target.MessageID{}, amqp.Delivery{Body: copyOf.Body}), "no properties: the body's eventId")
}
