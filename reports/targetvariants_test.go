package reports

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
)

// nodeRun is a gate run on the Node example, its variants as its own
// target file lists them (names the reference does not use): two of its
// variants were run, one caught, one missed.
func nodeRun(t *testing.T) result.Run {
	t.Helper()
	tg, err := target.Load(filepath.Join("..", "examples", "node-outbox", "faultline.yaml"))
	require.NoError(t, err)
	var tvs []result.TargetVariant
	for _, v := range tg.Variants {
		tvs = append(tvs, result.TargetVariant{Name: v.Name, Guard: v.Guard, Expect: v.Expect, CaughtBy: v.CaughtBy})
	}
	lost := invariants(result.Invariant{Name: "no-lost-event", Violations: []result.Violation{{Kind: "lost", EventIDs: []string{"01JNODELOST000000000000000"}}}})
	return result.Run{
		Schema: result.Schema, Target: tg.Name, Seed: 3, Verdict: result.Fail, TargetVariants: tvs,
		Scenarios: []result.Scenario{
			{Name: "producer-crash-after-commit", Variant: correct, Seed: 3, Window: protocol.ProducerAfterCommit, Verdict: result.Pass, Counts: counts(100), Invariants: invariants()},
			{Name: "blackbox-producer-killed-at-commit", Variant: correct, Seed: 3, Window: protocol.ProducerAfterCommit, Verdict: result.Pass, Counts: counts(100), Invariants: invariants()},
			{Name: "consumer-crash-after-commit", Variant: correct, Seed: 3, Window: protocol.ConsumerAfterCommit, Verdict: result.Pass, Counts: counts(100), Invariants: invariants()},
			{Name: "producer-crash-after-commit", Variant: "publish-after-commit", Seed: 3, Window: protocol.ProducerAfterCommit, Verdict: result.Fail, Counts: counts(100), Invariants: lost},
			{Name: "consumer-crash-after-commit", Variant: "no-inbox", Seed: 3, Window: protocol.ConsumerAfterCommit, Verdict: result.Pass, Counts: counts(100), Invariants: invariants()},
		},
		Variants: []result.Variant{
			{Name: "publish-after-commit", Expected: "lost", Caught: true, CaughtBy: []string{"producer-crash-after-commit"}, NotRun: []string{"blackbox-producer-killed-at-commit"}},
			{Name: "no-inbox", Expected: "duplicate-effect", CaughtBy: []string{}, Missed: []string{"consumer-crash-after-commit"}},
		},
	}
}

// The window table is drawn from the target's own variants: the Node
// example's names, guards and catching scenarios, each under the window
// its scenario opened; none of the reference's variants appears.
func TestWindowTableFromTargetVariants(t *testing.T) {
	run := nodeRun(t)
	ix := newIndex(run)
	kept, left := ix.offered(windowsOf(run))
	assert.Equal(t, leftOut{}, left)
	var got []string
	for _, r := range ix.windowRows(kept) {
		got = append(got, r.W.Name+" "+r.Pipeline+"/"+r.Scenario+": "+r.Outcome.Text)
		assert.NotContains(t, []string{"commit-then-publish", "no-fencing", "no-lease"}, r.Pipeline, "the reference's variants are not this target's")
	}
	assert.Equal(t, []string{
		"producer.after-commit correct/blackbox-producer-killed-at-commit: pass",
		"producer.after-commit correct/producer-crash-after-commit: pass",
		"producer.after-commit publish-after-commit/producer-crash-after-commit: caught: lost",
		"producer.after-commit publish-after-commit/blackbox-producer-killed-at-commit: not run",
		"consumer.after-commit correct/consumer-crash-after-commit: pass",
		"consumer.after-commit no-inbox/consumer-crash-after-commit: MISSED: the run passed, no duplicate-effect reported",
	}, got)
	assert.Empty(t, ix.variantNote())

	md := string(renderMarkdown(run))
	assert.Contains(t, md, "| lost (without outbox row in the order's transaction) | publish-after-commit | `producer-crash-after-commit` | ✅ caught: lost |")
	assert.Contains(t, md, "| duplicate-effect (without inbox row in the effect's transaction) | no-inbox |")
}

// Results written before the target's variants were carried draw the
// variant lines from the gate's verdicts; a target that lists none gets
// none, and a line saying so.
func TestWindowTableVariantSources(t *testing.T) {
	withList := fixtureRun()
	fromVerdicts := fixtureRun()
	fromVerdicts.TargetVariants = nil
	variantLines := func(run result.Run) []string {
		var out []string
		for _, w := range windowsOf(run) {
			if w.Variant != "" {
				out = append(out, w.Variant+"/"+w.VariantScenario)
			}
		}
		return out
	}
	assert.Subset(t, variantLines(withList), variantLines(fromVerdicts), "the gate's verdicts pair the variants with the scenarios they name")
	assert.Contains(t, variantLines(fromVerdicts), "no-inbox/relay-crash-after-confirm")

	none := nodeRun(t)
	none.TargetVariants = []result.TargetVariant{}
	none.Variants = nil
	var scenarios []result.Scenario
	for _, s := range none.Scenarios {
		if s.Variant == correct {
			scenarios = append(scenarios, s)
		}
	}
	none.Scenarios = scenarios
	assert.Empty(t, variantLines(none))
	assert.Contains(t, string(renderMarkdown(none)), "The target lists no variants: every line is of the correct pipeline.")
}
