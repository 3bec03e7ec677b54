package runner

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/workload"
)

// The hold tells the faults over the backlog once it is seen, and lets
// the role go only once they ended; a backlog never seen lets it go
// within the bound, with nothing measured and the reason.
func TestBacklogReleasedByWhatItSaw(t *testing.T) {
	t.Run("seen, then the faults over it end", func(t *testing.T) {
		b := &backlog{hold: workload.Hold{Role: "consumer", Backlog: 3}, seen: make(chan struct{}), released: make(chan struct{})}
		var n atomic.Int64
		fault := make(chan struct{})
		go b.release(context.Background(), time.Minute, func() (int, error) { return int(n.Load()), nil }, []<-chan struct{}{fault})
		select {
		case <-b.seen:
			t.Fatal("seen before any backlog")
		case <-time.After(5 * backlogPoll):
		}
		n.Store(4)
		<-b.seen
		select {
		case <-b.released:
			t.Fatal("released while a fault over the backlog ran")
		case <-time.After(5 * backlogPoll):
		}
		close(fault)
		<-b.released
		assert.NoError(t, b.err)
		assert.Equal(t, 4, b.measured)
	})
	t.Run("never seen", func(t *testing.T) {
		b := &backlog{hold: workload.Hold{Role: "relay", Backlog: 200}, seen: make(chan struct{}), released: make(chan struct{})}
		b.release(context.Background(), 10*backlogPoll, func() (int, error) { return 7, nil }, nil)
		<-b.released
		require.Error(t, b.err)
		assert.Contains(t, b.err.Error(), "7 of 200")
		assert.Zero(t, b.measured)
		select {
		case <-b.seen:
			t.Fatal("a backlog never seen was told to the faults")
		default:
		}
	})
}
