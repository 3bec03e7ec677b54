package runner

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
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
