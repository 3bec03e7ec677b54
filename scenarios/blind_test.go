package scenarios

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
)

// blindRanAtLeast is how many scenarios of the catalogue run on the blind
// reference today: every one but the three that freeze or kill a relay
// just before its retry or its renewal, moments only a crash point shows.
// At least 80% of the catalogue must run in any case.
const blindRanAtLeast = 36

// TestBlindReferenceRunsTheCatalogue: the gate on the reference pipeline
// as a team that speaks none of the protocol would describe it — no crash
// point mapped, no event log (testdata/blind-reference). The producer's
// and the consumer's crash windows open from outside (a commit seen, a
// transaction held at its COMMIT and its backend terminated, the broker's
// unacked count), the evidence read from event logs is read from the
// broker, the tap queue and the audit trail instead, and:
//   - the correct pipeline passes every scenario that runs, and no run's
//     fault ends "never happened";
//   - each scenario not run says why;
//   - the variants caught only by those crash windows are caught by the
//     windows opened from outside: publish-then-commit and
//     outbox-own-transaction (phantom),
//     inbox-own-transaction and commit-error-ignored (lost),
//     commit-error-answered (fact-lost), no-lease
//     (stuck-row) and no-fencing (stale-write, from the audit trail);
//     ack-before-commit (lost) by the black-box cut made once a
//     transaction of the consumer's is under way;
//   - the black-box scenarios alone catch commit-then-publish (lost),
//     ack-before-commit (lost), no-inbox (duplicate-effect), no-fencing
//     (stale-write) and lease-ignored (live-claim-taken), and on the
//     correct pipeline their lost / phantom / duplicate-effect / stuck /
//     stale-write / live-claim-taken verdicts are given, each naming what
//     it rests on (fencing: the audit trail of the outbox).
//
// The blind reference is the reference as target.WithoutEventLogs makes
// it; one gate covers both, so the suite runs each black-box scenario on
// such a pipeline once.
func TestBlindReferenceRunsTheCatalogue(t *testing.T) {
	if testing.Short() {
		t.Skip("the gate needs the real infrastructure; not in -short")
	}
	t.Parallel()
	blind, err := target.Load(filepath.Join("testdata", "blind-reference", "faultline.yaml"))
	require.NoError(t, err)
	cleanup := supervisor.NewCleanup()
	t.Cleanup(func() { _ = cleanup.Run(context.Background()) })
	sh, err := shared.WithTarget(context.Background(), blind, cleanup)
	require.NoError(t, err)

	// variant → the scenarios that must catch it here.
	openedFromOutside := map[string][]string{
		"publish-then-commit": {"producer-crash-before-commit"},
		// Its outbox row committed before the fact's COMMIT, held there
		// and aborted (a kill, or the backend terminated).
		"outbox-own-transaction": {"producer-crash-before-commit", "producer-db-cut-during-commit"},
		"inbox-own-transaction":  {"consumer-crash-before-commit"},
		// Not consumer-crash-after-receive: opened from outside, its cut
		// comes at a trigger and its kill once deliveries are held
		// unacked; a consumer that acks before its COMMIT loses something
		// only if a transaction of its was between its ack and its COMMIT
		// when the cut landed (in one hogged CI none was, and nothing was
		// lost). blackbox-consumer-db-cut-with-deliveries cuts once such a
		// transaction is seen under way, and says so.
		"ack-before-commit":    {"blackbox-consumer-db-cut-with-deliveries"},
		"commit-error-ignored": {"consumer-db-cut-during-commit"},
		// A COMMIT the producer sent, held and cut: facts-kept, from the
		// workload's answers and the facts table.
		"commit-error-answered": {"producer-db-cut-during-commit"},
		"no-lease":              {"relay-crash-after-claim"},
		// Not relay-pause-past-lease: opened from outside, its freeze
		// lands at the commit of relay-1's claim, before its publish, and
		// on the thaw the relay's lease renewal (a guard no-fencing keeps)
		// learns the claim was taken before the relay's Published write
		// goes out, so nothing stale is written (5 of 5 seeds passed it).
		// relay-db-slow-past-lease holds that write back past the lease.
		"no-fencing": {"relay-db-slow-past-lease", "blackbox-relay-db-slow-past-lease"},
		// Caught by the black-box scenarios alone.
		"commit-then-publish": {"blackbox-producer-killed-at-commit"},
		"no-inbox":            {"blackbox-relay-confirmed-not-marked", "blackbox-consumer-acks-dropped"},
		// lease-kept reads the audit trail alone.
		"lease-ignored": {"blackbox-relay-frozen-past-lease"},
	}
	all, err := catchesIn(blind, All())
	require.NoError(t, err)
	var catches []gate.Catch
	wanted := 0
	for _, scs := range openedFromOutside {
		wanted += len(scs)
	}
	for _, c := range all {
		if slices.Contains(openedFromOutside[c.Variant], c.Scenario) {
			catches = append(catches, c)
		}
	}
	require.Len(t, catches, wanted, "every catch this test names is declared in the blind reference's target file")

	run, err := gate.Run(context.Background(), sh, gate.Plan{Scenarios: All(), Catches: catches, Seeds: []int64{seed}, Parallel: 8, Retries: retries,
		Progress: func(done, total int, res result.Scenario) {
			if !res.Passed() || res.Variant != "correct" {
				t.Logf("blind [%d/%d] %s on %s: %s (%s)", done, total, res.Name, res.Variant, res.Verdict, res.Reason)
			}
		}})
	require.NoError(t, err)

	ran, blackBoxRan := 0, 0
	var notRun []string
	for _, r := range run.Scenarios {
		if r.Variant != "correct" {
			continue
		}
		if r.Verdict == result.NotRun {
			assert.NotEmpty(t, r.Reason, "%s not run without a reason", r.Name)
			notRun = append(notRun, r.Name+": "+r.Reason)
			continue
		}
		ran++
		assert.Equal(t, correctVerdict(r.Name), r.Verdict, "%s on the blind reference: %s", r.Name, r.Reason)
		assert.NotContains(t, r.Reason, "never happened", r.Name)
		for _, f := range r.Faults {
			if !f.Optional {
				assert.True(t, f.Hit, "%s: fault %s %s never happened: %s", r.Name, f.Kind, f.Target, f.Error)
			}
		}
		if strings.HasPrefix(r.Name, "blackbox-") {
			blackBoxRan++
			for _, inv := range r.Invariants {
				switch inv.Name {
				case check.NoLost, check.NoPhantom, check.NoDuplicate, check.OutboxTruth, check.Fencing, check.LeaseKept:
					assert.False(t, inv.NotChecked, "%s: %s not checked: %s", r.Name, inv.Name, inv.Detail)
					assert.NotEmpty(t, inv.RestsOn, "%s: %s rests on nothing", r.Name, inv.Name)
				}
				if inv.Name == check.Fencing {
					assert.Equal(t, []string{check.FromAudit}, inv.RestsOn, "%s: fencing without an event log rests on the audit trail", r.Name)
				}
			}
		}
	}
	assert.NotZero(t, blackBoxRan, "no black-box scenario ran on the blind reference")
	for _, r := range run.Retried {
		t.Logf("retried: %s on %s attempt %d: %s (%s)", r.Name, r.Variant, r.Attempt, r.Verdict, r.Reason)
	}
	for _, v := range run.Variants {
		assert.True(t, v.Caught, "variant %s not caught with %s from outside by %v", v.Name, v.Expected, v.Missed)
	}
	assert.Len(t, run.Variants, len(openedFromOutside))
	total := len(All())
	t.Logf("blind reference: %d of %d scenarios ran (%d%%), %d not run, in %s:\n  %s", ran, total, 100*ran/total, len(notRun),
		time.Duration(run.DurationMS)*time.Millisecond, strings.Join(notRun, "\n  "))
	assert.GreaterOrEqual(t, ran, blindRanAtLeast, "scenarios run on the blind reference")
	assert.GreaterOrEqual(t, 100*ran, 80*total, "at least 80%% of the catalogue runs on a target that speaks no protocol")
}
