package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
)

func invariantNamed(t *testing.T, invs []result.Invariant, name string) result.Invariant {
	t.Helper()
	for _, inv := range invs {
		if inv.Name == name {
			return inv
		}
	}
	require.Failf(t, "no invariant", "%s not among %v", name, invs)
	return result.Invariant{}
}

func kinds(inv result.Invariant) []string {
	var out []string
	for _, v := range inv.Violations {
		out = append(out, v.Kind)
	}
	return out
}

// An offset relay's outbox has no status: what it has not settled is the
// pending query's events, and stuck is a position that stood still with
// events beyond it; a row the relay moved past is skipped (lost), never a
// stuck row.
func TestRelayModelOracles(t *testing.T) {
	end := at(60_000)
	still := history.PositionTrail{Writes: 40, Last: end.Add(-20 * time.Second), Until: end}
	moving := history.PositionTrail{Writes: 40, Last: end.Add(-time.Second), Until: end}
	// offset is a run of an offset relay whose one event E1 has no effect
	// and was never routed (the tap is empty).
	offset := func(pending []string, trail history.PositionTrail) *history.Record {
		o := lostOne("", nil)
		// its outbox query reads the library's table: no status column
		o.NoOutboxStatus = true
		o.Outbox = []history.OutboxRow{{EventID: "E1", AggregateID: "A", Sequence: 1}}
		o.Model, o.Pending = history.ModelOffset, append([]string{}, pending...)
		o.Position = &trail
		o.Tap = map[string]int{}
		return o
	}
	for _, tc := range []struct {
		name       string
		o          *history.Record
		truthOK    bool
		truthKinds []string
		notChecked bool
		lostKinds  []string // the no-lost-event invariant's violation kinds
		stage      result.Stage
	}{
		{"beyond a position that stood still: stuck-position, not a loss", offset([]string{"E1"}, still),
			false, []string{"stuck-position"}, false, []string{"not-converged"}, result.StageInOutbox},
		{"beyond a position still moving: on its way", offset([]string{"E1"}, moving),
			true, nil, false, []string{"not-converged"}, result.StageInOutbox},
		{"position table not watched: stood still for all the run shows", with(offset([]string{"E1"}, history.PositionTrail{}), func(o *history.Record) { o.Position = nil }),
			false, []string{"stuck-position"}, false, []string{"not-converged"}, result.StageInOutbox},
		{"passed by the position, never routed: lost (skipped), no stuck anything", offset(nil, still),
			true, nil, false, []string{"lost"}, result.StageSkipped},
		{"an outbox without status and no pending query: not checked, the stage unknown",
			with(lostOne("", nil), func(o *history.Record) {
				o.Model, o.NoOutboxStatus = history.ModelLog, true
				if o.Outbox == nil {
					o.Outbox = []history.OutboxRow{}
				}
				o.Outbox = []history.OutboxRow{{EventID: "E1", AggregateID: "A", Sequence: 1}}
				o.Tap = map[string]int{}
			}),
			false, nil, true, []string{"lost"}, result.StageUnknown},
		{"a log relay's slot confirmed past the row, never routed: lost (skipped), the slot's truth kept",
			with(lostOne("", nil), func(o *history.Record) { logRelay(o, 2000, 1000) }),
			true, nil, false, []string{"lost"}, result.StageSkipped},
		{"a log relay's slot never confirmed past the row: stuck-position, not a loss",
			with(lostOne("", nil), func(o *history.Record) { logRelay(o, 1000, 1000) }),
			false, []string{"stuck-position"}, false, []string{"not-converged"}, result.StageInOutbox},
		{"a log relay's run without a slot at the end: not checked, and says why",
			with(lostOne("", nil), func(o *history.Record) { logRelay(o, 2000, 1000); o.Slot = nil }),
			false, nil, true, []string{"lost"}, result.StageUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			invs, _ := Check(tc.o, []string{NoneGaveUp})
			truth := invariantNamed(t, invs, OutboxTruth)
			assert.Equal(t, tc.notChecked, truth.NotChecked, truth.Detail)
			if !tc.notChecked {
				assert.Equal(t, tc.truthOK, truth.OK, truth.Detail)
			}
			assert.Equal(t, tc.truthKinds, kinds(truth))
			assert.NotContains(t, kinds(truth), "stuck-row", "no status column: no stuck row")
			lost := invariantNamed(t, invs, NoLost)
			assert.Equal(t, tc.lostKinds, kinds(lost), lost.Detail)
			assert.Equal(t, tc.stage, newPlacer(tc.o).place("E1"))
			gaveUp := invariantNamed(t, invs, NoneGaveUp)
			assert.True(t, gaveUp.NotChecked, "no status: a Failed row cannot be told")
		})
	}
}

// An offset relay's pending query is its own measure of what is unsettled,
// even where its outbox query derives a status from the position: a stuck
// event is reported once, as stuck-position; and a relay that claims no
// row is not judged by fencing.
func TestOffsetRelayIsJudgedByItsPosition(t *testing.T) {
	o := lostOne("Pending", nil)
	o.Model, o.Pending = history.ModelOffset, []string{"E1"}
	o.Position = &history.PositionTrail{Writes: 3, Last: at(0), Until: at(60_000)}
	invs, _ := Check(o, nil)
	truth := invariantNamed(t, invs, OutboxTruth)
	assert.Equal(t, []string{"stuck-position"}, kinds(truth))
	fence := invariantNamed(t, invs, Fencing)
	assert.True(t, fence.NotChecked, fence.Detail)
	assert.Contains(t, fence.Detail, "holds no claim")
}
