package scenarios

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
)

// TestBlackBoxWithoutEventLog: the target as if it wrote no event log and
// offered no crash point. The black-box scenarios still open their windows
// on its correct pipeline (from the commits its tables show), its
// lost / phantom / duplicate-effect / stuck / stale-write verdicts are
// still given, each naming what it rests on, and the black-box scenarios
// alone catch commit-then-publish (lost), ack-before-commit (lost),
// no-inbox (duplicate-effect) and no-fencing (stale-write, from the audit
// trail of the outbox).
func TestBlackBoxWithoutEventLog(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real infrastructure; not in -short")
	}
	t.Parallel()
	blind := tgt.WithoutEventLogs()
	sh := shared.Reading(blind)
	var bb []runner.Scenario
	for _, sc := range All() {
		if strings.HasPrefix(sc.Name, "blackbox-") {
			bb = append(bb, sc)
		}
	}
	require.NotEmpty(t, bb)
	want := map[string]string{"commit-then-publish": "lost", "ack-before-commit": "lost", "no-inbox": "duplicate-effect", "no-fencing": "stale-write"}
	all, err := catchesIn(blind, All())
	require.NoError(t, err)
	var catches []gate.Catch
	for _, c := range all {
		if _, ok := want[c.Variant]; ok && strings.HasPrefix(c.Scenario, "blackbox-") {
			catches = append(catches, c)
		}
	}
	run, err := gate.Run(context.Background(), sh, gate.Plan{Scenarios: bb, Catches: catches, Seeds: []int64{seed}, Parallel: 6, Retries: retries,
		Progress: func(done, total int, res result.Scenario) {
			t.Logf("no event log [%d/%d] %s on %s: %s (%s)", done, total, res.Name, res.Variant, res.Verdict, res.Reason)
		}})
	require.NoError(t, err)
	for _, r := range run.Scenarios {
		if r.Variant != "correct" {
			continue
		}
		if r.Verdict == result.NotRun && strings.Contains(r.Reason, "not offered") {
			continue // a window of another relay model (a log relay's)
		}
		assert.Equal(t, correctVerdict(r.Name), r.Verdict, "%s without an event log: %s", r.Name, r.Reason)
		for _, inv := range r.Invariants {
			switch inv.Name {
			case check.NoLost, check.NoPhantom, check.NoDuplicate, check.OutboxTruth, check.Fencing:
				assert.False(t, inv.NotChecked, "%s: %s not checked: %s", r.Name, inv.Name, inv.Detail)
				assert.NotEmpty(t, inv.RestsOn, "%s: %s rests on nothing", r.Name, inv.Name)
			}
			if inv.Name == check.Fencing {
				assert.Equal(t, []string{check.FromAudit}, inv.RestsOn, "%s: fencing without an event log rests on the audit trail", r.Name)
			}
		}
	}
	for _, v := range run.Variants {
		assert.True(t, v.Caught, "without an event log, variant %s was not caught with %s by %v", v.Name, want[v.Name], v.Missed)
		assert.Equal(t, want[v.Name], v.Expected, v.Name)
	}
	assert.Len(t, run.Variants, len(want))
}

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
