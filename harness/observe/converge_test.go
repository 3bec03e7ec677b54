package observe

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWaitConvergedEndsWhenAProcessIsDown: a process down with no restart
// coming ends the wait at once, with its error, instead of at the bound.
func TestWaitConvergedEndsWhenAProcessIsDown(t *testing.T) {
	down := errors.New("process inventory is down: exited by itself")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	begin := time.Now()
	_, err := New(Run{}, nil).WaitConverged(ctx, func() error { return down }, Converge{Timeout: time.Minute, Quiet: time.Second})
	require.ErrorIs(t, err, down)
	assert.Contains(t, err.Error(), "cannot converge")
	assert.Less(t, time.Since(begin), time.Second, "not after the bound")
}
