package fault

import (
	"testing"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/stretchr/testify/assert"
)

// TestPositionPassed: a log relay killed at a publish had its window open
// only while its slot's confirmed position was not past the published
// row's insert; a row the trail does not hold cannot be compared.
func TestPositionPassed(t *testing.T) {
	trail := []history.AuditRow{
		{Op: "INSERT", EventID: "a", LSN: 1000},
		{Op: "INSERT", EventID: "b", LSN: 2000},
		{Op: "INSERT", EventID: "c"}, // inserted before the trail kept positions
	}
	for _, tc := range []struct {
		name      string
		confirmed int64
		event     string
		insert    int64
		passed    bool
	}{
		{"behind the row", 1500, "b", 2000, false},
		{"at the row's insert: its commit is after it", 2000, "b", 2000, false},
		{"past the row", 2400, "b", 2000, true},
		{"past an earlier row", 1500, "a", 1000, true},
		{"a row without its position", 1500, "c", 0, false},
		{"a row the trail does not hold", 1500, "z", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			insert, passed := positionPassed(infra.LogSlot{Name: "s", ConfirmedBytes: tc.confirmed}, trail, tc.event)
			assert.Equal(t, tc.insert, insert)
			assert.Equal(t, tc.passed, passed)
		})
	}
}
