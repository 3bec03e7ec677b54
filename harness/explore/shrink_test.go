package explore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/proxies"
)

func pauseAt(process history.Ref, point string, hit int64, hold time.Duration) fault.Crash {
	return fault.Crash{Process: process, Point: point, Action: crashpoint.Pause, Hit: hit, Hold: hold}
}

func changes(cs []Candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Change
	}
	return out
}

func TestCandidates(t *testing.T) {
	pause := pauseAt("relay-1", protocol.RelayAfterConfirm, 3, 5*time.Second)
	latency := fault.Toxic{Link: "relay-1.pg", Toxic: proxies.Latency{Latency: 3 * time.Second, Stream: proxies.Upstream},
		Trigger: fault.Trigger{AfterOrders: 20}, Duration: 6 * time.Second}
	s := Schedule{Target: "t", Workload: workload.Steady(), Faults: []fault.Fault{pause, latency}}
	cs := Candidates(s)
	assert.Equal(t, []string{
		"drop fault 1 (" + Describe(pause) + ")",
		"drop fault 2 (" + Describe(latency) + ")",
		"orders 120 → 60",
		"orders 120 → 90",
		"fault 1: hit 3 → 1",
		"fault 1: hit 3 → 2",
		"fault 1: hold 5s → 2.5s",
		"fault 1: hold 5s → 3.75s",
		"fault 2: trigger after 20 → 10 orders",
		"fault 2: duration 6s → 3s",
		"fault 2: duration 6s → 4.5s",
		"fault 2: latency 3s → 1.5s",
		"fault 2: latency 3s → 2.25s",
	}, changes(cs))

	// Each candidate is s with exactly that change; s itself is untouched.
	assert.Equal(t, []fault.Fault{latency}, cs[0].Schedule.Faults)
	assert.Equal(t, 60, cs[2].Schedule.Workload.Orders)
	assert.Equal(t, 2500*time.Millisecond, cs[2].Schedule.Workload.Pace, "fewer orders at the same rate")
	assert.Equal(t, int64(1), cs[4].Schedule.Faults[0].(fault.Crash).Hit)
	assert.Equal(t, 2500*time.Millisecond, cs[6].Schedule.Faults[0].(fault.Crash).Hold)
	assert.Equal(t, 1500*time.Millisecond, cs[11].Schedule.Faults[1].(fault.Toxic).Toxic.(proxies.Latency).Latency)
	assert.Equal(t, []fault.Fault{pause, latency}, s.Faults)
	assert.Equal(t, 120, s.Workload.Orders)

	// A backlog shrinks with its orders, and stays a valid one.
	// Traffic under load is tried as the trickle first.
	backlog := Schedule{Target: "t", Workload: workload.RelayBacklogSpec(), Faults: []fault.Fault{pause}}
	under := Candidates(backlog)
	require.NotEmpty(t, under)
	assert.Equal(t, "traffic relay-backlog → paced", under[0].Change)
	assert.Equal(t, workload.Steady(), under[0].Schedule.Workload)
	for _, c := range under[1:] {
		assert.NoError(t, c.Schedule.Workload.Validate(), c.Change)
		if c.Schedule.Workload.Orders < backlog.Workload.Orders {
			assert.Less(t, c.Schedule.Workload.Hold.Backlog, backlog.Workload.Hold.Backlog, c.Change)
		}
	}
	assert.Equal(t, 200, backlog.Workload.Hold.Backlog, "the original's backlog untouched")

	// One fault is never dropped; orders stop short of a trigger.
	late := fault.LinkDown{Link: "consumer.pg", Trigger: fault.Trigger{AfterOrders: 80, Delay: time.Second}, Duration: 2 * time.Second}
	kill := fault.Crash{Process: "consumer", Point: protocol.ConsumerAfterCommit, Action: crashpoint.Kill, Hit: 1, RestartAfter: 200 * time.Millisecond}
	assert.Equal(t, []string{
		"orders 120 → 90",
		"fault 1: trigger after 80 → 40 orders",
		"fault 1: trigger delay 1s → 0",
		"fault 1: duration 2s → 1s",
		"fault 1: duration 2s → 1.5s",
	}, changes(Candidates(Schedule{Workload: workload.Steady(), Faults: []fault.Fault{late}})))
	assert.Equal(t, []string{"orders 120 → 60", "orders 120 → 90", "fault 1: restart after 200ms → 0"},
		changes(Candidates(Schedule{Workload: workload.Steady(), Faults: []fault.Fault{kill}})))

	// A black-box window: its commit earlier, its trigger, hold and cut
	// shorter; orders stop short of its trigger.
	commit := fault.OnCommit{Process: "consumer", Table: history.TableEffects, Nth: 3, Trigger: fault.Trigger{AfterOrders: 70},
		Cut: []history.Link{"consumer.pg"}, CutFor: 2 * time.Second, Action: fault.ActPause, Hold: 4 * time.Second}
	assert.Equal(t, []string{
		"orders 120 → 90",
		"fault 1: commit #3 → #1",
		"fault 1: commit #3 → #2",
		"fault 1: trigger after 70 → 35 orders",
		"fault 1: hold 4s → 2s",
		"fault 1: hold 4s → 3s",
		"fault 1: cut 2s → 1s",
		"fault 1: cut 2s → 1.5s",
	}, changes(Candidates(Schedule{Workload: workload.Steady(), Faults: []fault.Fault{commit}})))

	// At least minOrders orders follow the last trigger: 20 orders with a
	// trigger at 12 would leave 8.
	near := fault.LinkDown{Link: "consumer.pg", Trigger: fault.Trigger{AfterOrders: 12}, Duration: 2 * time.Second}
	short := Schedule{Workload: workload.Steady(), Faults: []fault.Fault{near}}
	short.Workload.Orders = 40
	assert.Equal(t, []string{"orders 40 → 30", "fault 1: trigger after 12 → 6 orders", "fault 1: duration 2s → 1s", "fault 1: duration 2s → 1.5s"},
		changes(Candidates(short)), "40 → 20 would leave 8 orders after the trigger")

	// At the floor there is nothing left to try.
	floor := Schedule{Workload: workload.Steady(), Faults: []fault.Fault{pauseAt("relay-1", protocol.RelayAfterConfirm, 1, 120*time.Millisecond)}}
	floor.Workload.Orders = 10
	assert.Empty(t, Candidates(floor))
}

// fakeFails is a pure stand-in for running a schedule: it fails with
// stale-write when relay-1 (or relay-2) is paused at relay.after-confirm
// for at least 3 s and at least 20 orders flow.
func fakeFails(_ context.Context, s Schedule) bool {
	if s.Workload.Orders < 20 {
		return false
	}
	for _, f := range s.Faults {
		if c, ok := f.(fault.Crash); ok && c.Point == protocol.RelayAfterConfirm && c.Action == crashpoint.Pause && c.Hold >= 3*time.Second {
			return true
		}
	}
	return false
}

func TestShrink(t *testing.T) {
	original := Schedule{Target: "t", Workload: workload.Steady(), Faults: []fault.Fault{
		fault.Crash{Process: "relay-2", Point: protocol.RelayAfterClaim, Action: crashpoint.Kill, Hit: 2, RestartAfter: 200 * time.Millisecond},
		pauseAt("relay-1", protocol.RelayAfterConfirm, 3, 5*time.Second),
		fault.Toxic{Link: "consumer.amqp", Toxic: proxies.Timeout{}, Trigger: fault.Trigger{AfterOrders: 20}, Duration: 5 * time.Second},
	}}
	var want Shrunk
	for _, batch := range []int{1, 2, 4} {
		var tried, taken int
		got := Shrink(context.Background(), original, fakeFails, ShrinkOptions{Batch: batch, Tried: func(_ Candidate, failed, took bool) {
			tried++
			if took {
				require.True(t, failed, "only a failing candidate is taken")
				taken++
			}
		}})
		require.True(t, got.Complete)
		require.Len(t, got.Minimal.Faults, 1, "only the fault that matters is left")
		assert.Equal(t, pauseAt("relay-1", protocol.RelayAfterConfirm, 1, 3750*time.Millisecond), got.Minimal.Faults[0],
			"its hit moved to the first, its hold as short as still fails")
		assert.Equal(t, 22, got.Minimal.Workload.Orders, "as few orders as still fail")
		assert.True(t, fakeFails(context.Background(), got.Minimal))
		assert.Equal(t, got.Tried, tried)
		assert.Equal(t, len(got.Steps), taken, "one candidate taken per step")
		assert.NotEmpty(t, got.Steps)
		last := got.Steps[len(got.Steps)-1]
		assert.Equal(t, 1, last.Faults)
		assert.Equal(t, 22, last.Orders)
		if batch == 1 {
			want = got
			continue
		}
		// Batches only run candidates side by side: the first failing one
		// in order is taken, so the outcome is the same.
		assert.Equal(t, want.Minimal, got.Minimal)
		assert.Equal(t, want.Steps, got.Steps)
	}
	assert.Equal(t, 3, len(original.Faults), "the original is untouched")
}

func TestShrinkStopsAtTheDeadline(t *testing.T) {
	original := Schedule{Workload: workload.Steady(), Faults: []fault.Fault{pauseAt("relay-1", protocol.RelayAfterConfirm, 3, 5*time.Second)}}
	now := time.Unix(1000, 0)
	calls := 0
	got := Shrink(context.Background(), original, func(context.Context, Schedule) bool { calls++; now = now.Add(time.Minute); return true },
		ShrinkOptions{Deadline: time.Unix(1000, 0).Add(90 * time.Second), Now: func() time.Time { return now }})
	assert.False(t, got.Complete)
	assert.Equal(t, 2, calls, "no candidate starts after the deadline")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got = Shrink(ctx, original, fakeFails, ShrinkOptions{})
	assert.Equal(t, original, got.Minimal)
	assert.False(t, got.Complete)
}
