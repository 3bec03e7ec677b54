package runner

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRemovalsCloseWaitsForThoseUnderWay: close returns only once every
// removal started before it is done, and one started after it runs in its
// caller, so none outlives the infrastructure it removes from.
func TestRemovalsCloseWaitsForThoseUnderWay(t *testing.T) {
	var rm removals
	release := make(chan struct{})
	var done atomic.Int32
	for range 3 {
		rm.start(func() {
			<-release
			done.Add(1)
		})
	}
	closed := make(chan struct{})
	go func() {
		rm.close()
		close(closed)
	}()
	// close is seen waiting for the removals, and has not returned.
	require.Eventually(t, func() bool { return blockedIn("sync.(*WaitGroup).Wait", "runner.(*removals).close(") }, 10*time.Second, 5*time.Millisecond,
		"close waits for the removals under way")
	select {
	case <-closed:
		t.Fatal("close returned while removals were under way")
	default:
	}
	close(release)
	<-closed
	assert.Equal(t, int32(3), done.Load(), "every removal under way finished before close returned")

	ran := false
	rm.start(func() { ran = true })
	assert.True(t, ran, "a removal started after close ran in its caller")
}
