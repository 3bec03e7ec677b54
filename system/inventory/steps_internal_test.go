package inventory

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/system/message"
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

// One multiple-ack may settle a batch only when its tags are an unbroken
// run on one channel: a hole could be a delivery that is not this batch's.
func TestContiguousTags(t *testing.T) {
	var chA, chB fakeAcknowledger = 1, 2
	items := func(ack amqp.Acknowledger, tags ...uint64) []*item {
		var out []*item
		for _, tag := range tags {
			out = append(out, &item{d: amqp.Delivery{Acknowledger: ack, DeliveryTag: tag}})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		items []*item
		last  uint64 // 0: not contiguous
	}{
		{"one item acks alone", items(&chA, 7), 0},
		{"a run", items(&chA, 4, 5, 6, 7), 7},
		{"a run out of order", items(&chA, 6, 4, 7, 5), 7},
		{"a hole", items(&chA, 4, 5, 7), 0},
		{"a repeated tag", items(&chA, 4, 5, 5), 0},
		{"two channels", append(items(&chA, 4), items(&chB, 5)...), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := contiguousTags(tc.items)
			assert.Equal(t, tc.last != 0, ok)
			if ok {
				assert.Equal(t, tc.last, d.DeliveryTag)
			}
		})
	}
}

type fakeAcknowledger int

func (*fakeAcknowledger) Ack(uint64, bool) error        { return nil }
func (*fakeAcknowledger) Nack(uint64, bool, bool) error { return nil }
func (*fakeAcknowledger) Reject(uint64, bool) error     { return nil }

// A combined --variant value gives the consumer the steps of its own
// variant, and the correct steps when it names only other processes'; two
// consumer variants at once are refused.
func TestStepsForCombinedVariants(t *testing.T) {
	tests := []struct {
		value   string
		want    steps
		wantErr string
	}{
		{value: "", want: correctSteps{}},
		{value: "ignore-return", want: correctSteps{}},
		{value: "ignore-return,ack-before-commit", want: ackBeforeCommit{}},
		{value: "no-inbox,no-fencing", want: noInbox{}},
		{value: "ack-before-commit,no-inbox", wantErr: "all break inventory"},
		{value: "ignore-return,nope", wantErr: `unknown variant "nope"`},
	}
	for _, tt := range tests {
		mk, err := stepsFor(tt.value)
		if tt.wantErr != "" {
			assert.ErrorContains(t, err, tt.wantErr, tt.value)
			continue
		}
		require.NoError(t, err, tt.value)
		assert.IsType(t, tt.want, mk(nil, nil), tt.value)
	}
}
