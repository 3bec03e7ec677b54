package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// MeasureRetryPace reads a relay's round trip and its claim wait from the
// audit trail alone, counting only the retries after the mark (the
// bindings gone): a relay that backs off shows the same round trip as one
// that does not, only fewer retries.
func TestMeasureRetryPace(t *testing.T) {
	insert := func(id int64, ms int, row string) AuditRow {
		return AuditRow{ID: id, At: at(ms), Op: "INSERT", EventID: row, NewStatus: "Pending"}
	}
	claim := func(id int64, ms int, row, old, claim string) AuditRow {
		return AuditRow{ID: id, At: at(ms), Op: "UPDATE", EventID: row, OldStatus: "Pending", NewStatus: "Processing", OldClaim: old, NewClaim: claim}
	}
	write := func(id int64, ms int, row, claim, status string) AuditRow {
		return AuditRow{ID: id, At: at(ms), Op: "UPDATE", EventID: row, OldStatus: "Processing", NewStatus: status, OldClaim: claim, NewClaim: claim}
	}
	for _, tc := range []struct {
		name  string
		audit []AuditRow
		mark  int64
		want  RetryPace
		cycle time.Duration
	}{
		{name: "nothing yet", want: RetryPace{}},
		{
			name:  "published before the mark: a claim wait, no retry",
			audit: []AuditRow{insert(1, 0, "a"), claim(2, 30, "a", "", "c1"), write(3, 50, "a", "c1", "Published")},
			mark:  3,
			want:  RetryPace{ClaimWait: 30 * time.Millisecond},
		},
		{
			name: "no backoff: retried at once until Failed",
			audit: []AuditRow{
				insert(1, 0, "a"), insert(2, 0, "b"),
				claim(3, 20, "a", "", "c1"), claim(4, 40, "b", "", "c1"),
				write(5, 60, "a", "c1", "Pending"), write(6, 60, "b", "c1", "Pending"),
				claim(7, 70, "a", "c1", "c2"), write(8, 100, "a", "c2", "Pending"),
				claim(9, 110, "a", "c2", "c3"), write(10, 140, "a", "c3", "Failed"),
			},
			mark: 4,
			// round trips 40, 20, 30 ms; claim waits 20, 40 ms
			want:  RetryPace{RoundTrip: 30 * time.Millisecond, ClaimWait: 40 * time.Millisecond, Retries: 3, MostRetries: 2, Failed: 1, Claims: 2},
			cycle: 70 * time.Millisecond,
		},
		{
			name: "retries before the mark are not counted, their round trips are not either",
			audit: []AuditRow{
				insert(1, 0, "a"), claim(2, 10, "a", "", "c1"), write(3, 500, "a", "c1", "Pending"),
				claim(4, 600, "a", "c1", "c2"), write(5, 650, "a", "c2", "Pending"),
			},
			mark:  3,
			want:  RetryPace{RoundTrip: 50 * time.Millisecond, ClaimWait: 10 * time.Millisecond, Retries: 1, MostRetries: 1, Claims: 1},
			cycle: 60 * time.Millisecond,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := MeasureRetryPace(tc.audit, tc.mark)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.cycle, got.Cycle())
		})
	}
}
