package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
)

// A fault drawn at random that the target does not offer (random-chaos
// drew a crash point the Node relay lacks) is dropped and described as an
// optional fault that did not happen, not a reason to run nothing; with
// nothing offered, every fault stays and the run is not run.
func TestOfferedDropsWhatTheTargetLacks(t *testing.T) {
	env := &fault.Env{Roles: fault.NewRoles([]fault.Instance{
		{Name: "relay-1", Role: protocol.Relay, Points: map[string]string{protocol.RelayAfterPublish: "relay.after-publish"}},
		{Name: "consumer", Role: protocol.Consumer},
	})}
	has := fault.Crash{Process: "relay-1", Point: protocol.RelayAfterPublish, Action: crashpoint.Kill, Hit: 1}
	lacks := fault.Crash{Process: "relay-1", Point: protocol.RelayAfterMark, Action: crashpoint.Kill, Hit: 1}
	down := fault.LinkDown{Link: "consumer.pg", Duration: time.Second}

	kept, dropped := offered(env, []fault.Fault{has, lacks, down})
	assert.Equal(t, []fault.Fault{has, down}, kept)
	require.Len(t, dropped, 1)
	assert.True(t, dropped[0].Optional)
	assert.False(t, dropped[0].Hit)
	assert.Contains(t, dropped[0].Error, "not offered by the target")

	kept, dropped = offered(env, []fault.Fault{lacks})
	assert.Equal(t, []fault.Fault{lacks}, kept, "nothing offered: the run says why it cannot run")
	assert.Empty(t, dropped)
}
