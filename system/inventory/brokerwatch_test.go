package inventory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExitOnBrokerLoss: the decision of --exit-on-broker-loss, over a
// sequence of workers' sessions starting and ending. The broker counts as
// lost from the start until a first session, and from the moment the last
// session ends; one session of several is enough to hold on; a limit of 0
// never gives up.
func TestExitOnBrokerLoss(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		up   bool // a session starts; else one ends
		atMS int
	}
	tests := []struct {
		name  string
		limit time.Duration
		steps []step
		nowMS int
		// then
		connected bool
		lostFor   time.Duration
		due       bool
		left      time.Duration
	}{
		{name: "not connected yet: starting, not lost", limit: time.Second, nowMS: 60_000, connected: true},
		{name: "connected", limit: time.Second, steps: []step{{true, 100}}, nowMS: 5000, connected: true},
		{name: "lost since the session ended", limit: time.Second, steps: []step{{true, 100}, {false, 3000}}, nowMS: 3500,
			lostFor: 500 * time.Millisecond, left: 500 * time.Millisecond},
		{name: "lost past the limit", limit: time.Second, steps: []step{{true, 100}, {false, 3000}}, nowMS: 4200, lostFor: 1200 * time.Millisecond, due: true},
		{name: "one session of two still up", limit: time.Second, steps: []step{{true, 100}, {true, 200}, {false, 300}}, nowMS: 9000, connected: true},
		{name: "the last of two ended", limit: time.Second, steps: []step{{true, 100}, {true, 200}, {false, 300}, {false, 2000}}, nowMS: 2500,
			lostFor: 500 * time.Millisecond, left: 500 * time.Millisecond},
		{name: "reconnected resets the clock", limit: time.Second, steps: []step{{true, 100}, {false, 200}, {true, 1100}, {false, 5000}}, nowMS: 5900,
			lostFor: 900 * time.Millisecond, left: 100 * time.Millisecond},
		{name: "limit 0 never gives up", limit: 0, steps: []step{{true, 100}, {false, 200}}, nowMS: 3_600_200, lostFor: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newBrokerWatch(start)
			for _, s := range tt.steps {
				if s.up {
					w.up()
				} else {
					w.down(at(s.atMS))
				}
			}
			connected, lostFor, _ := w.lost(at(tt.nowMS))
			assert.Equal(t, tt.connected, connected)
			assert.Equal(t, tt.lostFor, lostFor)
			due, left := exitDue(tt.limit, lostFor, connected)
			assert.Equal(t, tt.due, due)
			if !due {
				assert.Equal(t, tt.left, left)
			}
		})
	}
}

// TestWatchBroker: the watcher gives up once the broker has been lost for
// its limit, wakes at a session's start (and then does not give up), and
// returns nil when its context ends.
func TestWatchBroker(t *testing.T) {
	t.Parallel()
	const limit = 50 * time.Millisecond
	for _, tc := range []struct {
		name string
		up   bool
	}{{"holds on before the first session (starting), stops with its context", false}, {"holds on while connected, stops with its context", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newBrokerWatch(time.Now())
			if tc.up {
				w.up()
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- watchBroker(ctx, w, limit) }()
			select {
			case err := <-done:
				require.FailNow(t, "the watcher gave up", "%v", err)
			case <-time.After(4 * limit): // a window in which a wrong watcher would have returned
			}
			cancel()
			assert.NoError(t, <-done)
		})
	}
	t.Run("a session's end starts the clock", func(t *testing.T) {
		t.Parallel()
		w := newBrokerWatch(time.Now())
		w.up()
		done := make(chan error, 1)
		go func() { done <- watchBroker(t.Context(), w, limit) }()
		ended := time.Now()
		w.down(ended)
		select {
		case err := <-done:
			var lost *BrokerLostError
			require.True(t, errors.As(err, &lost), "want a *BrokerLostError, got %v", err)
			assert.GreaterOrEqual(t, time.Since(ended), limit)
		case <-time.After(10 * time.Second):
			require.FailNow(t, "the watcher never gave up after the session ended")
		}
	})
}
