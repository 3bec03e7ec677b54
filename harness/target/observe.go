package target

import (
	"regexp"
	"strings"
)

// Observe names the target's tables faultline may watch from outside,
// without the target's help: it installs triggers on them in each run's
// own databases (an audit trail of every outbox write with its writer,
// and a notification the moment a transaction that wrote them commits).
// Every table defaults to the article's.
type Observe struct {
	Outbox  Table // the outbox: its event id, status and claim columns
	Facts   Table // the facts (the producer's business table)
	Effects Table // the effects (the consumer's), with its event id column
}

// Table is a table of the target and the columns faultline reads.
type Table struct {
	Database, Name string
	// Columns: the event id (outbox, effects), the status and the claim
	// (outbox).
	EventID, Status, Claim string
	// Due is the outbox's column of when a row is next due (the article's
	// next_attempt_at): a retry write's due time less the write's own time
	// is the backoff the relay gave the row, read whatever the machine's
	// speed. DueDefault: the article's name, not written in the file; a
	// table without it is watched without it.
	Due        string
	DueDefault bool
	// Lease is the outbox's column of when a claim's lease runs out (the
	// article's locked_until): a row claimed before the lease its last
	// claim wrote ran out broke the lease's promise (check lease-kept).
	// LeaseDefault: the article's name, not written in the file; a table
	// without it is watched without it.
	Lease        string
	LeaseDefault bool
	// Statuses maps the target's values of the outbox's status column to
	// the article's (Pending, Processing, Published, Failed), for what
	// faultline reads through its own triggers (the audit trail, the
	// commits a black-box window waits for); a value it does not list is
	// read as it is. Empty: the target uses the article's names.
	Statuses map[string]string
	Default  bool // the article's, not written in the file
	Line     int
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// ArticleStatuses are the outbox statuses of the article, by which
// faultline reasons about a row.
func ArticleStatuses() []string { return []string{"Pending", "Processing", "Published", "Failed"} }

// ArticleStatus is the article's name for the target's status value v.
func (t Table) ArticleStatus(v string) string {
	if a, ok := t.Statuses[v]; ok {
		return a
	}
	return v
}

// TargetStatus is the target's value for the article's status a: the one
// Statuses maps to it, or a itself.
func (t Table) TargetStatus(a string) string {
	for v, article := range t.Statuses {
		if article == a {
			return v
		}
	}
	return a
}

// Ident splits a possibly schema-qualified name for pgx.Identifier.
func Ident(name string) []string { return strings.Split(name, ".") }

func (d *decoder) decodeObserve(m *mapping, c Contract, model string) Observe {
	status, claim := d.outboxDefaults(model)
	due, lease := "", ""
	if status != "" {
		due = "next_attempt_at"
	}
	if claim != "" {
		lease = "locked_until"
	}
	o := Observe{
		Outbox: Table{Database: c.Facts.Database, Name: "outbox_messages", EventID: "event_id", Status: status, Claim: claim,
			Due: due, DueDefault: due != "", Lease: lease, LeaseDefault: lease != "", Default: true},
		Facts:   Table{Database: c.Facts.Database, Name: "orders", Default: true},
		Effects: Table{Database: c.Effects.Database, Name: "inventory_reservations", EventID: "event_id", Default: true},
	}
	v, ok := m.get("observe")
	if !ok {
		return o
	}
	om, ok := d.mapping(v, "outbox", "facts", "effects")
	if !ok {
		return o
	}
	read := func(key string, t *Table, columns ...string) {
		tv, ok := om.get(key)
		if !ok {
			return
		}
		known := append([]string{"database", "table"}, columns...)
		if key == "outbox" {
			known = append(known, "statuses")
		}
		tm, ok := d.mapping(tv, known...)
		if !ok {
			return
		}
		out := Table{Line: tv.line, EventID: t.EventID, Status: t.Status, Claim: t.Claim, Due: t.Due, DueDefault: t.DueDefault,
			Lease: t.Lease, LeaseDefault: t.LeaseDefault}
		if dv, ok := d.require(tm, "database", "the database the table is in"); ok {
			if db, ok := d.nonEmpty(dv); ok && d.declared(dv.line, dv.field, db) {
				out.Database = db
			}
		}
		if nv, ok := d.require(tm, "table", "the table's name"); ok {
			out.Name, _ = d.matching(nv, identifier, "a table name (schema.table allowed)")
		}
		for _, col := range columns {
			cv, ok := tm.get(col)
			if !ok {
				continue
			}
			name, ok := d.matching(cv, identifier, "a column name")
			if !ok {
				continue
			}
			switch col {
			case "event_id":
				out.EventID = name
			case "status":
				out.Status = name
			case "claim":
				out.Claim = name
			case "due":
				out.Due, out.DueDefault = name, false
			case "lease":
				out.Lease, out.LeaseDefault = name, false
			}
		}
		if sv, ok := tm.get("statuses"); ok {
			out.Statuses = d.outboxStatuses(sv)
		}
		*t = out
	}
	read("outbox", &o.Outbox, "event_id", "status", "claim", "due", "lease")
	read("facts", &o.Facts)
	read("effects", &o.Effects, "event_id")
	return o
}

// outboxStatuses reads observe.outbox.statuses: each of the target's status
// values to the article's name for it, no article status twice.
func (d *decoder) outboxStatuses(v val) map[string]string {
	m, ok := d.mapping(v)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m.keys))
	given := map[string]string{}
	for _, value := range m.keys {
		av := m.vals[value]
		article, ok := d.oneOf(av, "article status", ArticleStatuses())
		if !ok {
			continue
		}
		if other, ok := given[article]; ok {
			d.problem(av.line, av.field, "%s is given twice (also for %q)", article, other)
			continue
		}
		given[article] = value
		out[value] = article
	}
	return out
}
