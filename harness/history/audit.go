package history

import "time"

// AuditTrail is the outbox's audit trail: every write to it, recorded by
// faultline's trigger, in commit order per row.
type AuditTrail struct {
	Rows []AuditRow
	// Lease: each write's lease was copied (the outbox's lease column was
	// watched).
	Lease bool
	// NoStatus: the audited outbox has no status column faultline watches
	// (an offset or log relay's): the trail shows inserts and the writers,
	// never a status change.
	NoStatus bool
}

// Writes are the trail's rows; none where the trail was not installed.
func (a *AuditTrail) Writes() []AuditRow {
	if a == nil {
		return nil
	}
	return a.Rows
}

// AuditRow is one write to the outbox, recorded by faultline's trigger with
// the writer's application_name (the instance faultline handed the URL to).
type AuditRow struct {
	ID                   int64
	At                   time.Time
	Writer               string
	Op                   string // INSERT or UPDATE
	EventID              string
	OldStatus, NewStatus string
	OldClaim, NewClaim   string
	// Began is when the writing transaction began (what CURRENT_TIMESTAMP
	// reads in it); Due is when the write made the row next due (the
	// outbox's due column, observe.outbox.due), zero where the target has
	// none.
	Began, Due time.Time
	// Lease is when the row's claim runs out, as the write left it (the
	// outbox's lease column, observe.outbox.lease); zero where the target
	// has none, or the write left none.
	Lease time.Time
	// LSN is the WAL insert position when the row was written, as bytes
	// from 0/0: its transaction commits past it, so a log relay's slot
	// whose confirmed position is at or below it has not streamed it.
	LSN int64
}

// Claims reports whether the write is a claim: the row goes Processing
// under a new claim.
func (a AuditRow) Claims() bool {
	return a.Op == "UPDATE" && a.NewStatus == "Processing" && a.NewClaim != "" && a.NewClaim != a.OldClaim
}

// Settles reports whether the write settles its row's claim: the row
// leaves Processing (Published, a retry, Failed) by a write under a claim.
func (a AuditRow) Settles() bool {
	return a.Op == "UPDATE" && a.OldStatus == "Processing" && a.NewStatus != "Processing" && a.OldClaim != ""
}

// SettledAfterClaim counts the rows of the trail claimed in it and then
// settled under that claim: written Published, Pending (a retry) or
// Failed by a write whose old claim is the claim's.
func SettledAfterClaim(rows []AuditRow) int {
	claimed := map[string]string{} // eventId → the claim that took it in this trail
	settled := map[string]bool{}
	for _, r := range rows {
		switch {
		case r.Claims():
			claimed[r.EventID] = r.NewClaim
		case r.Settles() && claimed[r.EventID] == r.OldClaim:
			settled[r.EventID] = true
		}
	}
	return len(settled)
}
