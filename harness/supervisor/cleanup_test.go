package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCleanupRunsLIFOOnce(t *testing.T) {
	c := NewCleanup()
	var order []string
	for _, name := range []string{"infra", "supervisor", "proxies"} {
		c.Add(name, func(context.Context) error {
			order = append(order, name)
			if name == "supervisor" {
				return errors.New("two processes would not die")
			}
			return nil
		})
	}
	c.Add("panicky", func(context.Context) error { panic("oops") })

	err := c.Run(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cleanup supervisor: two processes would not die")
	assert.Contains(t, err.Error(), "cleanup panicky: panic: oops")
	assert.Equal(t, []string{"proxies", "supervisor", "infra"}, order)

	require.NoError(t, c.Run(context.Background()), "nothing runs twice")
	assert.Len(t, order, 3)

	c.Add("late", func(context.Context) error { order = append(order, "late"); return nil })
	require.NoError(t, c.Run(context.Background()))
	assert.Equal(t, []string{"proxies", "supervisor", "infra", "late"}, order)
}

func TestCleanupConcurrentRunsOnce(t *testing.T) {
	c := NewCleanup()
	var mu sync.Mutex
	runs := map[string]int{}
	for i := range 20 {
		name := fmt.Sprint(i)
		c.Add(name, func(context.Context) error {
			mu.Lock()
			runs[name]++
			mu.Unlock()
			return nil
		})
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { assert.NoError(t, c.Run(context.Background())) })
	}
	wg.Wait()
	assert.Len(t, runs, 20)
	for name, n := range runs {
		assert.Equal(t, 1, n, name)
	}
}

func TestCleanupOnSignal(t *testing.T) {
	c := NewCleanup()
	exited := make(chan int, 2)
	c.exit = func(code int) { exited <- code }
	c.stderr = io.Discard
	var order []string
	c.Add("first", func(context.Context) error { order = append(order, "first"); return nil })
	c.Add("second", func(context.Context) error { order = append(order, "second"); return nil })

	stop := c.OnSignal(nil)
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case code := <-exited:
		assert.Equal(t, 130, code)
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	assert.Equal(t, []string{"second", "first"}, order)
	stop()
	stop() // idempotent
}

// With a cancel, the first signal cancels the work, naming the signal, and
// leaves the rest to the caller's own path; a second exits at once.
func TestCleanupOnSignalCancelsFirst(t *testing.T) {
	c := NewCleanup()
	exited := make(chan int, 2)
	c.exit = func(code int) { exited <- code }
	c.stderr = io.Discard
	ran := make(chan struct{}, 1)
	c.Add("step", func(context.Context) error { ran <- struct{}{}; return nil })
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)

	stop := c.OnSignal(cancel)
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no cancel after SIGINT")
	}
	assert.ErrorIs(t, context.Cause(ctx), ErrInterrupted)
	assert.EqualError(t, context.Cause(ctx), "interrupted by SIGINT")
	assert.Empty(t, ran, "the caller cleans up on its own path")
	assert.Empty(t, exited)

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case code := <-exited:
		assert.Equal(t, ExitInterrupted, code)
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after a second SIGINT")
	}
}

// A caller that does not end within the grace after the first signal is
// cleaned up and exited all the same.
func TestCleanupOnSignalGivesUpWaiting(t *testing.T) {
	c := NewCleanup()
	c.grace = 50 * time.Millisecond
	exited := make(chan int, 2)
	c.exit = func(code int) { exited <- code }
	c.stderr = io.Discard
	ran := false
	c.Add("step", func(context.Context) error { ran = true; return nil })
	_, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := c.OnSignal(cancel)
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case code := <-exited:
		assert.Equal(t, ExitInterrupted, code)
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after the grace")
	}
	assert.True(t, ran)
}
