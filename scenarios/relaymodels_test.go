package scenarios

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/target"
)

// asRelay is the reference, with no event log, as faultline would see it
// if its target file said its relay had another model: no status or claim
// column watched, an outbox query without status, and for offset its
// outbox table as the "position" (each relay write there is a mark) with a
// pending query. The relay itself is unchanged (it claims), so what a
// re-timed window does to it can be judged.
func asRelay(t *target.Target, model string) *target.Target {
	c := *t.WithoutEventLogs()
	c.Relay = target.Relay{Model: model}
	c.Observe.Outbox.Status, c.Observe.Outbox.Claim, c.Observe.Outbox.Statuses = "", "", nil
	c.Contract.Outbox = &target.Query{Database: "orders", SQL: "SELECT event_id, aggregate_id, sequence FROM outbox_messages"}
	if model == history.ModelOffset {
		c.Relay.Position = &target.Table{Database: "orders", Name: "outbox_messages"}
		c.Contract.Pending = &target.Query{Database: "orders", SQL: "SELECT event_id FROM outbox_messages WHERE status IN ('Pending', 'Processing')"}
	}
	return &c
}

// The five black-box relay scenarios on each relay model: as written on a
// claim relay (and where no model is said but the outbox has a status),
// re-timed where the model has the moment, and not offered, with the
// reason, where it has not.
func TestBlackBoxRelayScenariosFollowTheModel(t *testing.T) {
	const (
		asWritten = "as written"
		mark      = history.TablePosition
		publish   = history.TablePublish
	)
	notStatus := asRelay(tgt, "")
	claim, offset, log := asRelay(tgt, history.ModelClaim), asRelay(tgt, history.ModelOffset), asRelay(tgt, history.ModelLog)
	claim.Observe.Outbox = tgt.Observe.Outbox
	// A relay held up past a lease is one of the target's instances: the
	// others carry on, or wait on the group's lock, meanwhile.
	pastLease := map[string]bool{"blackbox-relay-frozen-past-lease": true, "blackbox-relay-db-slow-past-lease": true}
	// scenario → target → the table its window is timed by, asWritten, or
	// "not offered: <words of the reason>"
	wants := map[string]map[*target.Target]string{
		"blackbox-relay-killed-at-claim":      {tgt: asWritten, claim: asWritten, offset: mark, log: "not offered: the start of a batch is not seen", notStatus: "not offered: the start of a batch is not seen"},
		"blackbox-relay-frozen-past-lease":    {tgt: asWritten, claim: asWritten, offset: mark, log: "not offered: no lease", notStatus: "not offered: no lease"},
		"blackbox-relay-db-slow-past-lease":   {tgt: asWritten, claim: asWritten, offset: mark, log: "not offered: no lease", notStatus: "not offered: no lease"},
		"blackbox-relay-confirmed-not-marked": {tgt: asWritten, claim: asWritten, offset: publish, log: publish, notStatus: publish},
		"blackbox-relay-answers-lost":         {tgt: asWritten, claim: asWritten, offset: publish, log: publish, notStatus: publish},
	}
	for scenario, byTarget := range wants {
		sc, err := Lookup(scenario)
		require.NoError(t, err)
		for tg, want := range byTarget {
			name := scenario + "/" + tg.RelayModel()
			on, how, err := sc.On(tg)
			switch {
			case strings.HasPrefix(want, "not offered: "):
				require.Error(t, err, name)
				assert.ErrorIs(t, err, runner.ErrNotOffered, name)
				assert.Contains(t, err.Error(), strings.TrimPrefix(want, "not offered: "), name)
				assert.Contains(t, err.Error(), "model is "+tg.RelayModel(), name)
			case want == asWritten:
				require.NoError(t, err, name)
				assert.Empty(t, how, name)
				assert.Equal(t, sc.Window, on.Window, name)
				assert.Equal(t, "Processing", relayCommit(t, on).Status, name)
			default:
				require.NoError(t, err, name)
				assert.Contains(t, how, "re-timed", name)
				assert.NotEqual(t, sc.Window, on.Window, name)
				c := relayCommit(t, on)
				assert.Equal(t, want, c.Table, name)
				assert.Empty(t, c.Status, name)
				if pastLease[scenario] {
					assert.Nil(t, on.Instances, "%s: held up past a lease, with the target's other relays running", name)
				} else {
					assert.Equal(t, map[string]int{"relay": 1}, on.Instances, "%s: a window timed from outside is the one relay's", name)
				}
				for _, e := range on.Evidence {
					for _, n := range e.Needs {
						assert.NotEqual(t, history.SourceAudit, n, "%s: evidence %q reads claims from the audit trail", name, e.Name)
					}
				}
			}
		}
	}
}

// relayCommit is the black-box fault of a relay scenario's schedule.
func relayCommit(t *testing.T, sc runner.Scenario) fault.OnCommit {
	t.Helper()
	for _, f := range sc.Schedule(seed) {
		if c, ok := f.(fault.OnCommit); ok {
			return c
		}
	}
	require.Fail(t, "no on-commit fault", sc.Name)
	return fault.OnCommit{}
}

// The re-timed relay windows open on a real relay seen only from outside:
// timed by its publishes (the live tap) as a log relay's would be, and by
// its mark as an offset relay's; the correct pipeline passes, the windows
// a model lacks end not run as not offered, and the publish-timed
// confirmed-not-marked still catches no-inbox.
func TestRelayWindowsOnOtherModels(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real infrastructure; not in -short")
	}
	t.Parallel()
	onLog := readAs(t, shared, asRelay(tgt, history.ModelLog))
	onOffset := readAs(t, shared, asRelay(tgt, history.ModelOffset))
	for _, tc := range []struct {
		name, scenario string
		sh             *runner.Shared
		variant        string
		want           string // a verdict, or a violation kind the variant is caught with
	}{
		{"log/confirmed-not-marked", "blackbox-relay-confirmed-not-marked", onLog, "", result.Pass},
		{"log/answers-lost", "blackbox-relay-answers-lost", onLog, "", result.Pass},
		{"log/confirmed-not-marked/no-inbox", "blackbox-relay-confirmed-not-marked", onLog, "no-inbox", "duplicate-effect"},
		{"offset/killed-at-mark", "blackbox-relay-killed-at-claim", onOffset, "", result.Pass},
		{"log/killed-at-claim", "blackbox-relay-killed-at-claim", onLog, "", result.NotRun},
		{"offset/frozen-past-lease", "blackbox-relay-frozen-past-lease", onOffset, "", result.Pass},
		{"log/frozen-past-lease", "blackbox-relay-frozen-past-lease", onLog, "", result.NotRun},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc, err := Lookup(tc.scenario)
			require.NoError(t, err)
			opts := runner.Options{Seed: seed, Variant: tc.variant}
			if tc.variant != "" {
				opts.Stall = gate.VariantStall
				res := tc.sh.Run(t.Context(), sc, opts)
				require.True(t, res.Caught(tc.want), "%s not caught with %s: %s %s", tc.variant, tc.want, res.Verdict, res.Reason)
				return
			}
			res := runRetryingOn(t, tc.sh, sc, opts)
			require.Equal(t, tc.want, res.Verdict, res.Reason)
			if tc.want == result.NotRun {
				assert.Contains(t, res.Reason, "not offered")
				return
			}
			for _, f := range res.Faults {
				assert.True(t, f.Hit, "%s: %s", f.Detail, f.Error)
			}
			assert.NotEqual(t, sc.Window, res.Window, "the result names the re-timed window")
		})
	}
}

// The relay crash-point scenarios on a target whose relay maps no crash
// point open their window from outside where its model has the moment
// (timed by a claim, a mark or a publish), and are not offered, with the
// reason, where it has not; with the crash points mapped they are as
// written.
func TestRelayCrashPointsFromOutside(t *testing.T) {
	const asWritten = "as written"
	blindClaim := tgt.WithoutEventLogs()
	offset, log := asRelay(tgt, history.ModelOffset), asRelay(tgt, history.ModelLog)
	processing, mark, publish := history.TableOutbox, history.TablePosition, history.TablePublish
	notOffered := "not offered"
	wants := map[string]map[*target.Target]string{
		"relay-crash-after-claim":   {tgt: asWritten, blindClaim: processing, offset: mark, log: notOffered},
		"relay-crash-after-publish": {tgt: asWritten, blindClaim: publish, offset: publish, log: publish},
		"relay-crash-after-confirm": {tgt: asWritten, blindClaim: processing, offset: publish, log: publish},
		"relay-pause-past-lease":    {tgt: asWritten, blindClaim: processing, offset: mark, log: notOffered},
		"relay-db-slow-past-lease":  {tgt: asWritten, blindClaim: processing, offset: mark, log: notOffered},
		"aggregate-order":           {tgt: asWritten, blindClaim: processing, offset: notOffered, log: notOffered},
	}
	for scenario, byTarget := range wants {
		sc, err := Lookup(scenario)
		require.NoError(t, err)
		for tg, want := range byTarget {
			name := scenario + "/" + tg.RelayModel()
			on, how, err := sc.On(tg)
			switch want {
			case notOffered:
				require.ErrorIs(t, err, runner.ErrNotOffered, name)
				assert.Contains(t, err.Error(), "maps no crash point", name)
			case asWritten:
				require.NoError(t, err, name)
				assert.Equal(t, sc.Window, on.Window, name)
				assert.Equal(t, len(sc.Evidence), len(on.Evidence), name)
			default:
				require.NoError(t, err, name)
				assert.Contains(t, how, "opened from outside", name)
				assert.Contains(t, on.Window, "from outside", name)
				assert.Equal(t, want, relayCommit(t, on).Table, name)
				for _, f := range on.Schedule(seed) {
					_, crash := f.(fault.Crash)
					assert.False(t, crash, "%s: a crash point in a schedule opened from outside", name)
				}
				for _, e := range on.Evidence {
					for _, n := range e.Needs {
						assert.NotEqual(t, history.SourceRelayLog, n, "%s: evidence %q needs an event log", name, e.Name)
						assert.NotEqual(t, history.SourceConsumerLog, n, "%s: evidence %q needs an event log", name, e.Name)
					}
				}
			}
		}
	}
}

// check-target on a relay that tails the write-ahead log says whether the
// server lets it create its slot, and names the run's slot: every
// provider's PostgreSQL serves logical replication.
func TestCheckTargetOnALogRelaySaysLogicalReplicationIsServed(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real infrastructure; not in -short")
	}
	t.Parallel()
	held, problems := readAs(t, shared, asRelay(tgt, history.ModelLog)).CheckTarget(t.Context())
	for _, p := range problems {
		assert.NotEqual(t, "relay", p.Field, p.String())
	}
	assert.True(t, slices.ContainsFunc(held, func(s string) bool {
		return strings.HasPrefix(s, "logical replication served (wal_level=logical") && strings.Contains(s, "_slot")
	}), "held: %q", held)
}
