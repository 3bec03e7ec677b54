package runner

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/infra"
)

// stubInfra stands for a started infrastructure; take calls none of its
// methods.
type stubInfra struct{ infra.Infra }

// An infrastructure apart whose start failed (a node slower to boot than
// its bound on a loaded machine) is started once more before its runs are
// not run; a start that keeps failing gives its error to every run, and is
// not tried again.
func TestApartStartsOnceMore(t *testing.T) {
	for _, tc := range []struct {
		name        string
		fails       int  // starts that fail before one works
		interrupted bool // ctx cancelled before the first start
		starts      int
		wantErr     string
	}{
		{name: "first start works", fails: 0, starts: 1},
		{name: "second start works", fails: 1, starts: 2},
		{name: "every start fails", fails: 5, starts: apartStarts, wantErr: "node 2 not up"},
		{name: "interrupted: one start, its error told", interrupted: true, starts: 1, wantErr: context.Canceled.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			if tc.interrupted {
				cancel()
			}
			defer cancel()
			starts := 0
			a := &apart{what: "a test", start: func(ctx context.Context) (infra.Infra, error) {
				starts++
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				if starts <= tc.fails {
					return nil, errors.New("node 2 not up within its bound")
				}
				return stubInfra{}, nil
			}}
			for range 2 { // a second run takes the outcome of the first start
				in, release, err := a.take(ctx, t.Logf)
				if tc.wantErr != "" {
					require.Error(t, err)
					assert.Contains(t, err.Error(), tc.wantErr)
					continue
				}
				require.NoError(t, err)
				assert.NotNil(t, in)
				release(false)
			}
			assert.Equal(t, tc.starts, starts)
		})
	}
}

// stoppable stands for a started infrastructure that counts its stops.
type stoppable struct {
	infra.Infra
	stops *int
}

func (s stoppable) Stop(context.Context) error { *s.stops++; return nil }

// A run that leaves the infrastructure apart spoiled (a broker that did
// not come back from its restart) has it stopped; the next run gets a new
// one, not a broker nothing answers on. A run that leaves it whole hands
// the same one on.
func TestApartSpoiledIsStartedAgain(t *testing.T) {
	ctx := context.Background()
	starts, stops := 0, 0
	a := &apart{what: "a test", start: func(context.Context) (infra.Infra, error) {
		starts++
		return stoppable{stops: &stops}, nil
	}}
	for i, spoiled := range []bool{false, true, false} {
		in, release, err := a.take(ctx, t.Logf)
		require.NoError(t, err, "run %d", i)
		require.NotNil(t, in)
		release(spoiled)
	}
	assert.Equal(t, 2, starts, "started once, and once more after the spoiled run")
	assert.Equal(t, 1, stops, "the spoiled instance stopped")
	require.NoError(t, a.stop(ctx))
	assert.Equal(t, 2, stops, "the new instance stopped with the rest")
}

// A run that waits for the infrastructure apart while the run before it
// leaves it spoiled gets the one started after it, never the stopped one
// (whose Toxiproxy links are gone: restoring it fails, and the run would
// be not run).
func TestApartWaiterGetsTheInstanceAfterTheSpoiledOne(t *testing.T) {
	ctx := context.Background()
	starts, stops := 0, 0
	a := &apart{what: "a test", start: func(context.Context) (infra.Infra, error) {
		starts++
		return &stoppable{stops: &stops}, nil
	}}
	first, release, err := a.take(ctx, t.Logf)
	require.NoError(t, err)

	type taken struct {
		in      infra.Infra
		release func(bool)
		err     error
	}
	got := make(chan taken, 1)
	go func() {
		in, rel, err := a.take(ctx, t.Logf)
		got <- taken{in, rel, err}
	}()
	// The waiter has read the instance when it waits for the run lock.
	require.Eventually(t, waitsForTheRunLock, 10*time.Second, 5*time.Millisecond, "the second run waits for the first")
	release(true)

	second := <-got
	require.NoError(t, second.err)
	assert.NotSame(t, first, second.in, "the waiter got the instance started after the spoiled one")
	second.release(false)
	assert.Equal(t, 2, starts)
	require.NoError(t, a.stop(ctx))
	assert.Equal(t, 2, stops)
}

// waitsForTheRunLock says whether a goroutine is blocked in take on the
// run lock (a mutex Lock called from take itself, not from instance).
func waitsForTheRunLock() bool {
	return blockedIn("sync.(*Mutex).Lock", "runner.(*apart).take(", "runner.(*apart).instance(")
}

// blockedIn says whether a goroutine is in the call wait (a blocking
// call), made by caller and not through notVia: its stack, innermost
// frame first, shows wait, then caller below it.
func blockedIn(wait, caller string, notVia ...string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		i := strings.Index(g, wait)
		if i < 0 {
			continue
		}
		below := g[i:]
		j := strings.Index(below, caller)
		if j < 0 {
			continue
		}
		direct := true
		for _, via := range notVia {
			if strings.Contains(below[:j], via) {
				direct = false
			}
		}
		if direct {
			return true
		}
	}
	return false
}
