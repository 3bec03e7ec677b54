package target

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// MessageID is where a message carries its event's id: in the header
// Header, or at the dotted path Body of its JSON body; the zero value is
// the article's, its AMQP message id, else its JSON body's eventId. A
// library that gives each message an id of its own (an envelope id) names
// where the event's id is.
type MessageID struct {
	Header, Body string
}

// String is m as the target file writes it.
func (m MessageID) String() string {
	switch {
	case m.Header != "":
		return "header:" + m.Header
	case m.Body != "":
		return "body:" + m.Body
	}
	return "message_id"
}

// Of is the event's id in a message with these parts, read where m says:
// by default its message id, else its JSON body's eventId; "" where the
// message carries none there. Headers are an AMQP message's (amqp.Table).
func (m MessageID) Of(messageID string, headers map[string]any, body []byte) string {
	switch {
	case m.Header != "":
		return idScalar(headers[m.Header])
	case m.Body != "":
		return bodyField(body, strings.Split(m.Body, "."))
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
	return idScalar(v)
}

// idScalar is a header's or a JSON field's value as an id: a string as it
// is, an integer or a byte string written out, a JSON number as written;
// "" for anything else.
func idScalar(v any) string {
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
