package poll

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUntil(t *testing.T) {
	failed := errors.New("read failed")
	t.Run("seen on the third ask", func(t *testing.T) {
		calls := 0
		err := Until(t.Context(), time.Minute, time.Millisecond, func() (bool, error) {
			calls++
			return calls == 3, nil
		})
		require.NoError(t, err)
		assert.Equal(t, 3, calls)
	})
	t.Run("never seen", func(t *testing.T) {
		err := Until(t.Context(), 20*time.Millisecond, time.Millisecond, func() (bool, error) { return false, nil })
		require.Error(t, err)
		assert.Equal(t, "not within 20ms", err.Error())
	})
	t.Run("the last read failed", func(t *testing.T) {
		err := Until(t.Context(), 20*time.Millisecond, time.Millisecond, func() (bool, error) { return false, failed })
		require.ErrorIs(t, err, failed)
	})
	t.Run("a read that failed before one that did not is not reported", func(t *testing.T) {
		calls := 0
		err := Until(t.Context(), 20*time.Millisecond, time.Millisecond, func() (bool, error) {
			calls++
			if calls == 1 {
				return false, failed
			}
			return false, nil
		})
		require.Error(t, err)
		assert.NotErrorIs(t, err, failed)
	})
	t.Run("ctx ended", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := Until(ctx, time.Minute, time.Millisecond, func() (bool, error) { return false, nil })
		require.Error(t, err)
	})
}
