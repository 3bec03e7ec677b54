package scenarios

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
)

// TestLostEventStages: each run is built to stop its events at one stage,
// and the checker places every event that took no effect there. Events
// still queued or still in the outbox are the run not converging, never
// lost; the other stages are lost.
func TestLostEventStages(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real infrastructure; not in -short")
	}
	t.Parallel()
	lookup := func(name string) runner.Scenario {
		sc, err := Lookup(name)
		require.NoError(t, err)
		return sc
	}
	// The consumer is killed at its third batch and never comes back: the
	// relays publish on and the rest waits in the queue. Each case's wait
	// ends once its pipeline stands still (runner.Options.Stall, as a
	// gate's variants), not after a fixed time: whatever is still moving
	// then (the relays settling the outbox, the consumer draining the
	// queue) has finished however slow the machine, and only the stage the
	// case is about is left.
	consumerDown := runner.Scenario{
		Name: "stage-consumer-kept-down", Window: "consumer down for good",
		Workload: steady(), Converge: time.Minute,
		Faults: func(*rand.Rand) []fault.Fault {
			return []fault.Fault{fault.Crash{Process: "consumer", Point: protocol.ConsumerAfterReceive, Action: crashpoint.Kill, Hit: 3, NoRestart: true}}
		},
	}
	for _, tc := range []struct {
		name    string
		sc      runner.Scenario
		variant string
		opts    runner.Options
		verdict string
		// the stage every event without effect stopped at, and the kind
		// of the no-lost-event violation that lists them
		stage result.Stage
		kind  string
		// blind: the target as if it wrote no event log (the stages rest
		// on the tap queue and the audit trail)
		blind bool
	}{
		{"a consumer kept down: still queued, not converged", consumerDown, "", runner.Options{Stall: gate.VariantStall}, result.Indeterminate, result.StageQueued, "not-converged", false},
		{"a relay killed holding claims without a lease: still in the outbox", lookup("relay-crash-after-claim"), "no-lease",
			runner.Options{Stall: gate.VariantStall}, result.Fail, result.StageInOutbox, "not-converged", false},
		{"returns ignored while the queue stays unbound: routed nowhere", lookup("unroutable-budget-exhausted"), "ignore-return",
			runner.Options{}, result.Fail, result.StageRoutedNowhere, "lost", false},
		{"without event logs, returns ignored while the queue is unbound: routed nowhere", lookup("blackbox-unroutable-then-routable"), "ignore-return",
			runner.Options{}, result.Fail, result.StageRoutedNowhere, "lost", true},
		{"acked before the commit, the consumer killed: consumed without effect", lookup("consumer-crash-after-receive"), "ack-before-commit",
			runner.Options{}, result.Fail, result.StageConsumedNoEffect, "lost", false},
		{"a relay reading by id past rows held at their commit: skipped", lookup("blackbox-outbox-commit-order"), "reads-by-id",
			runner.Options{Stall: gate.VariantStall}, result.Fail, result.StageSkipped, "lost", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := tc.opts
			opts.Seed, opts.Variant = seed, tc.variant
			sh := shared
			if tc.blind {
				sh = readAs(t, shared, tgt.WithoutEventLogs())
			}
			var res result.Scenario
			if tc.verdict == result.Indeterminate {
				res = sh.Run(context.Background(), tc.sc, opts)
				report(t, res)
			} else {
				// A run meant to decide is run again while it does not
				// (the infrastructure erred), or while its window did not
				// open: a broken variant can fail without it (a reads-by-id
				// relay leaves rows unsettled whatever happens), and the
				// stage is what the test is about.
				res = runRetryingUntil(t, sh, tc.sc, opts, unopened)
			}
			if res.Dir != "" {
				// Kept because the correct pipeline did not converge, as
				// this run is built to: kept only if the test fails.
				t.Cleanup(func() {
					if !t.Failed() {
						_ = os.RemoveAll(res.Dir)
					}
				})
			}
			require.Equal(t, tc.verdict, res.Verdict, res.Reason)
			var noLost result.Invariant
			for _, inv := range res.Invariants {
				if inv.Name == check.NoLost {
					noLost = inv
				}
			}
			require.False(t, noLost.OK, "events without effect: %s", noLost.Detail)
			require.Len(t, noLost.Violations, 1, "one violation, of one kind: %+v", noLost.Violations)
			v := noLost.Violations[0]
			assert.Equal(t, tc.kind, v.Kind)
			assert.Equal(t, []result.Stage{tc.stage}, slices.Collect(maps.Keys(v.Stages)), "every event at one stage: %v", stageSummary(v))
			missing := res.Counts.Events - res.Counts.Reservations
			assert.Len(t, v.Stages[tc.stage], missing, "every event without effect is placed, none left out by the report's cap")
			assert.Equal(t, tc.stage.Unconverged(), noLost.Unconverged)
			assert.Equal(t, tc.kind == "lost", res.HasViolation("lost"), "lost only outside the unconverged stages")
			if tc.verdict == result.Indeterminate {
				assert.Contains(t, res.Reason, "did not converge: ")
			}
			if tc.stage == result.StageInOutbox {
				assert.True(t, res.HasViolation("stuck-row"), "a claim model's stuck row still fails the run")
			}
		})
	}
}

// stageSummary is one line per stage of a violation, in pipeline order:
// the stage, how many events stopped there, and their eventIds.
func stageSummary(v result.Violation) []string {
	var out []string
	for _, st := range result.Stages() {
		if ids := v.Stages[st]; len(ids) > 0 {
			out = append(out, fmt.Sprintf("%s %d: %s", st, len(ids), strings.Join(ids, ", ")))
		}
	}
	return out
}

// unopened says why res cannot show its window's stage: it is
// indeterminate, or a fault it rests on did not happen ("" if neither).
func unopened(res result.Scenario) string {
	if why := indeterminate(res); why != "" {
		return why
	}
	return strings.Join(res.Unopened(), "; ")
}
