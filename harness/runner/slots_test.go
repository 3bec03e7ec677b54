package runner

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run of an infrastructure of its own is handed the next place before
// the runs that waited longer for the shared one; a run whose context
// ends while it waits leaves the queue, and a place handed to it as it
// gave up goes on to the next.
func TestSlotsHandTheOwnInfrastructureRunsFirst(t *testing.T) {
	ctx := context.Background()
	s := newSlots(1)
	require.NoError(t, s.take(ctx, false))

	order := make(chan string, 3)
	waiting := func(name string, first bool) {
		go func() {
			if s.take(ctx, first) == nil {
				order <- name
			}
		}()
	}
	queued := func(s *slots, first, rest int) func() bool {
		return func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.first) == first && len(s.rest) == rest
		}
	}
	waiting("shared-1", false)
	require.Eventually(t, queued(s, 0, 1), time.Second, time.Millisecond)
	waiting("shared-2", false)
	require.Eventually(t, queued(s, 0, 2), time.Second, time.Millisecond)
	waiting("cluster", true)
	require.Eventually(t, queued(s, 1, 2), time.Second, time.Millisecond)

	for _, want := range []string{"cluster", "shared-1", "shared-2"} {
		s.give()
		assert.Equal(t, want, <-order)
	}
	s.give()
	assert.Equal(t, 1, s.free, "the last place given back is free")

	t.Run("a run that gives up leaves the queue", func(t *testing.T) {
		s := newSlots(1)
		require.NoError(t, s.take(ctx, false))
		gone, cancel := context.WithCancel(ctx)
		errs := make(chan error, 1)
		go func() { errs <- s.take(gone, false) }()
		require.Eventually(t, queued(s, 0, 1), time.Second, time.Millisecond)
		cancel()
		assert.ErrorIs(t, <-errs, context.Canceled)
		s.give()
		assert.Equal(t, 1, s.free, "no place went to the run that gave up")
	})
}
