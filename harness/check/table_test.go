package check

import (
	"testing"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The table names every invariant once, says what each checks, and runs
// the always-on ones on every run and an optional one only where asked,
// in the table's order whatever the order asked: results.json lists them
// as it did when they were flags.
func TestInvariantTable(t *testing.T) {
	alwaysOn := []string{NoLost, NoPhantom, NoDuplicate, OutboxTruth, Fencing, LeaseKept, QueueDrained, NothingHeldBack, FactsKept}
	seen := map[string]bool{}
	for _, inv := range AllInvariants() {
		assert.False(t, seen[inv.Name], "%s listed twice", inv.Name)
		seen[inv.Name] = true
		assert.NotEmpty(t, inv.Checks, "%s says what it checks", inv.Name)
		assert.NotNil(t, inv.check, inv.Name)
	}
	assert.Equal(t, []string{AggregateOrder, NoneGaveUp, PoisonAccounted, OnlyPoisonDead, LiveAfterHeal}, OptionalNames())

	clean := obs(map[string]int64{"A": 2}, nil, []history.Effect{{ID: 1, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: ""}, {ID: 2, EventID: "E2", AggregateID: "A", Sequence: 2, EventType: ""}})
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
		{name: "unknown", optional: []string{"no-such"}, want: alwaysOn, err: `"no-such" is not an optional invariant (the optional ones: per-aggregate-order, none-gave-up, poison-accounted, only-poison-dead-lettered, live-after-heal)`},
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
	outOfOrder := obs(map[string]int64{"A": 3}, nil, []history.Effect{{ID: 1, EventID: "E1", AggregateID: "A", Sequence: 1, EventType: ""}, {ID: 2, EventID: "E3", AggregateID: "A", Sequence: 3, EventType: ""}, {ID: 3, EventID: "E2", AggregateID: "A", Sequence: 2, EventType: ""}})
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
	bound, is := LivenessBound(5*time.Second, 2*time.Second, Lag{}, Reconnection{})
	require.Equal(t, 17*time.Second, bound, "not measured: the allowance stands in, once")
	require.Contains(t, is, "not measured")
	measured, _ := LivenessBound(5*time.Second, 2*time.Second, Lag{Took: 3 * time.Second, Measured: true}, Reconnection{Took: 1500 * time.Millisecond, Measured: true})
	require.Equal(t, 11500*time.Millisecond, measured)
	half, _ := LivenessBound(5*time.Second, 2*time.Second, Lag{Took: 3 * time.Second, Measured: true}, Reconnection{})
	require.Equal(t, 20*time.Second, half)
	for _, tc := range []struct {
		name       string
		rec        *history.Recovery
		ok, judged bool
		// unknown: past the bound but caught up, no verdict either way
		unknown bool
	}{
		{"within the bound", &history.Recovery{Healed: healed, CaughtUp: healed.Add(4 * time.Second), Bound: bound, BoundIs: is}, true, true, false},
		{"past the bound: caught up, but no verdict", &history.Recovery{Healed: healed, CaughtUp: healed.Add(18 * time.Second), Bound: bound, BoundIs: is}, false, true, true},
		{"never caught up", &history.Recovery{Healed: healed, Bound: bound, BoundIs: is}, false, true, false},
		{"healed mid-load: the clock starts at the last order", &history.Recovery{Healed: healed, LoadEnded: healed.Add(15 * time.Second), CaughtUp: healed.Add(20 * time.Second), Bound: bound, BoundIs: is}, true, true, false},
		{"no fault healed", nil, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := liveAfterHeal(&history.Record{Recovery: tc.rec})
			assert.Equal(t, !tc.judged, inv.NotChecked)
			if tc.judged {
				assert.Equal(t, tc.ok, inv.OK, inv.Detail)
				assert.Contains(t, inv.Detail, "bound 17s")
				assert.Equal(t, !tc.ok, len(inv.Violations) == 1)
				assert.Equal(t, tc.unknown, inv.Unconverged, "a late recovery is unknown, a missing one a violation")
			}
		})
	}
}

// TestMeasureReconnection: when the target's clients were back after the
// heal, from the broker's and the database server's counts.
func TestMeasureReconnection(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s := func(ms, broker, orders, inventory int) history.ClientSample {
		return history.ClientSample{At: at(ms), Broker: broker, Sessions: map[string]int{"orders": orders, "inventory": inventory}}
	}
	firstFault, healed := at(1000), at(5000)
	for _, tc := range []struct {
		name     string
		samples  []history.ClientSample
		measured bool
		took     time.Duration
		detail   string
	}{
		{"back 750 ms after the heal",
			[]history.ClientSample{s(500, 3, 2, 1), s(2000, 1, 2, 1), s(5000, 1, 2, 1), s(5500, 2, 2, 1), s(5750, 3, 1, 1)}, true, 750 * time.Millisecond, "3 broker connections and sessions on inventory, orders"},
		{"reconnected elsewhere during the fault: back at the heal",
			[]history.ClientSample{s(500, 3, 2, 1), s(2000, 1, 2, 1), s(4000, 3, 2, 1), s(5000, 3, 2, 1)}, true, 0, ""},
		{"a database without its sessions is not back",
			[]history.ClientSample{s(500, 3, 2, 1), s(5000, 3, 0, 1), s(6000, 3, 1, 1)}, true, time.Second, ""},
		{"a database with no session before needs none after",
			[]history.ClientSample{s(500, 3, 0, 1), s(5000, 3, 0, 1)}, true, 0, ""},
		{"never back", []history.ClientSample{s(500, 3, 2, 1), s(5000, 2, 2, 1), s(9000, 2, 2, 1)}, false, 0, "2 of 3 broker connections"},
		{"no sample before the first fault", []history.ClientSample{s(2000, 3, 2, 1), s(5000, 3, 2, 1)}, false, 0, "before the first fault"},
		{"no client before the first fault", []history.ClientSample{s(500, 0, 0, 0), s(5000, 3, 2, 1)}, false, 0, "no client was connected"},
		{"no sample after the heal", []history.ClientSample{s(500, 3, 2, 1), s(2000, 3, 2, 1)}, false, 0, "after the heal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := MeasureReconnection(tc.samples, firstFault, healed)
			assert.Equal(t, tc.measured, rc.Measured, rc.Detail)
			assert.Equal(t, tc.took, rc.Took)
			assert.Contains(t, rc.Detail, tc.detail)
		})
	}
}

// TestMeasureLag: the pipeline's own lag before the first fault, from the
// effects the answered orders called for and those counted.
func TestMeasureLag(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s := func(ms, expected, effects int) history.ClientSample {
		return history.ClientSample{At: at(ms), Expected: expected, Effects: effects}
	}
	firstFault := at(10000)
	for _, tc := range []struct {
		name     string
		samples  []history.ClientSample
		measured bool
		took     time.Duration
	}{
		{"a relay that polls every 3 s", []history.ClientSample{s(0, 0, 0), s(1000, 10, 0), s(2000, 20, 0), s(4000, 40, 40), s(5000, 50, 40), s(7000, 70, 70), s(11000, 90, 90)}, true, 3 * time.Second},
		{"a pipeline that keeps up", []history.ClientSample{s(0, 5, 5), s(250, 10, 10), s(500, 15, 15)}, true, 0},
		{"a catch-up after the fault is not the lag", []history.ClientSample{s(0, 5, 0), s(11000, 5, 5)}, false, 0},
		{"effects not read", []history.ClientSample{s(0, 5, -1), s(250, 5, -1)}, false, 0},
		{"nothing expected yet", []history.ClientSample{s(0, 0, 0), s(250, 0, 0)}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lag := MeasureLag(tc.samples, firstFault)
			assert.Equal(t, tc.measured, lag.Measured, lag.Detail)
			assert.Equal(t, tc.took, lag.Took)
		})
	}
}
