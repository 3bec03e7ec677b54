package runner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/harness/observe"
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
	_, err := waitConverged(ctx, observe.New(observe.Run{}, nil), func() error { return down }, converge{Timeout: time.Minute, Quiet: time.Second})
	require.ErrorIs(t, err, down)
	assert.Contains(t, err.Error(), "cannot converge")
	assert.Less(t, time.Since(begin), time.Second, "not after the bound")
}
