package check

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// TestResolve: each piece of evidence is read where the target gives what
// it needs, its black-box source where it does not, and a crash point hit
// at a window the run opens from outside is shown by the fault instead.
func TestResolve(t *testing.T) {
	logs := func(n history.Source) bool { return true }
	blind := func(n history.Source) bool {
		return n != history.SourceProducerLog && n != history.SourceRelayLog && n != history.SourceConsumerLog
	}
	// an offset relay's outbox: audited inserts, no status column
	noStatus := func(n history.Source) bool { return blind(n) && n != history.SourceAuditStatus }
	for _, tc := range []struct {
		name        string
		evidence    []Evidence
		gives       func(history.Source) bool
		fromOutside []string
		want        []string
	}{
		{"event logs given", []Evidence{Redelivered(), AtLeast(1, eventlog.Retry)}, logs, nil,
			[]string{"a message redelivered by the broker", `at least 1 "retry-scheduled"`}},
		{"no event log: the broker, the audit trail", []Evidence{Redelivered(), AtLeast(1, eventlog.Retry)}, blind, nil,
			[]string{"the broker redelivered to the consumer (its redelivery counter)", "a retry written back to Pending (audit trail)"}},
		{"two log lines shown by one source: once", []Evidence{AtLeast(1, eventlog.Nacked), AtLeast(1, eventlog.Retry)}, blind, nil,
			[]string{"a retry written back to Pending (audit trail)"}},
		{"no source outside: as it is", []Evidence{AtLeast(1, eventlog.Delivered)}, blind, nil,
			[]string{`at least 1 "` + eventlog.Delivered + `"`}},
		{"no event log and no status in the audit trail: not checked, never read", []Evidence{AtLeast(1, eventlog.Retry)}, noStatus, nil,
			[]string{"a retry written back to Pending (audit trail)"}},
		{"crash point opened from outside on a target with logs", []Evidence{CrashPointHit("consumer.after-receive")}, logs, []string{"consumer.after-receive"},
			[]string{"crash point consumer.after-receive hit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Resolve(tc.evidence, tc.gives, tc.fromOutside)
			var names []string
			for _, e := range got {
				names = append(names, e.Name)
			}
			assert.Equal(t, tc.want, names)
			if len(tc.fromOutside) > 0 {
				assert.NotEmpty(t, got[0].Unchecked, "shown by the fault, not by a crash point line")
			}
			if !tc.gives(history.SourceAuditStatus) {
				assert.Contains(t, got[0].Unchecked, string(history.SourceAuditStatus), "a fallback the target cannot give is not checked")
			}
		})
	}
}

// TestBlackBoxSourcesOfLogEvidence: the audit trail and the outbox show a
// renewal and an event published ahead of its predecessor.
func TestBlackBoxSourcesOfLogEvidence(t *testing.T) {
	claim := func(id, from, to string) history.AuditRow {
		return history.AuditRow{Op: "UPDATE", EventID: id, OldStatus: "Pending", NewStatus: "Processing", OldClaim: from, NewClaim: to, Writer: "relay-1"}
	}
	mark := func(id, c string) history.AuditRow {
		return history.AuditRow{Op: "UPDATE", EventID: id, OldStatus: "Processing", NewStatus: "Published", OldClaim: c, NewClaim: c}
	}
	renew := history.AuditRow{Op: "UPDATE", EventID: "e1", OldStatus: "Processing", NewStatus: "Processing", OldClaim: "c1", NewClaim: "c1", Writer: "relay-1"}
	outbox := []history.OutboxRow{{EventID: "e1", AggregateID: "a", Sequence: 1}, {EventID: "e2", AggregateID: "a", Sequence: 2}}
	for _, tc := range []struct {
		name string
		ev   Evidence
		o    history.Record
		want bool
	}{
		{"renewal", RenewedInAudit(), history.Record{Audit: &history.AuditTrail{Rows: []history.AuditRow{claim("e1", "", "c1"), renew, mark("e1", "c1")}}}, true},
		{"no renewal", RenewedInAudit(), history.Record{Audit: &history.AuditTrail{Rows: []history.AuditRow{claim("e1", "", "c1"), mark("e1", "c1")}}}, false},
		{"successor first", PublishedAheadOfPredecessor(), history.Record{Outbox: outbox, Audit: &history.AuditTrail{Rows: []history.AuditRow{mark("e2", "c2"), mark("e1", "c1")}}}, true},
		{"in order", PublishedAheadOfPredecessor(), history.Record{Outbox: outbox, Audit: &history.AuditTrail{Rows: []history.AuditRow{mark("e1", "c1"), mark("e2", "c2")}}}, false},
		{"failed rows", failedInOutbox(1), history.Record{Outbox: []history.OutboxRow{{EventID: "e1", Status: "Failed"}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen, detail := tc.ev.Check(&tc.o)
			assert.Equal(t, tc.want, seen, detail)
		})
	}
}
