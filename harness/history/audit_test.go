package history

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSettledAfterClaim(t *testing.T) {
	claim := func(id, claim string) AuditRow {
		return AuditRow{Op: "UPDATE", EventID: id, OldStatus: "Pending", NewStatus: "Processing", NewClaim: claim}
	}
	settle := func(id, claim, status string) AuditRow {
		return AuditRow{Op: "UPDATE", EventID: id, OldStatus: "Processing", NewStatus: status, OldClaim: claim, NewClaim: claim}
	}
	for _, tc := range []struct {
		name string
		rows []AuditRow
		want int
	}{
		{"no trail", nil, 0},
		{"claimed, not settled", []AuditRow{claim("a", "c1")}, 0},
		{"retried and published", []AuditRow{claim("a", "c1"), claim("b", "c1"), settle("a", "c1", "Pending"), settle("b", "c1", "Published")}, 2},
		{"a row retried twice counts once", []AuditRow{claim("a", "c1"), settle("a", "c1", "Pending"), claim("a", "c2"), settle("a", "c2", "Pending")}, 1},
		{"settled under a claim made before the trail", []AuditRow{settle("a", "c0", "Published")}, 0},
		{"a stale claim's write does not count", []AuditRow{claim("a", "c1"), claim("a", "c2"), settle("a", "c1", "Published")}, 0},
	} {
		assert.Equal(t, tc.want, SettledAfterClaim(tc.rows), tc.name)
	}
}
