package inventory

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"faultline/system/message"
)

func TestStorable(t *testing.T) {
	valid := message.Event{EventID: "e-1", EventType: "order.created", OrderID: "o-1", AggregateID: "o-1",
		Sequence: 1, Amount: "12.50", Currency: "EUR"}
	cases := []struct {
		name   string
		change func(*message.Event)
		want   string // empty: storable
	}{
		{"valid", func(*message.Event) {}, ""},
		{"amount at the limit", func(e *message.Event) { e.Amount = "9999999999999998.99" }, ""},
		{"amount with exponent", func(e *message.Event) { e.Amount = "1.5e3" }, ""},
		{"amount too large", func(e *message.Event) { e.Amount = "10000000000000000" }, "numeric(18,2)"},
		{"amount huge exponent", func(e *message.Event) { e.Amount = "1e400" }, "numeric(18,2)"},
		{"currency too long", func(e *message.Event) { e.Currency = "EURO" }, "currency"},
		{"eventId too long", func(e *message.Event) { e.EventID = strings.Repeat("x", 65) }, "eventId"},
		{"NUL in orderId", func(e *message.Event) { e.OrderID = "o\x00" }, "NUL"},
		{"negative sequence", func(e *message.Event) { e.Sequence = -1 }, "sequence"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := valid
			tc.change(&ev)
			err := storable(ev)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, message.ErrPoison))
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestBackoffIsCappedWithJitter(t *testing.T) {
	b := newBackoff(50e6, 400e6)
	for i := range 20 {
		d := b.next()
		assert.LessOrEqual(t, d, b.max, "attempt %d", i)
		assert.Positive(t, d)
	}
	b.reset()
	assert.LessOrEqual(t, b.next(), b.min)
}
