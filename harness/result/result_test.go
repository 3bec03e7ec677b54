package result

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A variant run is caught by the violation its missing guard causes (any
// violation when none is named); a run that failed otherwise — its window
// never opened, an error — caught nothing.
func TestCaught(t *testing.T) {
	stale := Invariant{Name: "fencing", Violations: []Violation{{Kind: "stale-write"}}}
	expected := Invariant{Name: "no-duplicate", Expected: true, Violations: []Violation{{Kind: "duplicate-effect"}}}
	tests := []struct {
		name string
		run  Scenario
		kind string
		want bool
	}{
		{"the expected kind", Scenario{Verdict: Fail, Invariants: []Invariant{stale}}, "stale-write", true},
		{"another kind", Scenario{Verdict: Fail, Invariants: []Invariant{stale}}, "lost", false},
		{"any violation, none named", Scenario{Verdict: Fail, Invariants: []Invariant{stale}}, "", true},
		{"a window that never opened, none named", Scenario{Verdict: Fail, Reason: "fault never happened: pause relay-1 relay.before-renew"}, "", false},
		{"only a violation the scenario exists to show", Scenario{Verdict: Fail, Invariants: []Invariant{expected}}, "", false},
		{"a pass", Scenario{Verdict: Pass}, "", false},
		{"not run", Scenario{Verdict: NotRun}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.run.Caught(tc.kind))
		})
	}
}

// TestJudge: a violation fails a run whatever else happened; an error, a
// fault that never happened or evidence not seen leaves it indeterminate;
// random faults may each miss, not all.
func TestJudge(t *testing.T) {
	hit := Fault{Kind: "crash", Target: "relay-1", Hit: true}
	missed := Fault{Kind: "crash", Target: "relay-2", Detail: "relay.after-confirm kill@1"}
	optional := missed
	optional.Optional = true
	lost := Invariant{Name: "no lost event", Violations: []Violation{{Kind: "lost"}}}
	held := Invariant{Name: "no lost event", OK: true}
	unseen := Evidence{Name: "relay-1 was killed"}
	notUndone := Fault{Kind: "link-down", Target: "consumer.pg", Hit: true, UndoError: "link up: connection refused"}
	pending := Invariant{Name: "no lost event", Unconverged: true, Violations: []Violation{{Kind: "not-converged",
		Stages: map[Stage][]string{StageQueued: {"E1", "E2"}, StageInOutbox: {"E3"}}}}}
	timedOut := Invariant{Name: "converged", Unconverged: true, Detail: "not converged after 5s"}
	cases := []struct {
		name   string
		s      Scenario
		err    error
		want   string
		reason string
	}{
		{"all held", Scenario{Faults: []Fault{hit}, Invariants: []Invariant{held}}, nil, Pass, ""},
		{"violation", Scenario{Faults: []Fault{hit}, Invariants: []Invariant{lost}}, nil, Fail, "invariant broken: no lost event"},
		{"violation beats a fault not hit", Scenario{Faults: []Fault{missed}, Invariants: []Invariant{lost}}, nil, Fail, "invariant broken"},
		{"violation beats an error", Scenario{Invariants: []Invariant{lost}}, errors.New("observe: boom"), Fail, "invariant broken"},
		{"error", Scenario{Faults: []Fault{hit}}, errors.New("workload: connection refused"), Indeterminate, "connection refused"},
		{"fault never happened", Scenario{Faults: []Fault{missed}, Invariants: []Invariant{held}, Evidence: []Evidence{unseen}}, nil, Indeterminate, "fault never happened: crash relay-2"},
		{"evidence missing, every fault done", Scenario{Faults: []Fault{hit}, Invariants: []Invariant{held}, Evidence: []Evidence{unseen}}, nil, Indeterminate, "window not shown: evidence not seen: relay-1 was killed"},
		{"evidence missing beside a violation", Scenario{Faults: []Fault{hit}, Invariants: []Invariant{lost}, Evidence: []Evidence{unseen}}, nil, Fail, "evidence not seen"},
		{"an optional fault may miss", Scenario{Faults: []Fault{hit, optional}, Invariants: []Invariant{held}}, nil, Pass, ""},
		{"not every optional fault", Scenario{Faults: []Fault{optional, optional}, Invariants: []Invariant{held}}, nil, Indeterminate, "none of the 2 faults drawn happened"},
		{"a link not restored: indeterminate, its violations the harness's", Scenario{Faults: []Fault{notUndone}, Invariants: []Invariant{lost}}, nil, Indeterminate, "fault not undone: link-down consumer.pg: link up: connection refused"},
		{"a link not restored, the invariants held", Scenario{Faults: []Fault{hit, notUndone}, Invariants: []Invariant{held}}, nil, Indeterminate, "fault not undone: link-down consumer.pg"},
		{"not converged: indeterminate, with what is still on its way", Scenario{Faults: []Fault{hit}, Invariants: []Invariant{timedOut, pending}}, nil, Indeterminate,
			"did not converge: 2 still-queued, 1 still-in-outbox (converged: not converged after 5s; no lost event)"},
		{"not converged beside a violation: a fail", Scenario{Faults: []Fault{hit}, Invariants: []Invariant{timedOut, lost}}, nil, Fail, "invariant broken: no lost event"},
		{"a fault never happened says more than not converged", Scenario{Faults: []Fault{missed}, Invariants: []Invariant{pending}}, nil, Indeterminate, "fault never happened"},
		{"an expected break is no violation", Scenario{Faults: []Fault{hit}, Invariants: []Invariant{{Name: "retention", Expected: true}}}, nil, Limit, "documented limit: retention"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, reason := c.s.Judge(Ending{Err: c.err})
			assert.Equal(t, c.want, got)
			assert.Contains(t, reason, c.reason)
		})
	}
}

// How a run ended comes before what it recorded: a harness panic, an
// interrupt or a process left down makes it indeterminate even beside a
// violation.
func TestJudgeEnding(t *testing.T) {
	lost := Scenario{Faults: []Fault{{Kind: "crash", Hit: true}}, Invariants: []Invariant{{Name: "no lost event", Violations: []Violation{{Kind: "lost"}}}}}
	for _, c := range []struct {
		name   string
		end    Ending
		want   string
		reason string
	}{
		{"recorded", Ending{}, Fail, "invariant broken"},
		{"harness panic", Ending{Err: errors.New("panic in run: boom"), HarnessPanic: true}, Indeterminate, "boom"},
		{"interrupted", Ending{Err: errors.New("signal"), Interrupted: true}, Indeterminate, Interrupted + ": signal"},
		{"a process down", Ending{Err: errors.New("process inventory is down"), Down: true}, Indeterminate, "process inventory is down"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, reason := lost.Judge(c.end)
			assert.Equal(t, c.want, got)
			assert.Contains(t, reason, c.reason)
		})
	}
}

// Each combination of an invariant's wire fields reads as one outcome.
func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		inv  Invariant
		want Outcome
	}{
		{Invariant{OK: true}, OutcomeHeld},
		{Invariant{}, OutcomeBroken},
		{Invariant{Expected: true}, OutcomeLimit},
		{Invariant{NotChecked: true}, OutcomeNotChecked},
		{Invariant{Unconverged: true}, OutcomeNotConverged},
		{Invariant{Expected: true, Unconverged: true}, OutcomeLimit},
	} {
		assert.Equal(t, c.want, c.inv.Outcome(), "%+v", c.inv)
	}
}

// A run that did not converge reported no violation the gate may count as
// a catch.
func TestUnconvergedIsNoCatch(t *testing.T) {
	pending := Invariant{Name: "no-lost-event", Unconverged: true, Violations: []Violation{{Kind: "not-converged",
		Stages: map[Stage][]string{StageQueued: {"E1", "E2"}}}}}
	s := Scenario{Verdict: Indeterminate, Invariants: []Invariant{pending}}
	assert.Empty(t, s.UnexpectedViolations())
	assert.Empty(t, s.Broken())
	assert.False(t, s.Caught(""))
}

// A fault's waits survive results.json as they were recorded, in
// milliseconds, and a fault that waited for nothing writes no waits key.
func TestWaitsRoundTrip(t *testing.T) {
	f := Fault{Kind: "pause", Target: "relay-1", Hit: true, Waits: []Wait{
		{Cause: "another relay to take relay-1's claim over", Seen: true, TookMS: 1340, BoundMS: 8000, Detail: "relay-2 took E1 over"},
		{Cause: "relay-1's sockets to have nothing left unsent", TookMS: 30000, BoundMS: 30000, Detail: "not within 30s"},
	}}
	b, err := json.Marshal(f)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"waits":[{"cause":"another relay to take relay-1's claim over","seen":true,"took_ms":1340,"bound_ms":8000,"detail":"relay-2 took E1 over"}`)
	var back Fault
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, f, back)

	b, err = json.Marshal(Fault{Kind: "crash"})
	require.NoError(t, err)
	assert.NotContains(t, string(b), "waits")
}

// A wait reads as one line: how long against its bound, what for, and
// whether it was seen; one that ran to its bound says so.
func TestWaitLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    Wait
		want string
	}{
		{"seen", Wait{Cause: "relay-2 to take the row over", Seen: true, TookMS: 1300, BoundMS: 5000, Detail: "relay-2 took E1 over"},
			"waited 1.3 s (at most 5 s) for relay-2 to take the row over — seen: relay-2 took E1 over"},
		{"bound reached", Wait{Cause: "a relay to be nacked", TookMS: 5012, BoundMS: 5000, Detail: "none seen in 5s"},
			"waited 5 s (at most 5 s) for a relay to be nacked — not seen: bound reached: none seen in 5s"},
		{"ended before its bound", Wait{Cause: "every relay to be past held insert #4 (E4) before its commit", TookMS: 40, BoundMS: 5000, Detail: "2 of the target's sessions waited for it"},
			"waited 40 ms (at most 5 s) for every relay to be past held insert #4 (E4) before its commit — not seen: 2 of the target's sessions waited for it"},
		{"no bound of its own", Wait{Cause: "the cluster to be whole again", Seen: true, TookMS: 12345},
			"waited 12.3 s for the cluster to be whole again — seen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.w.Line())
		})
	}
	s := Scenario{Faults: []Fault{{Waits: []Wait{{Cause: "a", Seen: true, TookMS: 1}}}, {}, {Waits: []Wait{{Cause: "b", TookMS: 2, BoundMS: 2}}}}}
	assert.Equal(t, []string{"waited 1 ms for a — seen", "waited 2 ms (at most 2 ms) for b — not seen: bound reached"}, s.WaitLines())
}

// A documented limit's notes are applied to a copy: an excused break
// becomes a limit with its words, an excuse of one that held changes
// nothing, and a note that excuses nothing still says why.
func TestAnnotated(t *testing.T) {
	invs := []Invariant{{Name: "no-duplicate-effect", Detail: "1 extra"}, {Name: "no-lost-event", OK: true}, {Name: "facts-kept", Detail: "1 gone"}}
	got := Annotated(invs, []Note{
		{Invariant: "no-duplicate-effect", Excused: true, Says: "expected: replay after the retention"},
		{Invariant: "no-lost-event", Excused: true, Says: "expected: never"},
		{Invariant: "facts-kept", Says: "not excused: commits not watched"},
	})
	assert.Equal(t, OutcomeLimit, got[0].Outcome())
	assert.Equal(t, "1 extra (expected: replay after the retention)", got[0].Detail)
	assert.Equal(t, Invariant{Name: "no-lost-event", OK: true}, got[1])
	assert.Equal(t, OutcomeBroken, got[2].Outcome())
	assert.Equal(t, "1 gone (not excused: commits not watched)", got[2].Detail)
	assert.Equal(t, OutcomeBroken, invs[0].Outcome(), "the checks' own results are left as they were")
}
