package fault

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/harness/history"
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

// From the audit trail, a frozen relay holds each claim's rows it has not
// written since (a renewal keeps a row, a retry or mark ends it); another
// writer's claim of such a row takes the claim over, and a takeover the
// relay went on working after is history.
func TestAuditedTakeover(t *testing.T) {
	claim := func(id int64, writer, event, old, new string) history.AuditRow {
		return history.AuditRow{ID: id, Writer: writer, Op: "UPDATE", EventID: event, OldStatus: "Pending", NewStatus: "Processing", OldClaim: old, NewClaim: new}
	}
	write := func(id int64, writer, event, status, claim string) history.AuditRow {
		return history.AuditRow{ID: id, Writer: writer, Op: "UPDATE", EventID: event, OldStatus: "Processing", NewStatus: status, OldClaim: claim, NewClaim: claim}
	}
	trail := []history.AuditRow{
		{ID: 1, Writer: "producer", Op: "INSERT", EventID: "a", NewStatus: "Pending"},
		claim(2, "relay-1", "a", "", "c1"),
		write(3, "relay-1", "a", "Published", "c1"), // marked: no longer held
		claim(4, "relay-1", "x", "", "c0"),
		claim(5, "relay-2", "x", "c0", "c9"), // taken over, and relay-1 went on: history
		claim(6, "relay-1", "b", "", "c2"),
		claim(7, "relay-1", "c", "", "c2"),
		write(8, "relay-1", "c", "Processing", "c2"), // a renewal keeps it
		claim(9, "relay-2", "d", "", "c3"),           // another relay's
		claim(10, "relay-1", "e", "", "c4"),
		claim(11, "relay-1", "f", "", "c5"),
		write(12, "relay-1", "f", "Pending", ""), // its retry written: no longer held
	}
	held := auditHeld(trail, "relay-1")
	assert.Equal(t, map[string]map[string]bool{"c2": {"b": true, "c": true}, "c4": {"e": true}}, held.claims)
	assert.Equal(t, [][]string{{"b", "c"}, {"e"}}, sortedClaims(held.pending()))
	assert.Empty(t, held.taken, "a takeover before its last write is history")
	assert.Equal(t, 2, held.live())

	for _, tc := range []struct {
		name    string
		more    []history.AuditRow
		taken   int
		pending int
	}{
		{"nothing yet", nil, 0, 2},
		{"one claim's row taken", []history.AuditRow{claim(13, "relay-2", "c", "c2", "c6")}, 1, 1},
		{"its own claim again is no takeover", []history.AuditRow{claim(13, "relay-1", "c", "c2", "c7"), claim(14, "relay-1", "e", "c4", "c7")}, 0, 2},
		{"a row of a claim it does not hold", []history.AuditRow{claim(13, "relay-2", "f", "", "c6"), claim(14, "relay-2", "a", "", "c6")}, 0, 2},
		{"a write that is not a claim", []history.AuditRow{write(13, "relay-2", "b", "Published", "c2")}, 0, 2},
		{"a row of each", []history.AuditRow{claim(13, "relay-2", "b", "c2", "c6"), claim(14, "relay-3", "e", "c4", "c8")}, 2, 0},
		{"a claim it settles itself after the freeze", []history.AuditRow{claim(13, "relay-2", "b", "c2", "c6"), write(14, "relay-1", "e", "Published", "c4")}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := auditHeld(append(slices.Clone(trail), tc.more...), "relay-1")
			assert.Len(t, got.taken, tc.taken)
			assert.Len(t, got.pending(), tc.pending)
		})
	}
	assert.Zero(t, auditHeld(trail, "relay-3").live(), "a relay that holds nothing")
	taken := auditHeld(append(slices.Clone(trail), claim(13, "relay-2", "b", "c2", "c6"), claim(14, "relay-2", "c", "c2", "c6")), "relay-1")
	assert.Equal(t, 2, taken.live(), "a claim taken whole is still one the relay had at the freeze")
	assert.Equal(t, "relay-2", taken.by)
}

func sortedClaims(claims [][]string) [][]string {
	slices.SortFunc(claims, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return claims
}
