package target

import (
	"fmt"
	"strings"

	"github.com/faultline-dev/faultline/harness/history"
)

// Relay is how the target's relay takes work from the outbox (relay: in
// the target file).
type Relay struct {
	// Model is ModelClaim, ModelOffset, ModelLog, or "" when the file does
	// not say: then nothing is assumed beyond what the contract gives.
	Model string
	// Position, for ModelOffset, is the table the relay keeps its
	// position in: a committed write to it is the relay's mark.
	Position *Table
	// Batch is how many rows one claim of a relay takes at most (its
	// batch size), 0 where the file does not say: a backlog's full claim
	// is one of Batch rows.
	Batch int
	// InFlight is how many claims one relay has published and not yet
	// settled at most (0 where the file does not say: one): with two or more,
	// a batch goes out while the one before it awaits its confirms, and
	// the broker's answers for both come back on one channel.
	InFlight int
	Line     int
}

// StatusOutbox reports whether the outbox faultline watches has a status
// column the relay writes: a claim relay's, or, when the file names no
// model, the status column the observe section gives (the article's by
// default). Offset and log relays never write one.
func (t *Target) StatusOutbox() bool {
	switch t.Relay.Model {
	case history.ModelClaim:
		return true
	case "":
		return t.Observe.Outbox.Status != ""
	}
	return false
}

// RelayModel names the relay's model for a reader: the model, or "not
// said".
func (t *Target) RelayModel() string {
	if t.Relay.Model == "" {
		return "not said"
	}
	return t.Relay.Model
}

// decodeRelay reads relay: (model and, for offset, position).
func (d *decoder) decodeRelay(m *mapping) Relay {
	v, ok := m.get("relay")
	if !ok {
		return Relay{}
	}
	r := Relay{Line: v.line}
	rm, ok := d.mapping(v, "model", "position", "batch", "in_flight")
	if !ok {
		return r
	}
	if fv, ok := rm.get("in_flight"); ok {
		if n, ok := d.integer(fv); ok && n < 1 {
			d.problem(fv.line, fv.field, "a relay has 1 claim in flight or more, not %d", n)
		} else if ok {
			r.InFlight = n
		}
	}
	if bv, ok := rm.get("batch"); ok {
		if n, ok := d.integer(bv); ok && n < 1 {
			d.problem(bv.line, bv.field, "a relay's batch is 1 row or more, not %d", n)
		} else if ok {
			r.Batch = n
		}
	}
	if mv, ok := d.require(rm, "model", "how the relay takes work from the outbox: "+joinOr(history.RelayModels())); ok {
		r.Model, _ = d.oneOf(mv, "relay model", history.RelayModels())
	}
	pv, given := rm.get("position")
	switch {
	case given && r.Model != history.ModelOffset && r.Model != "":
		d.problem(pv.line, pv.field, "a position table is for an offset relay; this relay's model is %s", r.Model)
	case given:
		r.Position = d.positionTable(pv)
	case r.Model == history.ModelOffset:
		d.problem(v.line, "relay.position", "required for an offset relay: the table it keeps its position in (database, table); a write to it is the relay's mark")
	}
	return r
}

// positionTable reads relay.position.
func (d *decoder) positionTable(v val) *Table {
	pm, ok := d.mapping(v, "database", "table")
	if !ok {
		return nil
	}
	t := &Table{Line: v.line}
	if dv, ok := d.require(pm, "database", "the database the position table is in"); ok {
		if db, ok := d.nonEmpty(dv); ok && d.declared(dv.line, dv.field, db) {
			t.Database = db
		}
	}
	if nv, ok := d.require(pm, "table", "the position table's name"); ok {
		t.Name, _ = d.matching(nv, identifier, "a table name (schema.table allowed)")
	}
	return t
}

// checkRelay checks what the relay's model needs of the contract: an
// offset relay's pending events. (That a claim relay's outbox query
// returns a status column is checked where it runs: check-target and
// every run say so.)
func (d *decoder) checkRelay(t *Target, contractLine int) {
	if t.Relay.Model == history.ModelOffset && t.Contract.Pending == nil && !d.reported("contract.pending") {
		d.problem(cmpLine(contractLine, t.Relay.Line), "contract.pending", "required for an offset relay: a query (database, sql) listing, in one column event_id, the committed outbox events beyond the relay's committed position")
	}
}

// outboxDefaults are the columns faultline assumes of the outbox when the
// observe section does not name them: the article's status and claim for
// a claim relay (and when no model is said: the article's defaults), none
// for a relay that never updates the outbox rows.
func (d *decoder) outboxDefaults(model string) (status, claim string) {
	if model == history.ModelOffset || model == history.ModelLog {
		return "", ""
	}
	return "status", "locked_by"
}

// defaultOutbox is the default contract.outbox query for the model: the
// article's (which reads its status column), or none for a relay that
// writes no status.
func defaultOutbox(model string) string {
	if model == history.ModelOffset || model == history.ModelLog {
		return ""
	}
	return defaultOutboxSQL
}

func cmpLine(lines ...int) int {
	for _, l := range lines {
		if l > 0 {
			return l
		}
	}
	return 0
}

func joinOr(choices []string) string {
	switch len(choices) {
	case 0:
		return ""
	case 1:
		return choices[0]
	}
	out := ""
	for i, c := range choices {
		switch {
		case i == 0:
			out = c
		case i == len(choices)-1:
			out += fmt.Sprintf(" or %s", c)
		default:
			out += ", " + c
		}
	}
	return out
}

// reported says whether a problem was already reported at field or
// inside it.
func (d *decoder) reported(field string) bool {
	for _, p := range d.problems {
		if p.Field == field || strings.HasPrefix(p.Field, field+".") {
			return true
		}
	}
	return false
}
