package scenarios

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/explore"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
)

// twoBugs is the reference with two guards removed at once, in different
// processes: the relay ignores basic.return (an event published while the
// queue is unbound is marked Published and routed nowhere: lost), and the
// consumer acks before it commits (an event received by a consumer killed
// before its commit is acked and has no effect: lost). Two lost bugs with
// different causes.
const twoBugs = "ignore-return,ack-before-commit"

// TestExploreTellsTwoLostBugsApart: explore on a pipeline with two
// independent lost bugs reports both — each its own finding, with its own
// signature, rechecked, shrunk and written to its own schedule file —
// instead of the one lost finding grouping by kind gave. The two differ by
// stage (routed nowhere, consumed without effect) when the checker gives
// stages, and in any case by what their faults touched: the unroutable
// queue for one, the consumer for the other.
func TestExploreTellsTwoLostBugsApart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real infrastructure; not in -short")
	}
	t.Parallel()
	// The orders are spread over 10 s and the bindings go after the 10th
	// for 8 s, so the relays publish into the outage however late a loaded
	// machine lets the unbind land: in CI at load 16-18, over a 2.5 s
	// workload, the unbind came after the last publish twice and the
	// ignore-return run passed.
	small := workload.Spec{Orders: 60, Concurrency: 4, Pace: 10 * time.Second}
	unbind := fault.Unbind{Trigger: fault.Trigger{AfterOrders: 10}, Duration: 8 * time.Second}
	kill := fault.Crash{Process: "consumer", Point: protocol.ConsumerAfterReceive, Action: crashpoint.Kill, Hit: 3, RestartAfter: 200 * time.Millisecond}
	items := []explore.Item{
		{Index: 0, Faults: []fault.Fault{unbind}, Size: 1},
		{Index: 1, Faults: []fault.Fault{kill}, Size: 1},
	}
	s, err := explore.SurfaceOf(tgt)
	require.NoError(t, err)
	cfg := explore.Config{
		Target: tgt.Name, Offered: explore.OfferedOf(tgt, s), Variant: twoBugs, Seed: seed, PlanTotal: len(items),
		Workload: small, Parallel: 3, Repeats: 1, Retries: 2, Budget: time.Minute, ShrinkBudget: 90 * time.Second,
		Stall: gate.VariantStall, FaultDeadline: explore.FaultDeadline(small, tgt.Lease),
		Progress: func(p explore.Progress) {
			if p.Line != "" {
				t.Logf("[%s] %s", p.Stage, p.Line)
			}
		},
	}
	started := time.Now()
	rep := explore.Explore(context.Background(), shared, items, cfg)
	t.Logf("explore of %s took %s", twoBugs, time.Since(started).Round(time.Second))
	require.Len(t, rep.Runs, 2)
	for _, r := range rep.Runs {
		// The unroutable run also breaks outbox-truth (published-unconfirmed):
		// a finding of its own kind.
		require.Contains(t, r.Violations, "lost", "run #%d (%s): %s %s", r.Index, r.Describe, r.Verdict, r.Reason)
	}

	dir := t.TempDir()
	require.NoError(t, explore.WriteAll(dir, rep))
	byRun := map[int]explore.Finding{}
	lost := 0
	for _, f := range rep.Findings {
		t.Logf("finding %s: %s; %d step(s); file %s", f.Label, f.Confirmed, len(f.Steps), f.File)
		if f.Kind != "lost" {
			continue
		}
		lost++
		require.Len(t, f.Runs, 1, f.Label)
		byRun[f.Runs[0]] = f
	}
	require.Equal(t, 2, lost, "one lost finding per bug")
	routed, consumed := byRun[0], byRun[1]
	assert.NotEqual(t, routed.Signature.Key(), consumed.Signature.Key())
	assert.True(t, routed.Signature.Unroutable, routed.Label)
	assert.NotContains(t, routed.Signature.Touched, "consumer", routed.Label)
	assert.False(t, consumed.Signature.Unroutable, consumed.Label)
	assert.Equal(t, []string{"consumer"}, consumed.Signature.Touched, consumed.Label)
	if len(routed.Signature.Stages) > 0 || len(consumed.Signature.Stages) > 0 {
		assert.NotEqual(t, routed.Signature.Stages, consumed.Signature.Stages, "stages given: the two stopped at different ones")
	}
	assert.NotEqual(t, routed.File, consumed.File, "a schedule file each")
	// The consumer's bug shrinks every time (one kill of an in-flight
	// delivery loses it). A shrinking step is kept only if its schedule
	// fails in every confirming run, so the unroutable bug, whose smaller
	// workloads may finish before the bindings go, keeps its original when
	// none did: a correct outcome, checked as such.
	assert.NotEmpty(t, consumed.Steps, "%s: shrunk", consumed.Label)
	for _, f := range []explore.Finding{routed, consumed} {
		assert.Positive(t, f.Failed, "%s: failed again when rechecked: %s", f.Label, f.Confirmed)
		if len(f.Steps) > 0 {
			assert.Less(t, f.Minimal.Workload.Orders, small.Orders, "%s: shrunk", f.Label)
		} else {
			assert.Equal(t, f.Original.Workload, f.Minimal.Workload, "%s: no smaller schedule failed every time: the original is kept", f.Label)
			assert.Equal(t, f.Original.Faults, f.Minimal.Faults, "%s: no smaller schedule failed every time: the original is kept", f.Label)
			assert.Equal(t, f.Of, f.Failed, "%s: the original failed in every confirming run: %s", f.Label, f.Confirmed)
		}
		back, err := explore.LoadSchedule(filepath.Join(dir, f.File))
		require.NoError(t, err)
		assert.Equal(t, f.Minimal, back, f.Label)
		assert.Equal(t, twoBugs, back.Variant)
		assert.FileExists(t, filepath.Join(dir, strings.TrimSuffix(f.File, ".json")+".original.json"))
	}
}
