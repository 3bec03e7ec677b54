package fault

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
)

// TestOpenFromOutside: a fault at a crash point the target maps stays as
// it is; at one it does not map, it is swapped for its opener from
// outside, which says so; a window with no opener stays, to be refused.
func TestOpenFromOutside(t *testing.T) {
	env := &Env{Roles: NewRoles([]Instance{
		{Name: "order", Role: protocol.Producer},
		{Name: "relay-1", Role: protocol.Relay},
		{Name: "inventory", Role: protocol.Consumer, Points: map[string]string{protocol.ConsumerAfterCommit: "inv.after-commit"}},
	})}
	links := func(ref history.Link) bool { return ref == "producer.amqp" || ref == "consumer.pg" }
	for _, tc := range []struct {
		name   string
		f      Fault
		opener string // "": unchanged
		inner  []string
	}{
		{"mapped point", Crash{Process: "consumer", Point: protocol.ConsumerAfterCommit, Action: crashpoint.Kill, Hit: 3}, "", nil},
		{"producer after commit", Crash{Process: "producer", Point: protocol.ProducerAfterCommit, Action: crashpoint.Kill, Hit: 12}, OpenedAtCommit, []string{"on-commit", "link-down"}},
		{"producer before commit", Crash{Process: "producer", Point: protocol.ProducerBeforeCommit, Action: crashpoint.Kill, Hit: 12}, OpenedHeld, []string{KindHeldCommit}},
		{"consumer after receive", Crash{Process: "consumer", Point: protocol.ConsumerAfterReceive, Action: crashpoint.Kill, Hit: 4}, OpenedUnacked, []string{KindUnacked}},
		{"consumer before commit, cut", LinkDown{Link: "consumer.pg", At: &Sync{Process: "consumer", Point: protocol.ConsumerBeforeCommit}}, OpenedCommitsCut, []string{KindHeldCommit}},
		{"producer before commit, cut", LinkDown{Link: "producer.pg", At: &Sync{Process: "producer", Point: protocol.ProducerBeforeCommit}}, OpenedCommitsCut, []string{KindHeldCommit}},
		{"relay window: no opener", Crash{Process: "relay-1", Point: protocol.RelayAfterClaim, Action: crashpoint.Kill, Hit: 2}, "", nil},
		{"before commit paused: no opener", Crash{Process: "consumer", Point: protocol.ConsumerBeforeCommit, Action: crashpoint.Pause, Hit: 2}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, windows := OpenFromOutside(env, []Fault{tc.f}, links)
			require.Len(t, got, 1)
			if tc.opener == "" {
				assert.Equal(t, tc.f, got[0])
				assert.Empty(t, windows)
				return
			}
			o, ok := got[0].(interface{ from() outside })
			require.True(t, ok, "%T is not opened from outside", got[0])
			assert.Equal(t, tc.opener, o.from().Opener)
			assert.Len(t, windows, 1)
			var kinds []string
			for _, f := range o.from().Faults {
				k, ok := KindOf(f)
				require.True(t, ok)
				kinds = append(kinds, k.Name())
			}
			assert.Equal(t, tc.inner, kinds)
			if l, ok := tc.f.(LinkDown); ok {
				want := map[string]string{protocol.ProducerBeforeCommit: history.TableFacts, protocol.ConsumerBeforeCommit: history.TableEffects}[l.At.Point]
				assert.Equal(t, want, o.from().Faults[0].(HeldCommit).Table, "the COMMIT held is of the table the process commits")
			}
			assert.Contains(t, got[0].Describe().Detail, "opened from outside by "+tc.opener)
		})
	}
}

func TestHeadersOf(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		want      amqp.Table
		err       bool
	}{
		{name: "strings", raw: `{"_watermill_message_uuid":"e1","aggregate_id":"o1"}`, want: amqp.Table{"_watermill_message_uuid": "e1", "aggregate_id": "o1"}},
		{name: "empty object", raw: `{}`, want: amqp.Table{}},
		{name: "a number", raw: `{"n":1}`, err: true},
		{name: "not an object", raw: `["a"]`, err: true},
		{name: "not JSON", raw: `x`, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := headersOf([]byte(tc.raw))
			if tc.err {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
