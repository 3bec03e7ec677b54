package fault

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A trigger over the backlog fires once the backlog was seen, one after
// the release once the held role runs again; either, in a run that holds
// nothing back, is an error, never a fault fired at once.
func TestTriggerWaitsForTheBacklog(t *testing.T) {
	ack := func() int64 { return 0 }
	for _, tc := range []struct {
		name    string
		trigger Trigger
	}{
		{"over the backlog", Trigger{OverBacklog: true}},
		{"after the release", Trigger{AfterRelease: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&Env{Acknowledged: ack}).Wait(context.Background(), tc.trigger)
			require.Error(t, err, "no role held")

			backlog, released := make(chan struct{}), make(chan struct{})
			env := &Env{Acknowledged: ack, Backlog: backlog, Released: released}
			done := make(chan error, 1)
			go func() { done <- env.Wait(context.Background(), tc.trigger) }()
			close(backlog)
			if tc.trigger.AfterRelease {
				select {
				case err := <-done:
					t.Fatalf("fired before the release: %v", err)
				case <-time.After(50 * time.Millisecond):
				}
				close(released)
			}
			assert.NoError(t, <-done)
		})
	}
	assert.Equal(t, "over the backlog", Trigger{OverBacklog: true}.String())
	assert.Equal(t, "once released to the backlog", Trigger{AfterRelease: true}.String())
	assert.Equal(t, "after 5 orders, over the backlog + 1s", Trigger{AfterOrders: 5, OverBacklog: true, Delay: time.Second}.String())
}
