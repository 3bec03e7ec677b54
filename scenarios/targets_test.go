package scenarios

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
)

// TestOtherTargetsPassTheGate: pipelines faultline did not write the way
// it wrote the reference pass the same gate — every scenario each can take
// passes on its correct pipeline, every variant it lists is caught — reached
// only through their target files:
//
//   - renamed: a copy of the reference with its tables and columns
//     renamed, described only by its own target file;
//   - node-outbox: the article's pipeline written again in Node.js, with
//     crash points at three windows only and five broken variants.
func TestOtherTargetsPassTheGate(t *testing.T) {
	if testing.Short() {
		t.Skip("the gate needs the real infrastructure; not in -short")
	}
	for _, path := range []string{
		filepath.Join("testdata", "renamed", "faultline.yaml"),
		filepath.Join("..", "examples", "node-outbox", "faultline.yaml"),
	} {
		other, err := target.Load(path)
		require.NoError(t, err)
		t.Run(other.Name, func(t *testing.T) { gateOf(t, other) })
	}
}

func gateOf(t *testing.T, other *target.Target) {
	cleanup := supervisor.NewCleanup()
	t.Cleanup(func() { _ = cleanup.Run(context.Background()) })
	sh, err := shared.WithTarget(context.Background(), other, cleanup)
	require.NoError(t, err)
	catches, err := gate.CatchesOf(other, All())
	require.NoError(t, err)
	run, err := gate.Run(context.Background(), sh, gate.Plan{Scenarios: All(), Catches: catches, Seeds: []int64{seed}, Parallel: 8, Retries: retries,
		Progress: func(done, total int, res result.Scenario) {
			if res.Verdict != result.Pass || res.Variant != "correct" {
				t.Logf("%s [%d/%d] %s on %s: %s (%s)", other.Name, done, total, res.Name, res.Variant, res.Verdict, res.Reason)
			}
		}})
	require.NoError(t, err)
	ran := 0
	for _, r := range run.Scenarios {
		if r.Variant == "correct" && r.Verdict != result.NotRun {
			ran++
			assert.Equal(t, result.Pass, r.Verdict, "%s, %s: %s", other.Name, r.Name, r.Reason)
		}
	}
	assert.NotZero(t, ran, "%s: no scenario could run", other.Name)
	for _, v := range run.Variants {
		assert.True(t, v.Caught, "%s: variant %s was not caught with a %s violation by %v", other.Name, v.Name, v.Expected, v.Missed)
	}
	assert.True(t, run.Pass, "%s: the gate did not pass", other.Name)
	t.Logf("%s: %d runs (%d of the catalogue ran on its correct pipeline), pass=%t, in %s", other.Name, len(run.Scenarios), ran, run.Pass, time.Duration(run.DurationMS)*time.Millisecond)
}
