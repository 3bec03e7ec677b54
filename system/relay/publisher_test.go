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
func TestEachClaimGetsItsOwnReturn(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, topology.DeclareExchange(e.channel())) // no queue bound: unroutable
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
	for i, claim := range claims {
		got := p.takeReturns(claim, flights[i])
		if assert.Contains(t, got, row.EventID, claim) {
			assert.Equal(t, uint16(312), got[row.EventID].ReplyCode, claim)
		}
	}
	assert.Empty(t, p.returned, "every return was taken by its claim")
}
