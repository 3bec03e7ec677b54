package scenarios

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"faultline/harness/gate"
	"faultline/harness/result"
	"faultline/harness/supervisor"
	"faultline/harness/target"
)

// TestRenamedTargetPassesTheGate: a copy of the reference with its tables
// and columns renamed, described only by its own target file, passes the
// same gate (every scenario on its correct pipeline, every variant caught):
// faultline reads nothing of a pipeline but its target file.
func TestRenamedTargetPassesTheGate(t *testing.T) {
	if testing.Short() {
		t.Skip("the gate needs the real infrastructure; not in -short")
	}
	renamed, err := target.Load(filepath.Join("testdata", "renamed", "faultline.yaml"))
	require.NoError(t, err)
	cleanup := supervisor.NewCleanup()
	t.Cleanup(func() { _ = cleanup.Run(context.Background()) })
	sh, err := shared.WithTarget(context.Background(), renamed, cleanup)
	require.NoError(t, err)
	catches, err := gate.CatchesOf(renamed, All())
	require.NoError(t, err)
	run, err := gate.Run(context.Background(), sh, gate.Plan{Scenarios: All(), Catches: catches, Seeds: []int64{seed}, Parallel: 8,
		Progress: func(done, total int, res result.Scenario) {
			if res.Verdict != result.Pass || res.Variant != "correct" {
				t.Logf("renamed [%d/%d] %s on %s: %s (%s)", done, total, res.Name, res.Variant, res.Verdict, res.Reason)
			}
		}})
	require.NoError(t, err)
	for _, r := range run.Scenarios {
		if r.Variant == "correct" {
			assert.Equal(t, result.Pass, r.Verdict, "renamed target, %s: %s", r.Name, r.Reason)
		}
	}
	for _, v := range run.Variants {
		assert.True(t, v.Caught, "renamed target: variant %s was not caught with a %s violation by %v", v.Name, v.Expected, v.Missed)
	}
	t.Logf("renamed target: %d runs, pass=%t, in %s", len(run.Scenarios), run.Pass, time.Duration(run.DurationMS)*time.Millisecond)
}
