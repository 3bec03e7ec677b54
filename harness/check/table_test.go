package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The table names every invariant once, says what each checks, and runs
// the always-on ones on every run and an optional one only where asked,
// in the table's order whatever the order asked: results.json lists them
// as it did when they were flags.
func TestInvariantTable(t *testing.T) {
	alwaysOn := []string{NoLost, NoPhantom, NoDuplicate, OutboxTruth, Fencing, QueueDrained, NothingHeldBack}
	seen := map[string]bool{}
	for _, inv := range AllInvariants() {
		assert.False(t, seen[inv.Name], "%s listed twice", inv.Name)
		seen[inv.Name] = true
		assert.NotEmpty(t, inv.Checks, "%s says what it checks", inv.Name)
		assert.NotNil(t, inv.check, inv.Name)
	}
	assert.Equal(t, []string{AggregateOrder, NoneGaveUp, FactsKept, LiveAfterHeal}, OptionalNames())

	clean := obs(map[string]int64{"A": 2}, nil, []Effect{{1, "E1", "A", 1, ""}, {2, "E2", "A", 2, ""}})
	for _, tc := range []struct {
		name     string
		optional []string
		want     []string
		err      string
	}{
		{name: "none asked: the always-on ones", want: alwaysOn},
		{name: "order", optional: []string{AggregateOrder}, want: append(alwaysOn[:len(alwaysOn):len(alwaysOn)], AggregateOrder)},
		{name: "none gave up", optional: []string{NoneGaveUp}, want: append(alwaysOn[:len(alwaysOn):len(alwaysOn)], NoneGaveUp)},
		{name: "both, in the table's order", optional: []string{NoneGaveUp, AggregateOrder, NoneGaveUp},
			want: append(alwaysOn[:len(alwaysOn):len(alwaysOn)], AggregateOrder, NoneGaveUp)},
		{name: "an always-on one is not asked for", optional: []string{NoLost}, want: alwaysOn, err: `"no-lost-event" is not an optional invariant`},
		{name: "unknown", optional: []string{"no-such"}, want: alwaysOn, err: `"no-such" is not an optional invariant (the optional ones: per-aggregate-order, none-gave-up, facts-kept, live-after-heal)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateOptional(tc.optional)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
			} else {
				require.NoError(t, err)
			}
			var names []string
			for _, inv := range Invariants(clean, tc.optional) {
				names = append(names, inv.Name)
			}
			assert.Equal(t, tc.want, names)
		})
	}
}

// Each invariant, looked up by name, judges the observation as the
// checker's own function for it does.
func TestLookupInvariant(t *testing.T) {
	outOfOrder := obs(map[string]int64{"A": 3}, nil, []Effect{{1, "E1", "A", 1, ""}, {2, "E3", "A", 3, ""}, {3, "E2", "A", 2, ""}})
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{AggregateOrder, false},
		{NoLost, true},
		{NoDuplicate, true},
		{NoPhantom, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv, found := LookupInvariant(tc.name)
			require.True(t, found)
			got := inv.check(outOfOrder, findingsOf(outOfOrder))
			assert.Equal(t, tc.name, got.Name)
			assert.Equal(t, tc.ok, got.OK)
		})
	}
	_, found := LookupInvariant("no-such")
	assert.False(t, found)
}

// TestLiveAfterHeal: the run's recovery against its bound — within it,
// past it, never caught up, and no fault healed.
func TestLiveAfterHeal(t *testing.T) {
	healed := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	bound, is := LivenessBound(5*time.Second, 2*time.Second)
	require.Equal(t, 17*time.Second, bound)
	for _, tc := range []struct {
		name       string
		rec        *Recovery
		ok, judged bool
	}{
		{"within the bound", &Recovery{Healed: healed, CaughtUp: healed.Add(4 * time.Second), Bound: bound, BoundIs: is}, true, true},
		{"past the bound", &Recovery{Healed: healed, CaughtUp: healed.Add(18 * time.Second), Bound: bound, BoundIs: is}, false, true},
		{"never caught up", &Recovery{Healed: healed, Bound: bound, BoundIs: is}, false, true},
		{"healed mid-load: the clock starts at the last order", &Recovery{Healed: healed, LoadEnded: healed.Add(15 * time.Second), CaughtUp: healed.Add(20 * time.Second), Bound: bound, BoundIs: is}, true, true},
		{"no fault healed", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := liveAfterHeal(&Observation{Recovery: tc.rec})
			assert.Equal(t, !tc.judged, inv.NotChecked)
			if tc.judged {
				assert.Equal(t, tc.ok, inv.OK, inv.Detail)
				assert.Contains(t, inv.Detail, "bound 17s")
				assert.Equal(t, !tc.ok, len(inv.Violations) == 1)
			}
		})
	}
}
