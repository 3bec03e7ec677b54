package check

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLargestClaim(t *testing.T) {
	claim := func(id, claim string) AuditRow {
		return AuditRow{Op: "UPDATE", EventID: id, OldStatus: "Pending", NewStatus: "Processing", NewClaim: claim}
	}
	for _, tc := range []struct {
		name string
		rows []AuditRow
		want int
	}{
		{"no trail", nil, 0},
		{"inserts only", []AuditRow{{Op: "INSERT", EventID: "a", NewStatus: "Pending"}}, 0},
		{"one claim of three", []AuditRow{claim("a", "c1"), claim("b", "c1"), claim("c", "c1")}, 3},
		{"the larger of two", []AuditRow{claim("a", "c1"), claim("b", "c2"), claim("c", "c2")}, 2},
		{"a mark under the same claim is no claim", []AuditRow{claim("a", "c1"),
			{Op: "UPDATE", EventID: "a", OldStatus: "Processing", NewStatus: "Published", OldClaim: "c1", NewClaim: "c1"}}, 1},
	} {
		assert.Equal(t, tc.want, LargestClaim(tc.rows), tc.name)
	}
}

func TestTrafficEvidence(t *testing.T) {
	full := make([]AuditRow, 50)
	for i := range full {
		full[i] = AuditRow{Op: "UPDATE", NewStatus: "Processing", NewClaim: "c1"}
	}
	for _, tc := range []struct {
		name string
		e    Evidence
		o    Observation
		seen bool
	}{
		{"no role held", BacklogReleased(), Observation{}, false},
		{"held, backlog never seen", BacklogReleased(), Observation{Traffic: Traffic{Held: "relay", Want: 200}}, false},
		{"held, short of the backlog", BacklogReleased(), Observation{Traffic: Traffic{Held: "consumer", Want: 150, Backlog: 149}}, false},
		{"held, backlog seen", BacklogReleased(), Observation{Traffic: Traffic{Held: "consumer", Want: 150, Backlog: 208}}, true},
		{"a full claim", FullClaim(), Observation{Traffic: Traffic{Batch: 50}, Audit: full}, true},
		{"a claim short of the batch", FullClaim(), Observation{Traffic: Traffic{Batch: 50}, Audit: full[:49]}, false},
		{"no batch named: more than one row", FullClaim(), Observation{Audit: full[:2]}, true},
		{"no batch named: one row", FullClaim(), Observation{Audit: full[:1]}, false},
		{"a burst", ManyInFlight(16), Observation{Traffic: Traffic{MaxInFlight: 32}}, true},
		{"no burst", ManyInFlight(16), Observation{Traffic: Traffic{MaxInFlight: 4}}, false},
	} {
		seen, detail := tc.e.Check(&tc.o)
		assert.Equal(t, tc.seen, seen, "%s: %s", tc.name, detail)
		assert.NotEmpty(t, detail, tc.name)
	}
}
