package message_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/system/message"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		want    message.Event
		wantErr string // empty: valid; otherwise poison with this text
	}{
		{
			name: "full event",
			body: `{"eventId":"01J","eventType":"order.paid","occurredAt":"2026-01-01T00:00:00Z","orderId":"ORD-1","customerId":"c-1",` +
				`"amount":12.50,"currency":"EUR","items":[{"sku":"a","quantity":2}],"aggregateId":"AGG-1","sequence":2}`,
			want: message.Event{
				EventID: "01J", EventType: message.OrderPaid, OccurredAt: "2026-01-01T00:00:00Z", OrderID: "ORD-1", CustomerID: "c-1",
				Amount: "12.50", Currency: "EUR", Items: json.RawMessage(`[{"sku":"a","quantity":2}]`), AggregateID: "AGG-1", Sequence: 2,
			},
		},
		{
			name: "minimal event gets defaults",
			body: `{"eventId":"01J","eventType":"order.created","orderId":"ORD-1"}`,
			want: message.Event{EventID: "01J", EventType: message.OrderCreated, OrderID: "ORD-1", AggregateID: "ORD-1", Sequence: 1, Amount: "0"},
		},
		{
			name: "amount as a numeric string is read",
			body: `{"eventId":"01J","eventType":"order.created","orderId":"ORD-1","amount":"7.25"}`,
			want: message.Event{EventID: "01J", EventType: message.OrderCreated, OrderID: "ORD-1", AggregateID: "ORD-1", Sequence: 1, Amount: "7.25"},
		},
		{
			name: "unknown fields are ignored",
			body: `{"eventId":"01J","eventType":"order.created","orderId":"ORD-1","extra":true}`,
			want: message.Event{EventID: "01J", EventType: message.OrderCreated, OrderID: "ORD-1", AggregateID: "ORD-1", Sequence: 1, Amount: "0"},
		},
		{name: "not JSON", body: `hello`, wantErr: "not JSON"},
		{name: "empty body", body: ``, wantErr: "not JSON"},
		{name: "truncated JSON", body: `{"eventId":"01J"`, wantErr: "not JSON"},
		{name: "JSON array", body: `[{"eventId":"01J","eventType":"order.created","orderId":"ORD-1"}]`, wantErr: "not JSON"},
		{name: "JSON string", body: `"order.created"`, wantErr: "not JSON"},
		{name: "JSON null", body: `null`, wantErr: "no eventId"},
		{name: "wrong type for sequence", body: `{"eventId":"01J","eventType":"order.created","orderId":"ORD-1","sequence":"two"}`, wantErr: "not JSON"},
		{name: "amount not a number", body: `{"eventId":"01J","eventType":"order.created","orderId":"ORD-1","amount":"lots"}`, wantErr: "not JSON"},
		{name: "missing eventId", body: `{"eventType":"order.created","orderId":"ORD-1"}`, wantErr: "no eventId"},
		{name: "empty eventId", body: `{"eventId":"","eventType":"order.created","orderId":"ORD-1"}`, wantErr: "no eventId"},
		{name: "missing eventType", body: `{"eventId":"01J","orderId":"ORD-1"}`, wantErr: "event 01J has no eventType"},
		{name: "missing orderId", body: `{"eventId":"01J","eventType":"order.created"}`, wantErr: "event 01J has no orderId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := message.Parse([]byte(tc.body))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.True(t, errors.Is(err, message.ErrPoison), "%v wraps ErrPoison", err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Equal(t, message.Event{}, got, "no half-parsed event on error")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestEventRoundTrip: what the order service marshals, the consumer parses
// back unchanged, with the JSON field names of the contract.
func TestEventRoundTrip(t *testing.T) {
	ev := message.Event{
		EventID: "01J", EventType: message.OrderCancelled, OccurredAt: "2026-01-01T00:00:00Z", OrderID: "ORD-1",
		CustomerID: "c-1", Amount: "99.99", Currency: "USD", Items: json.RawMessage(`[]`), AggregateID: "ORD-1", Sequence: 3,
	}
	body, err := json.Marshal(ev)
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(body, &raw))
	for _, k := range []string{"eventId", "eventType", "occurredAt", "orderId", "customerId", "amount", "currency", "items", "aggregateId", "sequence"} {
		assert.Contains(t, raw, k)
	}
	assert.Equal(t, 99.99, raw["amount"], "amount is a JSON number")
	back, err := message.Parse(body)
	require.NoError(t, err)
	assert.Equal(t, ev, back)
}
