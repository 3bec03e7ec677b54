package relay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/system/topology"
)

// One eventId in flight twice on one channel (its lease ran out and the
// same relay claimed it again before the first publish was confirmed),
// both unroutable: each claim gets its own return. Matched by MessageId
// alone, the first claim took the only return it kept and the second saw
// a clean confirm, so the row was marked Published and the message lost.
// Both returns are in hand when the first claim settles: the first drain
// hands both over for the log, and keeps the second's for it, unless the
// relay drops a later batch's returns (own-batch-returns-only).
func TestEachClaimGetsItsOwnReturn(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, topology.DeclareExchange(e.channel())) // no queue bound: unroutable
	for _, tc := range []struct {
		name       string
		dropLater  bool
		secondGets bool
	}{
		{name: "later returns kept", secondGets: true},
		{name: "own-batch-returns-only", dropLater: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := dialPublisher(ctx, e.amqp, 4, time.Second)
			require.NoError(t, err)
			defer p.close()

			row := Row{EventID: "EV-TWICE", EventType: "order.created", Payload: []byte(`{}`)}
			var flights [2][]inFlight
			claims := [2]string{"relay-1:first", "relay-1:second"}
			for i, claim := range claims {
				dc, err := p.publish(ctx, topology.Exchange, row.EventType, true, claim, row)
				require.NoError(t, err)
				flights[i] = []inFlight{{row, dc}}
			}
			for i := range flights {
				ok, err := flights[i][0].dc.WaitContext(ctx)
				require.NoError(t, err)
				require.True(t, ok, "confirm %d", i)
			}

			got, drained := p.takeReturns(claims[0], flights[0], tc.dropLater)
			if assert.Contains(t, got, row.EventID) {
				assert.Equal(t, uint16(312), got[row.EventID].ReplyCode)
			}
			var from []string
			for _, r := range drained {
				from = append(from, returnClaim(r))
			}
			assert.Equal(t, claims[:], from, "both returns drained by the first settle, each under its own claim")

			got, drained = p.takeReturns(claims[1], flights[1], tc.dropLater)
			assert.Empty(t, drained, "nothing left to drain")
			assert.Equal(t, tc.secondGets, len(got) == 1, "the second claim's return")
			assert.Empty(t, p.returned, "every return was taken or dropped")
		})
	}
}
