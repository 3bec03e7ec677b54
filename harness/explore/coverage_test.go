package explore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/proxies"
)

func crashSpec(process history.Ref, point string) Spec {
	return mustSpec(fault.Crash{Process: process, Point: point, Action: "pause", Hit: 1})
}

// mustSpec is f as data; a fault that cannot be written is a broken test.
func mustSpec(f fault.Fault) Spec {
	s, err := SpecOf(f)
	if err != nil {
		panic(err)
	}
	return s
}

func TestComputeCoverage(t *testing.T) {
	s, err := SurfaceOf(testTarget())
	require.NoError(t, err)
	offered := OfferedOf(testTarget(), s)
	synced := mustSpec(fault.Toxic{Link: "relay-1.pg", Toxic: proxies.Latency{}, At: &fault.Sync{Process: "relay-1", Point: protocol.RelayAfterClaim}})
	plain := mustSpec(fault.LinkDown{Link: "consumer.amqp"})
	records := []Record{
		{Index: 0, Faults: []Spec{crashSpec("relay-1", protocol.RelayAfterConfirm)}, Hit: []bool{true}, Violations: []string{"stale-write"}},
		{Index: 1, Faults: []Spec{crashSpec("relay-2", protocol.RelayAfterConfirm)}, Hit: []bool{false}},
		{Index: 2, Faults: []Spec{synced}, Hit: []bool{true}},
		// two faults at one window, one happened: the run opened it, once
		{Index: 3, Faults: []Spec{crashSpec("relay-1", protocol.RelayAfterConfirm), crashSpec("relay-2", protocol.RelayAfterConfirm)}, Hit: []bool{false, true}, Violations: []string{"duplicate-effect", "stale-write"}},
		// a run that never got to inject: nothing opened
		{Index: 4, Faults: []Spec{plain}, Hit: []bool{false}, Verdict: result.Fail},
		{Index: 5, Faults: []Spec{plain}, Hit: []bool{true}},
	}
	cov := ComputeCoverage(offered, records)

	byWindow := map[string]WindowCoverage{}
	for _, w := range cov.Windows {
		byWindow[w.Window] = w
	}
	require.Len(t, cov.Windows, len(protocol.Windows()), "every protocol window is listed")

	confirm := byWindow[protocol.RelayAfterConfirm]
	assert.Equal(t, Counts{Runs: 3, Opened: 2, NotOpened: 1, Violations: map[string]int{"stale-write": 2, "duplicate-effect": 1}, Status: StatusOpened}, confirm.Counts)
	assert.Equal(t, []string{"dispatcher"}, confirm.By)

	claim := byWindow[protocol.RelayAfterClaim]
	assert.Equal(t, Counts{Runs: 1, Opened: 1, Status: StatusOpened}, claim.Counts, "a link fault at a window opens it")

	commit := byWindow[protocol.ConsumerAfterCommit]
	assert.Equal(t, Counts{Status: StatusUnexplored}, commit.Counts, "offered, never tried: unexplored, not safe")

	assert.Equal(t, StatusNotOffered, byWindow[protocol.ProducerAfterCommit].Status)
	assert.Equal(t, StatusNotOffered, byWindow[protocol.RelayBeforeRenew].Status)

	opened, total := cov.Covered()
	assert.Equal(t, 2, opened)
	assert.Equal(t, 3, total)

	byLink := map[string]LinkCoverage{}
	for _, l := range cov.Links {
		byLink[l.Link] = l
	}
	assert.Len(t, cov.Links, len(offered.Links))
	assert.Equal(t, Counts{Runs: 2, Opened: 1, NotOpened: 1, Status: StatusOpened}, byLink["consumer.amqp"].Counts)
	assert.Equal(t, Counts{Runs: 1, Opened: 1, Status: StatusOpened}, byLink["relay-1.pg"].Counts)
	assert.Equal(t, StatusUnexplored, byLink["producer.pg"].Status)

	// A window tried but never opened stays unexplored.
	cov = ComputeCoverage(offered, records[1:2])
	for _, w := range cov.Windows {
		if w.Window == protocol.RelayAfterConfirm {
			assert.Equal(t, Counts{Runs: 1, NotOpened: 1, Status: StatusUnexplored}, w.Counts)
		}
	}
}

func TestRecordOf(t *testing.T) {
	specs := []Spec{crashSpec("relay-1", protocol.RelayAfterConfirm), mustSpec(fault.LinkDown{Link: "consumer.pg"})}
	res := result.Scenario{Verdict: result.Fail, DurationMS: 1200,
		Faults: []result.Fault{{Hit: true}, {Hit: false, Error: "never fired"}},
		Invariants: []result.Invariant{
			{Name: "fencing", Violations: []result.Violation{{Kind: "stale-write"}, {Kind: "stale-write"}}},
			{Name: "no-duplicate", Expected: true, Violations: []result.Violation{{Kind: "duplicate-effect"}}},
			{Name: "ok", OK: true},
			{Name: "lost", Violations: []result.Violation{{Kind: "lost"}}},
		}}
	r := RecordOf(3, specs, "d", res)
	assert.Equal(t, []bool{true, false}, r.Hit)
	assert.Equal(t, []string{"", "never fired"}, r.FaultErrors)
	assert.Equal(t, []string{"lost", "stale-write"}, r.Violations, "expected violations do not count")
	assert.False(t, r.Opened())

	// A run that failed before injecting has no fault results.
	r = RecordOf(4, specs, "d", result.Scenario{Verdict: result.Fail, Reason: "workload: boom"})
	assert.Equal(t, []bool{false, false}, r.Hit)
}

// A run that failed with every fault happened and no violation ended
// without a verdict (faultline could not judge it): neither a violation
// nor a pass, nor a window not opened.
func TestUnjudged(t *testing.T) {
	specs := []Spec{crashSpec("relay-1", protocol.RelayAfterConfirm)}
	tests := []struct {
		name string
		rec  Record
		want bool
	}{
		{"pass", Record{Faults: specs, Hit: []bool{true}, Verdict: result.Pass}, false},
		{"violation", Record{Faults: specs, Hit: []bool{true}, Verdict: result.Fail, Violations: []string{"lost"}}, false},
		{"window not opened", Record{Faults: specs, Hit: []bool{false}, Verdict: result.Fail, Reason: "fault never happened"}, false},
		{"failed with every fault happened", Record{Faults: specs, Hit: []bool{true}, Verdict: result.Fail, Reason: "observe: event log line 20"}, true},
		{"not run", Record{Faults: specs, Hit: []bool{false}, Verdict: result.NotRun, Reason: "bad spec"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.rec.Unjudged())
		})
	}
	var runs []Record
	for i, idx := range []int{7, 2, 5} {
		r := tests[3].rec
		r.Index = idx
		if i == 2 {
			r = tests[0].rec
		}
		runs = append(runs, r)
	}
	var got []int
	for _, r := range Unjudged(runs) {
		got = append(got, r.Index)
	}
	assert.Equal(t, []int{2, 7}, got, "in run order, passes left out")
}
