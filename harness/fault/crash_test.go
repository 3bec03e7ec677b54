package fault

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// A freeze past the lease opened its window once another relay claimed a
// row of the frozen relay's last claim; a claim of other rows, or any
// other line about its rows, is not a takeover.
func TestTakeover(t *testing.T) {
	frozen := []eventlog.Entry{
		{Event: eventlog.Claimed, EventID: "a", ClaimID: "c1"},
		{Event: eventlog.Marked, EventID: "a", ClaimID: "c1"},
		{Event: eventlog.Claimed, EventID: "b", ClaimID: "c2"},
		{Event: eventlog.Claimed, EventID: "c", ClaimID: "c2"},
		{Event: eventlog.Published, EventID: "b", ClaimID: "c2"},
	}
	mine := lastClaimOf(frozen)
	assert.Equal(t, map[string]bool{"b": true, "c": true}, mine)
	for _, tc := range []struct {
		name string
		e    eventlog.Entry
		want bool
	}{
		{"a row of its last claim claimed", eventlog.Entry{Event: eventlog.Claimed, EventID: "c", ClaimID: "c9"}, true},
		{"a row of an earlier claim", eventlog.Entry{Event: eventlog.Claimed, EventID: "a", ClaimID: "c9"}, false},
		{"another row", eventlog.Entry{Event: eventlog.Claimed, EventID: "z", ClaimID: "c9"}, false},
		{"its row published, not claimed", eventlog.Entry{Event: eventlog.Published, EventID: "b", ClaimID: "c9"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, takesOver(mine, tc.e)) })
	}
	assert.Empty(t, lastClaimOf(nil))
	assert.Equal(t, 8*time.Second, TakeoverWait(5*time.Second, 2*time.Second), "four leases")
	assert.Equal(t, 120*time.Second, TakeoverWait(5*time.Second, 30*time.Second), "a long lease keeps its window")
}
