package inventory

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// brokerWatch tracks whether any worker holds a broker session (its
// consumer started), and since when none has. The clock runs only once a
// session has been held: losing the broker is losing a session. Until the
// first one the consumer is starting (its first dial may take long), and
// whether it starts is its supervisor's readiness check, not this watch.
type brokerWatch struct {
	mu      sync.Mutex
	held    bool          // a session has been held at some time
	live    int           // workers consuming now
	since   time.Time     // when live last fell to 0
	changed chan struct{} // closed and replaced at every change of live
}

func newBrokerWatch(start time.Time) *brokerWatch {
	return &brokerWatch{since: start, changed: make(chan struct{})}
}

// up records that a worker's session started consuming.
func (w *brokerWatch) up() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live++
	w.held = true
	w.changedLocked()
}

// down records, at now, that a worker's consuming session ended.
func (w *brokerWatch) down(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live--
	if w.live == 0 {
		w.since = now
	}
	w.changedLocked()
}

func (w *brokerWatch) changedLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// lost says, at now, whether the broker counts as held (a worker holds a
// session, or none has been held yet), how long it has been lost (0 while
// held), and a channel closed at the next change.
func (w *brokerWatch) lost(now time.Time) (connected bool, lostFor time.Duration, changed <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.live > 0 || !w.held {
		return true, 0, w.changed
	}
	return false, max(now.Sub(w.since), 0), w.changed
}

// exitDue is the decision of --exit-on-broker-loss: give up on the broker
// once it has been lost for limit; a limit of 0 never gives up (reconnect
// forever, the default). It returns how long is left before it is due
// (meaningful only while lost, and not due).
func exitDue(limit, lostFor time.Duration, connected bool) (due bool, left time.Duration) {
	if limit <= 0 || connected {
		return false, 0
	}
	return lostFor >= limit, limit - lostFor
}

// BrokerLostError is the consumer giving up on its broker under
// --exit-on-broker-loss: it exits non-zero and leaves its restart to its
// supervisor.
type BrokerLostError struct{ Limit time.Duration }

func (e *BrokerLostError) Error() string {
	return fmt.Sprintf("no broker connection for %s (--exit-on-broker-loss): exiting for the supervisor to restart the consumer", e.Limit)
}

// watchBroker returns a *BrokerLostError once w has had no session for
// limit, or nil when ctx ends first. It wakes at each change of w and when
// the limit would be reached, never on a poll.
func watchBroker(ctx context.Context, w *brokerWatch, limit time.Duration) error {
	for {
		connected, lostFor, changed := w.lost(time.Now())
		due, left := exitDue(limit, lostFor, connected)
		if due {
			return &BrokerLostError{Limit: limit}
		}
		if !waitChange(ctx, changed, left) {
			return nil
		}
	}
}

// waitChange waits for changed, or left when it is > 0; false when ctx
// ended first.
func waitChange(ctx context.Context, changed <-chan struct{}, left time.Duration) bool {
	var expire <-chan time.Time
	if left > 0 {
		t := time.NewTimer(left)
		defer t.Stop()
		expire = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-changed:
	case <-expire:
	}
	return true
}
