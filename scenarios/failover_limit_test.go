package scenarios

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
)

// A lost event is the failover's documented limit only where faultline saw
// its effect commit on the old primary: the promotion lost that commit. A
// lost event whose effect never committed is the consumer's own doing
// (it acked before its commit), and a run whose failover lost no WAL has
// no limit to excuse anything.
func TestFailoverLimitExcusesOnlyEffectsSeenCommitted(t *testing.T) {
	lost := func(ids ...string) []result.Invariant {
		return []result.Invariant{{Name: check.NoLost, Violations: []result.Violation{{Kind: "lost", EventIDs: ids[:1],
			Stages: map[result.Stage][]string{"consumed-without-effect": ids}}}}}
	}
	hit := []result.Fault{{Kind: fault.KindFailover, Hit: true}}
	for _, tc := range []struct {
		name     string
		faults   []result.Fault
		seen     map[string]bool
		invs     []result.Invariant
		expected bool
		detail   string
	}{
		{name: "every lost effect seen committed", faults: hit, seen: map[string]bool{"e1": true, "e2": true, "e3": true}, invs: lost("e1", "e2"), expected: true, detail: "2 effects seen committed are gone"},
		{name: "one lost effect never committed", faults: hit, seen: map[string]bool{"e1": true}, invs: lost("e1", "e2")},
		{name: "commits not watched", faults: hit, invs: lost("e1"), detail: "could not see the effects commit"},
		{name: "no WAL lost", faults: []result.Fault{{Kind: fault.KindFailover}}, seen: map[string]bool{"e1": true}, invs: lost("e1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &history.Record{EffectsCommitted: tc.seen}
			checked := slices.Clone(tc.invs)
			ev, notes := expectFailoverLimit(o, tc.faults, tc.invs)
			assert.Equal(t, checked, tc.invs, "the checks' results are left as they were")
			invs := result.Annotated(tc.invs, notes)
			assert.Equal(t, tc.expected, invs[0].Expected)
			if tc.expected {
				assert.Contains(t, ev.Detail, tc.detail)
				assert.True(t, ev.Seen)
			} else if tc.detail != "" {
				assert.Contains(t, invs[0].Detail, tc.detail, "why the failover does not excuse it")
			}
		})
	}
}

// On a log relay, a lost event is the failover's documented limit where
// the relay's slot explains it: the promoted server had no slot, the event
// was never published (the tap never saw it), and its row was inserted
// before the relay's new slot was first seen there (or the relay never
// made one). An event inserted after the new slot existed, or one the tap
// saw published, is the pipeline's own loss; a kept slot explains
// nothing. Where all it lacks is what the slot skipped, the run's not
// converging and not catching up are the same limit.
func TestFailoverLimitExcusesWhatALostSlotSkipped(t *testing.T) {
	promoted := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	before, after := promoted.Add(-time.Second), promoted.Add(2*time.Second)
	audit := []history.AuditRow{{Op: "INSERT", EventID: "e1", At: before}, {Op: "INSERT", EventID: "e2", At: before}, {Op: "INSERT", EventID: "e3", At: after}}
	recreated := &result.SlotFate{Name: "s", Confirmed: "0/100", Recreated: true, SeenAt: promoted.Add(time.Second), At: "0/200"}
	stopped := &result.SlotFate{Name: "s", Confirmed: "0/100"}
	kept := &result.SlotFate{Name: "s", Confirmed: "0/100", Kept: true, SeenAt: promoted, At: "0/100"}
	invs := func(ids ...string) []result.Invariant {
		return []result.Invariant{
			{Name: check.Converged, Unconverged: true, Detail: "not converged after 1m30s"},
			{Name: check.NoLost, Violations: []result.Violation{{Kind: "lost", EventIDs: ids[:1], Stages: map[result.Stage][]string{"unknown": ids}}}},
			{Name: check.LiveAfterHeal, Detail: "not every committed fact took effect"},
		}
	}
	for _, tc := range []struct {
		name     string
		slot     *result.SlotFate
		tap      map[string]int
		invs     []result.Invariant
		expected bool
	}{
		{name: "inserted before the new slot, never published", slot: recreated, invs: invs("e1", "e2"), expected: true},
		{name: "inserted after the new slot existed", slot: recreated, invs: invs("e1", "e3")},
		{name: "published, then lost", slot: recreated, tap: map[string]int{"e2": 1}, invs: invs("e1", "e2")},
		{name: "the relay never made a new slot", slot: stopped, invs: invs("e1", "e3"), expected: true},
		{name: "the promoted server kept the slot", slot: kept, invs: invs("e1")},
		{name: "no slot followed (a claim relay)", invs: invs("e1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &history.Record{Audit: &history.AuditTrail{Rows: audit}, Tap: map[string]int{}, EffectsCommitted: map[string]bool{}}
			maps.Copy(o.Tap, tc.tap)
			faults := []result.Fault{{Kind: fault.KindFailover, Hit: true, Slot: tc.slot}}
			ev, notes := expectFailoverLimit(o, faults, tc.invs)
			invs := result.Annotated(tc.invs, notes)
			for _, inv := range invs {
				assert.Equal(t, tc.expected, inv.Expected, "%s: %s", inv.Name, inv.Detail)
			}
			if tc.expected {
				assert.True(t, ev.Seen)
				assert.Contains(t, ev.Detail, "never streamed")
				assert.Contains(t, invs[1].Detail, "PostgreSQL 15 keeps no logical slot across a promotion")
			}
		})
	}
}

// On a synchronous standby, only a log relay's slot is excused: its
// phantoms (a logical walsender streams a commit the standby has not
// confirmed) and what its lost slot skipped. A claim relay's phantom
// there still fails the run, and its evidence is not checked.
func TestSyncFailoverExcusesOnlyALogRelaysSlot(t *testing.T) {
	phantom := func() []result.Invariant {
		return []result.Invariant{{Name: check.NoPhantom, Violations: []result.Violation{{Kind: "phantom", EventIDs: []string{"p1"}}}}}
	}
	o := &history.Record{Audit: &history.AuditTrail{}, Tap: map[string]int{}}
	ev, notes := expectSlotLimit(o, []result.Fault{{Kind: fault.KindFailover, Hit: true, Slot: &result.SlotFate{Name: "s", Recreated: true}}}, phantom())
	invs := result.Annotated(phantom(), notes)
	assert.True(t, invs[0].Expected, invs[0].Detail)
	assert.True(t, ev.Seen)
	assert.Contains(t, ev.Detail, "1 effects of events without a fact")

	ev, notes = expectSlotLimit(o, []result.Fault{{Kind: fault.KindFailover, Hit: true}}, phantom())
	invs = result.Annotated(phantom(), notes)
	assert.False(t, invs[0].Expected, "a claim relay's phantom on a synchronous failover is not excused")
	assert.True(t, ev.NotChecked)
}
