// Package message is the event contract between the order service, the
// relay and the inventory consumer: the article's order.created payload,
// extended with the aggregate sequence for per-aggregate ordering.
package message

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Event types.
const (
	OrderCreated   = "order.created"
	OrderPaid      = "order.paid"
	OrderCancelled = "order.cancelled"
)

// Event is the JSON body of every message.
type Event struct {
	EventID     string          `json:"eventId"`
	EventType   string          `json:"eventType"`
	OccurredAt  string          `json:"occurredAt"`
	OrderID     string          `json:"orderId"`
	CustomerID  string          `json:"customerId"`
	Amount      json.Number     `json:"amount"`
	Currency    string          `json:"currency"`
	Items       json.RawMessage `json:"items,omitempty"`
	AggregateID string          `json:"aggregateId"`
	Sequence    int64           `json:"sequence"`
}

// ErrPoison marks a message that can never be processed.
var ErrPoison = errors.New("poison message")

// Parse decodes a message body. A body that is not JSON, or lacks an
// eventId, an eventType or an orderId, is poison: it wraps ErrPoison.
func Parse(body []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(body, &e); err != nil {
		return Event{}, fmt.Errorf("%w: not JSON: %v", ErrPoison, err)
	}
	switch {
	case e.EventID == "":
		return Event{}, fmt.Errorf("%w: no eventId", ErrPoison)
	case e.EventType == "":
		return Event{}, fmt.Errorf("%w: event %s has no eventType", ErrPoison, e.EventID)
	case e.OrderID == "":
		return Event{}, fmt.Errorf("%w: event %s has no orderId", ErrPoison, e.EventID)
	}
	if e.AggregateID == "" {
		e.AggregateID = e.OrderID
	}
	if e.Sequence == 0 {
		e.Sequence = 1
	}
	if e.Amount == "" {
		e.Amount = "0"
	}
	return e, nil
}
