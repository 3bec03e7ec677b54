package fault

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/protocol"
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
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, newTakeover([]map[string]bool{mine}).see(tc.e)) })
	}
	assert.Empty(t, lastClaimOf(nil))
	assert.Equal(t, 8*time.Second, TakeoverWait(5*time.Second, 2*time.Second), "four leases")
	assert.Equal(t, 120*time.Second, TakeoverWait(5*time.Second, 30*time.Second), "a long lease keeps its window")
}

// A relay frozen before its retry write holds every claim whose returns it
// logged and whose retries it has not written: with two batches in flight
// the claim at the point may be the older one. The takeover is seen once
// each of them has had a row claimed by another relay.
func TestTakeoverBeforeRetry(t *testing.T) {
	frozen := []eventlog.Entry{
		{Event: eventlog.Claimed, EventID: "a", ClaimID: "c1"},
		{Event: eventlog.Returned, EventID: "a", ClaimID: "c1"},
		{Event: eventlog.Retry, EventID: "a", ClaimID: "c1"},
		{Event: eventlog.Claimed, EventID: "b", ClaimID: "c2"},
		{Event: eventlog.Claimed, EventID: "c", ClaimID: "c2"},
		{Event: eventlog.Claimed, EventID: "d", ClaimID: "c3"},
		{Event: eventlog.Returned, EventID: "b", ClaimID: "c2"},
		{Event: eventlog.Returned, EventID: "d", ClaimID: "c3"},
		{Event: eventlog.Claimed, EventID: "e", ClaimID: "c4"},
	}
	claims := frozenClaims(frozen, protocol.RelayBeforeRetry)
	assert.Equal(t, []map[string]bool{{"b": true}, {"d": true}}, claims, "c1 written, c4 not returned")
	assert.Equal(t, []map[string]bool{{"e": true}}, frozenClaims(frozen, protocol.RelayAfterConfirm), "elsewhere the last claim")
	assert.Empty(t, frozenClaims(nil, protocol.RelayBeforeRetry))
	assert.Equal(t, []map[string]bool{{"a": true}}, frozenClaims(frozen[:1], protocol.RelayBeforeRetry), "no returns logged: the last claim")

	over := newTakeover(claims)
	assert.False(t, over.see(eventlog.Entry{Event: eventlog.Claimed, EventID: "c", ClaimID: "c9"}), "a row not returned")
	assert.False(t, over.see(eventlog.Entry{Event: eventlog.Claimed, EventID: "d", ClaimID: "c9"}), "one claim of two")
	assert.False(t, over.see(eventlog.Entry{Event: eventlog.Published, EventID: "b", ClaimID: "c9"}), "published is not claimed")
	assert.True(t, over.see(eventlog.Entry{Event: eventlog.Claimed, EventID: "b", ClaimID: "c9"}), "both taken over")
}
