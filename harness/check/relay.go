package check

import (
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
)

// FromPending is the contract's pending query: the committed outbox
// events an offset relay has not passed yet.
const FromPending = "pending"

// FromSlot is a log relay's replication slot: its confirmed position, read
// from pg_replication_slots.
const FromSlot = "replication slot"

// StuckAfter is how long an offset relay's position must have stood still,
// with committed events beyond it, for them to be stuck rather than on
// their way.
const StuckAfter = 5 * time.Second

// stoodStill reports whether the position did not move in the last
// StuckAfter of the trail (or never moved).
func stoodStill(p history.PositionTrail) bool {
	return p.Writes == 0 || p.Until.Sub(p.Last) >= StuckAfter
}

// outboxSettles says whether the run shows which committed events the
// relay still has to settle: by their status, or by the pending query.
func outboxSettles(o *history.Record) bool {
	return (o.Outbox != nil && !o.NoOutboxStatus) || o.Pending != nil
}

// relayTruth judges the outbox by what the relay's model lets the run see
// of it: the rows' status (a claim relay's, or an outbox query that
// returns one), the events beyond an offset relay's position, or the rows
// a log relay's slot has not confirmed past; with none of these it is not
// checked.
func relayTruth(o *history.Record) result.Invariant {
	switch {
	case o.Model == history.ModelLog && o.Slot != nil && o.Audit != nil:
		return slotTruth(o)
	case o.Model == history.ModelLog && o.Audit != nil && !outboxSettles(o):
		return notChecked(OutboxTruth, "the outbox's database had no one logical slot with a confirmed position at the end: how far the log relay got is not shown")
	case o.Pending != nil && o.Model == history.ModelOffset:
		// An offset relay's own measure, even where the outbox query
		// derives a status from the position too: one stuck event is
		// reported once.
		return positionTruth(o)
	case o.Outbox != nil && !o.NoOutboxStatus:
		return outboxTruth(o)
	case o.Pending != nil:
		return positionTruth(o)
	case o.Outbox != nil:
		return notChecked(OutboxTruth, fmt.Sprintf("the outbox query returns no status column and the contract has no pending query (relay model: %s): which events the relay has settled is not shown", modelName(o)))
	}
	return notChecked(OutboxTruth, fmt.Sprintf("the target's contract has no outbox or pending query (relay model: %s)", modelName(o)))
}

// positionTruth: no committed event is left beyond an offset relay's
// position once the run has converged while the position stands still
// (stuck-position, the offset relay's stuck row). Events left beyond a
// position that is still moving are a relay on its way: the convergence
// wait says it did not finish, not this invariant.
func positionTruth(o *history.Record) result.Invariant {
	inv := result.Invariant{Name: OutboxTruth, OK: true, RestsOn: []string{FromPending}}
	if len(o.Pending) == 0 {
		return inv
	}
	moving := o.Position != nil && !stoodStill(*o.Position)
	trail := "the position table was not watched"
	if o.Position != nil {
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

// slotTruth: a log relay's slot has confirmed past every committed outbox
// row once the run converged. A row at or past the confirmed position is
// one the relay never told the server it was done with: the server keeps
// the WAL from there (the slot retains it until the disk fills) and
// streams the row again on every restart of the relay.
func slotTruth(o *history.Record) result.Invariant {
	inv := result.Invariant{Name: OutboxTruth, OK: true, RestsOn: []string{FromSlot, FromAudit}}
	behind, passed := SlotPlaced(o)
	rows := len(behind) + len(passed)
	if len(behind) == 0 {
		inv.Detail = fmt.Sprintf("the relay's slot confirmed past all %d committed outbox rows", rows)
		return inv
	}
	inv.OK = false
	inv.Detail = fmt.Sprintf("%d of %d committed outbox rows at or past the relay's slot's confirmed position after convergence: the server retains their WAL and streams them again on every restart", len(behind), rows)
	inv.Violations = []result.Violation{{Kind: "stuck-position", EventIDs: capList(behind),
		Message: fmt.Sprintf("%d committed outbox rows the relay's slot never confirmed past", len(behind)), Timeline: o.Timeline(capList(behind)...)}}
	return inv
}

// SlotPlaced places each committed outbox row against a log relay's
// slot's confirmed position by its insert's WAL position (the audit
// trail's; the commit comes after it): behind are the events at or past
// the position, passed those before it. Both nil without a slot or an
// audit trail.
func SlotPlaced(o *history.Record) (behind, passed []string) {
	if o.Slot == nil || o.Audit == nil {
		return nil, nil
	}
	for _, a := range o.Audit.Writes() {
		switch {
		case a.Op != "INSERT" || a.LSN == 0:
		case a.LSN >= o.Slot.Confirmed:
			behind = append(behind, a.EventID)
		default:
			passed = append(passed, a.EventID)
		}
	}
	return behind, passed
}

// FromPosition is the commits faultline saw on an offset relay's position
// table.
const FromPosition = "position table"

// noClaims says why fencing does not apply ("" where it does): an offset
// or log relay claims no row, so there is no claim to fence a stale
// writer by.
func noClaims(o *history.Record) string {
	switch o.Model {
	case history.ModelOffset, history.ModelLog:
		return fmt.Sprintf("a relay of model %s holds no claim on the outbox rows: there is nothing to fence", o.Model)
	}
	return ""
}

func modelName(o *history.Record) string {
	if o.Model == "" {
		return "not said"
	}
	return o.Model
}
