package observe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/target"
)

// eventIDOf is the eventId a message carries where the target file says
// (topology.event_id): by default its MessageId, else its JSON body's
// eventId; or the header, or the dotted path into its JSON body, the file
// names. "" where it carries none there.
func eventIDOf(at target.MessageID, d amqp.Delivery) string {
	return messageEventID(at, d.MessageId, d.Headers, d.Body)
}

// tracedEventID is the eventId of a firehose copy: the original's message
// id and headers are in the copy's "properties" header, its body is the
// original's.
func tracedEventID(at target.MessageID, d amqp.Delivery) string {
	props, _ := d.Headers["properties"].(amqp.Table)
	id, _ := props["message_id"].(string)
	headers, _ := props["headers"].(amqp.Table)
	return messageEventID(at, id, headers, d.Body)
}

// messageEventID is eventIDOf over a message's parts.
func messageEventID(at target.MessageID, messageID string, headers amqp.Table, body []byte) string {
	switch {
	case at.Header != "":
		return scalar(headers[at.Header])
	case at.Body != "":
		return bodyField(body, strings.Split(at.Body, "."))
	case messageID != "":
		return messageID
	}
	return bodyField(body, []string{"eventId"})
}

// bodyField is the value at path in a JSON object body, "" where the body
// is no JSON object or holds no scalar there.
func bodyField(body []byte, path []string) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // an id of many digits stays as written
	var v any
	if dec.Decode(&v) != nil {
		return ""
	}
	for _, key := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[key]
	}
	return scalar(v)
}

// scalar is a header's or a JSON field's value as an id: a string as it
// is, an integer or a byte string written out, a JSON number as written;
// "" for anything else.
func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case json.Number:
		return v.String()
	case int, int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return fmt.Sprint(v)
	}
	return ""
}
