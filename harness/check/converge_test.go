package check

import (
	"errors"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/stretchr/testify/assert"
)

// TestSettling: the pipeline has converged once it stayed settled, its
// effects unchanged, for the quiet window; a sample that moves or cannot be
// read starts the window again, and a wait that ends says what was last
// seen.
func TestSettling(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	settled := history.Progress{Effects: 5, Queue: "orders"}
	busy := history.Progress{Effects: 4, Ready: 1, Queue: "orders"}
	unreadable := errors.New("connection refused")
	// a consumer that applies later: its queue drained, one event stored
	// in its inbox and not applied yet, then applied
	inbox := history.Progress{Effects: 5, InboxPending: 1, Queue: "orders"}
	settled6 := history.Progress{Effects: 6, Queue: "orders"}
	type sample struct {
		p   history.Progress
		err error
		ms  int
	}
	tests := []struct {
		name    string
		samples []sample
		wantAt  int // ms of the convergence; -1: none
		wantErr string
	}{
		{"settled for the window", []sample{{busy, nil, 0}, {settled, nil, 200}, {settled, nil, 400}, {settled, nil, 1400}}, 400, ""},
		{"the first settled sample has no earlier effects to compare", []sample{{settled, nil, 0}, {settled, nil, 1000}}, -1, "0 messages ready and 0 unacked in orders, 5 effects"},
		{"moving effects restart the window", []sample{{settled, nil, 0}, {settled, nil, 200}, {history.Progress{Effects: 6}, nil, 600}, {history.Progress{Effects: 6}, nil, 1300}}, -1, "6 effects"},
		{"an unreadable sample restarts the window", []sample{{settled, nil, 0}, {settled, nil, 200}, {history.Progress{}, unreadable, 600}, {settled, nil, 1300}}, -1, "5 effects"},
		{"a wait that ends on an unreadable sample says why", []sample{{settled, nil, 0}, {history.Progress{}, unreadable, 200}}, -1, "connection refused"},
		{"events in the inbox not applied: queue drained and effects still, but not settled",
			[]sample{{settled, nil, 0}, {inbox, nil, 200}, {inbox, nil, 1400}, {inbox, nil, 3000}}, -1, "1 events in the inbox not applied, 5 effects"},
		{"a relay whose backlog is not shown: fewer effects than the answered events call for is not settled",
			[]sample{{history.Progress{Expected: 6, Effects: 5, Effected: 5, Queue: "orders"}, nil, 0}, {history.Progress{Expected: 6, Effects: 5, Effected: 5, Queue: "orders"}, nil, 1400}, {history.Progress{Expected: 6, Effects: 5, Effected: 5, Queue: "orders"}, nil, 3000}}, -1, "5 effects (5 events) of the 6 the answered events call for"},
		{"a relay whose backlog is not shown: settled once every event has its effect",
			[]sample{{history.Progress{Expected: 6, Effects: 5, Effected: 5, Queue: "orders"}, nil, 0}, {history.Progress{Expected: 6, Effects: 6, Effected: 6, Queue: "orders"}, nil, 200}, {history.Progress{Expected: 6, Effects: 6, Effected: 6, Queue: "orders"}, nil, 400}, {history.Progress{Expected: 6, Effects: 6, Effected: 6, Queue: "orders"}, nil, 1400}}, 400, ""},
		{"a log relay's slot behind committed rows: queue drained and effects still, but not settled",
			[]sample{{history.Progress{Effects: 5, SlotBehind: 2, Queue: "orders"}, nil, 0}, {history.Progress{Effects: 5, SlotBehind: 2, Queue: "orders"}, nil, 1400}, {history.Progress{Effects: 5, SlotBehind: 2, Queue: "orders"}, nil, 3000}}, -1, "2 outbox rows not yet confirmed past by the relay's slot, 5 effects"},
		{"the slot confirmed past every row: settled from then on",
			[]sample{{history.Progress{Effects: 5, SlotBehind: 2, Queue: "orders"}, nil, 0}, {settled, nil, 200}, {settled, nil, 1200}}, 200, ""},
		{"the inbox applied: settled from then on",
			[]sample{{inbox, nil, 0}, {inbox, nil, 1400}, {settled6, nil, 1600}, {settled6, nil, 1800}, {settled6, nil, 2800}}, 1800, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSettling(time.Second)
			gotAt := -1
			for _, smp := range tt.samples {
				if since, ok := s.Sample(smp.p, smp.err, at(smp.ms)); ok {
					gotAt = int(since.Sub(t0).Milliseconds())
					break
				}
			}
			assert.Equal(t, tt.wantAt, gotAt)
			if tt.wantErr != "" {
				err := s.NotConverged(time.Minute)
				assert.Contains(t, err.Error(), "not converged after 1m0s")
				assert.Contains(t, err.Error(), tt.wantErr)
			}
		})
	}
}

// TestSettlingStalled: a pipeline not settled that shows no change for the
// stall has stalled; one that moves, however slowly, has not; a settled
// one, or a wait without a stall, never stalls; unreadable samples are no
// change.
func TestSettlingStalled(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	stuck := history.Progress{Unsettled: 3, Effects: 97, Queue: "orders"}
	tests := []struct {
		name    string
		samples []history.Progress // one a second from t0; nil Queue: unreadable
		stall   time.Duration
		want    bool
	}{
		{"rows that never settle stall", []history.Progress{stuck, stuck, stuck, stuck, stuck, stuck}, 5 * time.Second, true},
		{"not yet for the whole stall", []history.Progress{stuck, stuck, stuck, stuck, stuck}, 5 * time.Second, false},
		{"a slow pipeline moves",
			[]history.Progress{{Unsettled: 9, Queue: "q"}, {Unsettled: 9, Queue: "q"}, {Unsettled: 9, Queue: "q"}, {Unsettled: 8, Effects: 1, Queue: "q"}, {Unsettled: 8, Effects: 1, Queue: "q"}, {Unsettled: 8, Effects: 1, Queue: "q"}},
			5 * time.Second, false},
		{"a message leaving the queue is a change",
			[]history.Progress{{Ready: 2, Queue: "q"}, {Ready: 2, Queue: "q"}, {Ready: 1, Unacked: 1, Queue: "q"}, {Ready: 1, Unacked: 1, Queue: "q"}, {Ready: 1, Unacked: 1, Queue: "q"}, {Ready: 1, Unacked: 1, Queue: "q"}},
			5 * time.Second, false},
		{"unreadable samples are no change", []history.Progress{stuck, stuck, {}, {}, stuck, stuck}, 5 * time.Second, true},
		{"settled is not stalled", []history.Progress{{Effects: 5, Queue: "q"}, {Effects: 5, Queue: "q"}, {Effects: 5, Queue: "q"}, {Effects: 5, Queue: "q"}, {Effects: 5, Queue: "q"}, {Effects: 5, Queue: "q"}}, 5 * time.Second, false},
		{"no stall asked", []history.Progress{stuck, stuck, stuck, stuck, stuck, stuck}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSettling(time.Second)
			for i, p := range tt.samples {
				var err error
				if p.Queue == "" {
					err = errors.New("connection refused")
				}
				s.Sample(p, err, at(i))
			}
			assert.Equal(t, tt.want, s.Stalled(at(len(tt.samples)-1), tt.stall))
		})
	}
	s := NewSettling(time.Second)
	s.Sample(stuck, nil, at(0))
	assert.Contains(t, s.NotConvergedStalled(5*time.Second).Error(), "nothing changed for 5s: 3 outbox events unsettled")
}
