package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Cleanup collects teardown steps for a test binary or the CLI and runs
// them last-added first, each exactly once, on the normal path (Run) or on
// SIGINT/SIGTERM (OnSignal).
type Cleanup struct {
	sem chan struct{} // one Run at a time

	mu    sync.Mutex
	steps []cleanupStep

	// for OnSignal; tests replace them
	timeout time.Duration
	grace   time.Duration
	exit    func(code int)
	stderr  io.Writer
}

// osSignalName is a signal as a shell names it (os.Interrupt prints as
// "interrupt").
func osSignalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		return signalName(s)
	}
	return sig.String()
}

// ErrInterrupted is the cause (context.Cause) of a context that OnSignal
// cancelled.
var ErrInterrupted = errors.New("interrupted")

type cleanupStep struct {
	name string
	fn   func(context.Context) error
}

// NewCleanup makes an empty Cleanup.
func NewCleanup() *Cleanup {
	return &Cleanup{
		sem:     make(chan struct{}, 1),
		timeout: 20 * time.Second,
		grace:   8 * time.Second,
		exit:    os.Exit,
		stderr:  os.Stderr,
	}
}

// Add registers a step; steps run in reverse order of adding.
func (c *Cleanup) Add(name string, fn func(context.Context) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steps = append(c.steps, cleanupStep{name: name, fn: fn})
}

// Run runs every step not run yet, last added first, and joins their errors.
// A step that panics is reported as an error and the rest still run.
// Concurrent calls run one after the other; a step never runs twice.
func (c *Cleanup) Run(ctx context.Context) error {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("cleanup: waiting for a cleanup already running: %w", ctx.Err())
	}
	defer func() { <-c.sem }()
	var errs []error
	for {
		c.mu.Lock()
		if len(c.steps) == 0 {
			c.mu.Unlock()
			break
		}
		step := c.steps[len(c.steps)-1]
		c.steps = c.steps[:len(c.steps)-1]
		c.mu.Unlock()
		if err := runStep(ctx, step); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func runStep(ctx context.Context, step cleanupStep) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cleanup %s: panic: %v", step.name, r)
		}
	}()
	if err := step.fn(ctx); err != nil {
		return fmt.Errorf("cleanup %s: %w", step.name, err)
	}
	return nil
}

// ExitInterrupted is the exit status of a process ended by SIGINT or
// SIGTERM (128 + SIGINT).
const ExitInterrupted = 130

// OnSignal installs a SIGINT/SIGTERM handler. A second signal exits the
// process at once with status 130 (its children die with it: each has
// Pdeathsig). On the first:
//   - with cancel nil, it runs Run bounded by 20 s and exits with 130;
//   - with cancel, it cancels the work first (cancel's cause names the
//     signal), so that runs in flight end interrupted, nothing new starts,
//     and the caller reports and cleans up on its normal path and exits
//     130 itself. Should that path not end within grace, the handler runs
//     Run and exits 130 all the same.
//
// stop uninstalls the handler.
func (c *Cleanup) OnSignal(cancel context.CancelCauseFunc) (stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		var sig os.Signal
		select {
		case sig = <-ch:
		case <-quit:
			return
		}
		go func() {
			select {
			case <-ch:
				c.exit(ExitInterrupted)
			case <-quit:
			}
		}()
		if cancel != nil {
			fmt.Fprintf(c.stderr, "faultline: %s: stopping: runs under way end interrupted, nothing new starts (signal again to exit at once)\n", osSignalName(sig))
			cancel(fmt.Errorf("%w by %s", ErrInterrupted, osSignalName(sig)))
			select {
			case <-quit:
				return // the caller's own path is done
			case <-time.After(c.grace):
			}
			fmt.Fprintf(c.stderr, "faultline: still stopping after %s: cleaning up and exiting\n", c.grace)
		} else {
			fmt.Fprintf(c.stderr, "faultline: %v: cleaning up (signal again to exit at once)\n", sig)
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		if err := c.Run(ctx); err != nil {
			fmt.Fprintf(c.stderr, "faultline: cleanup: %v\n", err)
		}
		c.exit(ExitInterrupted)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(quit)
		})
	}
}
