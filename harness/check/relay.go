package check

import (
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/target"
)

// FromPending is the contract's pending query: the committed outbox
// events an offset relay has not passed yet.
const FromPending = "pending"

// StuckAfter is how long an offset relay's position must have stood still,
// with committed events beyond it, for them to be stuck rather than on
// their way.
const StuckAfter = 5 * time.Second

// PositionTrail is what faultline saw of an offset relay's position table:
// its committed writes, up to Until (when it stopped watching).
type PositionTrail struct {
	Writes      int
	Last, Until time.Time
}

// stoodStill reports whether the position did not move in the last
// StuckAfter of the trail (or never moved).
func (p PositionTrail) stoodStill() bool {
	return p.Writes == 0 || p.Until.Sub(p.Last) >= StuckAfter
}

func (p PositionTrail) String() string {
	if p.Writes == 0 {
		return "the position was never written"
	}
	return fmt.Sprintf("the position was written %d times, last %s before the end", p.Writes, p.Until.Sub(p.Last).Round(100*time.Millisecond))
}

// outboxSettles says whether the run shows which committed events the
// relay still has to settle: by their status, or by the pending query.
func (o *Observation) outboxSettles() bool {
	return (o.HasOutbox && !o.NoOutboxStatus) || o.HasPending
}

// relayTruth judges the outbox by what the relay's model lets the run see
// of it: the rows' status (a claim relay's, or an outbox query that
// returns one), or the events beyond an offset relay's position; with
// neither (a log relay without a pending query) it is not checked.
func relayTruth(o *Observation) result.Invariant {
	switch {
	case o.HasPending && o.Model == target.ModelOffset:
		// An offset relay's own measure, even where the outbox query
		// derives a status from the position too: one stuck event is
		// reported once.
		return positionTruth(o)
	case o.HasOutbox && !o.NoOutboxStatus:
		return outboxTruth(o)
	case o.HasPending:
		return positionTruth(o)
	case o.HasOutbox:
		return notChecked(OutboxTruth, fmt.Sprintf("the outbox query returns no status column and the contract has no pending query (relay model: %s): which events the relay has settled is not shown", o.modelName()))
	}
	return notChecked(OutboxTruth, fmt.Sprintf("the target's contract has no outbox or pending query (relay model: %s)", o.modelName()))
}

// positionTruth: no committed event is left beyond an offset relay's
// position once the run has converged while the position stands still
// (stuck-position, the offset relay's stuck row). Events left beyond a
// position that is still moving are a relay on its way: the convergence
// wait says it did not finish, not this invariant.
func positionTruth(o *Observation) result.Invariant {
	inv := result.Invariant{Name: OutboxTruth, OK: true, RestsOn: []string{FromPending}}
	if len(o.Pending) == 0 {
		return inv
	}
	moving := o.HasPosition && !o.Position.stoodStill()
	trail := "the position table was not watched"
	if o.HasPosition {
		trail = o.Position.String()
		inv.RestsOn = append(inv.RestsOn, FromPosition)
	}
	if moving {
		inv.Detail = fmt.Sprintf("%d events still beyond the relay's position at the end, but %s: on their way, not stuck", len(o.Pending), trail)
		return inv
	}
	inv.OK = false
	inv.Detail = fmt.Sprintf("%d committed events beyond the relay's position after convergence; %s", len(o.Pending), trail)
	inv.Violations = []result.Violation{{Kind: "stuck-position", EventIDs: capList(o.Pending),
		Message: fmt.Sprintf("%d committed outbox events the relay's position never reached (%s)", len(o.Pending), trail), Timeline: o.Timeline(capList(o.Pending)...)}}
	return inv
}

// FromPosition is the commits faultline saw on an offset relay's position
// table.
const FromPosition = "position table"

// noClaims says why fencing does not apply ("" where it does): an offset
// or log relay claims no row, so there is no claim to fence a stale
// writer by.
func (o *Observation) noClaims() string {
	switch o.Model {
	case target.ModelOffset, target.ModelLog:
		return fmt.Sprintf("a relay of model %s holds no claim on the outbox rows: there is nothing to fence", o.Model)
	}
	return ""
}

func (o *Observation) modelName() string {
	if o.Model == "" {
		return "not said"
	}
	return o.Model
}
