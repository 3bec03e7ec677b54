package scenarios

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
)

// TestCommitOrderInversion: outbox inserts are held at their commit while
// later ones commit first. Relays that claim rows by their status — the
// reference's and the Node example's — publish every one (pass, with the
// inversion shown by the fault); reads-by-id, whose relay reads past the
// last id it saw, is caught losing a row the fault held.
func TestCommitOrderInversion(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real infrastructure; not in -short")
	}
	t.Parallel()
	sc, err := Lookup("blackbox-outbox-commit-order")
	require.NoError(t, err)
	node, err := target.Load(filepath.Join("..", "examples", "node-outbox", "faultline.yaml"))
	require.NoError(t, err)
	cleanup := supervisor.NewCleanup()
	t.Cleanup(func() { _ = cleanup.Run(context.Background()) })
	onNode, err := shared.WithTarget(context.Background(), node, cleanup)
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		sh      *runner.Shared
		variant string // "": the correct pipeline, which must pass
	}{
		{"reference", shared, ""},
		{"reference/reads-by-id", shared, "reads-by-id"},
		{"node-outbox", onNode, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := runner.Options{Seed: seed, Variant: tc.variant}
			if tc.variant != "" {
				// its lost rows stay Pending: the gate's bound, not 45 s
				opts.Stall = gate.VariantStall
			}
			// A variant's lost rows are tied to the held ones only where the
			// window opened (every relay seen past a held insert): an
			// attempt in which it did not is run again, as an
			// indeterminate one is.
			res := runRetryingUntil(t, tc.sh, sc, opts, func(res result.Scenario) string {
				if tc.variant != "" && res.Verdict != result.Indeterminate && len(res.Faults) == 1 && !res.Faults[0].Hit {
					return fmt.Sprintf("%s, but the commit-order window did not open (%s)", res.Verdict, res.Faults[0].Error)
				}
				return indeterminate(res)
			})
			require.Len(t, res.Faults, 1)
			held := res.Faults[0].EventIDs
			if tc.variant == "" {
				require.Equal(t, result.Pass, res.Verdict, res.Reason)
				assert.True(t, res.Faults[0].Hit)
				assert.NotEmpty(t, held, "a held insert saw a later one committed first")
				return
			}
			require.True(t, res.Caught("lost"), "%s not caught with lost: %s %s", tc.variant, res.Verdict, res.Reason)
			var lost []string
			for _, v := range res.Violations() {
				if v.Kind == "lost" {
					lost = append(lost, v.EventIDs...)
				}
			}
			assert.True(t, slices.ContainsFunc(held, func(id string) bool { return slices.Contains(lost, id) }),
				"a row the fault held is among the lost: held %v, lost %v", held, lost)
		})
	}
}
