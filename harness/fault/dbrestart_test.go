package fault

import (
	"testing"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/stretchr/testify/assert"
)

// TestSlotAfterCrash: where a log relay's slot came back after a database
// crash is said against the committed rows (those at or past it are
// streamed again) and against the position read before the crash.
func TestSlotAfterCrash(t *testing.T) {
	inserts := []history.AuditRow{
		{Op: "INSERT", EventID: "a", LSN: 1000},
		{Op: "INSERT", EventID: "b", LSN: 2000},
		{Op: "INSERT", EventID: "c"}, // no position kept: not counted
	}
	slot := func(confirmed int64, text string) infra.LogSlot {
		return infra.LogSlot{Name: "s", Confirmed: text, ConfirmedBytes: confirmed}
	}
	for _, tc := range []struct {
		name      string
		after     infra.LogSlot
		one       bool
		before    infra.LogSlot
		hadBefore bool
		want      string
	}{
		{"no slot", infra.LogSlot{}, false, infra.LogSlot{}, false, "no one slot with a confirmed position after the crash"},
		{"past every row", slot(2500, "0/9C4"), true, infra.LogSlot{}, false, "slot s back at 0/9C4 with 0 committed rows past it"},
		{"at a row's insert: not confirmed", slot(2000, "0/7D0"), true, infra.LogSlot{}, false, "slot s back at 0/7D0 with 1 committed rows past it"},
		{"behind both", slot(900, "0/384"), true, slot(900, "0/384"), true, "slot s back at 0/384 with 2 committed rows past it"},
		{"went back", slot(900, "0/384"), true, slot(2500, "0/9C4"), true,
			"slot s back at 0/384 with 2 committed rows past it (it had confirmed 0/9C4 before the crash: the server streams again what the relay had confirmed)"},
		{"another slot before", slot(900, "0/384"), true, infra.LogSlot{Name: "t", Confirmed: "0/9C4", ConfirmedBytes: 2500}, true, "slot s back at 0/384 with 2 committed rows past it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, slotAfterCrash(tc.after, tc.one, tc.before, tc.hadBefore, inserts))
		})
	}
}
