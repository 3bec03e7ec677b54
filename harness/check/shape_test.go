package check

import (
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/protocol/eventlog"

	"github.com/stretchr/testify/assert"
)

func TestLargestClaim(t *testing.T) {
	claim := func(id, claim string) history.AuditRow {
		return history.AuditRow{Op: "UPDATE", EventID: id, OldStatus: "Pending", NewStatus: "Processing", NewClaim: claim}
	}
	for _, tc := range []struct {
		name string
		rows []history.AuditRow
		want int
	}{
		{"no trail", nil, 0},
		{"inserts only", []history.AuditRow{{Op: "INSERT", EventID: "a", NewStatus: "Pending"}}, 0},
		{"one claim of three", []history.AuditRow{claim("a", "c1"), claim("b", "c1"), claim("c", "c1")}, 3},
		{"the larger of two", []history.AuditRow{claim("a", "c1"), claim("b", "c2"), claim("c", "c2")}, 2},
		{"a mark under the same claim is no claim", []history.AuditRow{claim("a", "c1"),
			{Op: "UPDATE", EventID: "a", OldStatus: "Processing", NewStatus: "Published", OldClaim: "c1", NewClaim: "c1"}}, 1},
	} {
		assert.Equal(t, tc.want, LargestClaim(tc.rows), tc.name)
	}
}

func TestTrafficEvidence(t *testing.T) {
	full := make([]history.AuditRow, 50)
	for i := range full {
		full[i] = history.AuditRow{Op: "UPDATE", NewStatus: "Processing", NewClaim: "c1"}
	}
	for _, tc := range []struct {
		name string
		e    Evidence
		o    history.Record
		seen bool
	}{
		{"no role held", BacklogReleased(), history.Record{}, false},
		{"held, backlog never seen", BacklogReleased(), history.Record{Traffic: history.Traffic{Held: "relay", Want: 200}}, false},
		{"held, short of the backlog", BacklogReleased(), history.Record{Traffic: history.Traffic{Held: "consumer", Want: 150, Backlog: 149}}, false},
		{"held, backlog seen", BacklogReleased(), history.Record{Traffic: history.Traffic{Held: "consumer", Want: 150, Backlog: 208}}, true},
		{"a full claim", FullClaim(), history.Record{Traffic: history.Traffic{Batch: 50}, Audit: &history.AuditTrail{Rows: full}}, true},
		{"a claim short of the batch", FullClaim(), history.Record{Traffic: history.Traffic{Batch: 50}, Audit: &history.AuditTrail{Rows: full[:49]}}, false},
		{"no batch named: more than one row", FullClaim(), history.Record{Audit: &history.AuditTrail{Rows: full[:2]}}, true},
		{"no batch named: one row", FullClaim(), history.Record{Audit: &history.AuditTrail{Rows: full[:1]}}, false},
		{"a burst", ManyInFlight(16), history.Record{Traffic: history.Traffic{MaxInFlight: 32}}, true},
		{"no burst", ManyInFlight(16), history.Record{Traffic: history.Traffic{MaxInFlight: 4}}, false},
		{"load held", SustainedLoad(0.6), history.Record{Traffic: history.Traffic{Carried: 200, Sent: 150}}, true},
		{"load fell short", SustainedLoad(0.6), history.Record{Traffic: history.Traffic{Carried: 200, Sent: 100}}, false},
		{"no probe measured", SustainedLoad(0.6), history.Record{Traffic: history.Traffic{Sent: 100}}, false},
	} {
		seen, detail := tc.e.Check(&tc.o)
		assert.Equal(t, tc.seen, seen, "%s: %s", tc.name, detail)
		assert.NotEmpty(t, detail, tc.name)
	}
}

// A held consumer the broker dropped while frozen is still released to
// its backlog; the evidence says it came back by reconnecting.
func TestBacklogReleasedSaysAConsumerReconnected(t *testing.T) {
	counted := func(n int) *int { return &n }
	held := func(froze, thawed *int) history.Traffic {
		return history.Traffic{Held: "consumer", Want: 150, Backlog: 150, ConsumersAtFreeze: froze, ConsumersAtThaw: thawed}
	}
	for _, tc := range []struct {
		name      string
		traffic   history.Traffic
		reconnect bool
	}{
		{"still subscribed", held(counted(1), counted(1)), false},
		{"dropped while frozen", held(counted(1), counted(0)), true},
		{"one of four channels' consumers dropped", held(counted(4), counted(3)), true},
		{"more at the thaw", held(counted(0), counted(1)), false},
		{"not counted at the freeze", held(nil, counted(0)), false},
		{"not counted at the thaw", held(counted(1), nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen, detail := BacklogReleased().Check(&history.Record{Traffic: tc.traffic})
			assert.True(t, seen, detail)
			assert.Equal(t, tc.reconnect, strings.Contains(detail, "reconnected"), detail)
		})
	}
}

func TestFullPrefetch(t *testing.T) {
	n := func(v int) *int { return &v }
	for _, tc := range []struct {
		name    string
		traffic history.Traffic
		seen    bool
	}{
		{"no consumer held", history.Traffic{Held: "relay"}, false},
		{"not read at the thaw", history.Traffic{Held: "consumer"}, false},
		{"its prefetch held, more ready behind it", history.Traffic{Held: "consumer", ReadyAtThaw: n(144), UnackedAtThaw: n(96), ConsumersAtThaw: n(3)}, true},
		{"dropped while frozen: nothing held", history.Traffic{Held: "consumer", ReadyAtThaw: n(240), UnackedAtThaw: n(0), ConsumersAtThaw: n(0)}, false},
		{"the whole backlog handed over (a prefetch larger than it)", history.Traffic{Held: "consumer", ReadyAtThaw: n(0), UnackedAtThaw: n(240)}, true},
	} {
		seen, detail := FullPrefetch().Check(&history.Record{Traffic: tc.traffic})
		assert.Equal(t, tc.seen, seen, "%s: %s", tc.name, detail)
	}
}

func TestClaimsInFlight(t *testing.T) {
	claim := func(writer, id, claim string) history.AuditRow {
		return history.AuditRow{Writer: writer, Op: "UPDATE", EventID: id, OldStatus: "Pending", NewStatus: "Processing", NewClaim: claim}
	}
	settle := func(writer, id, claim, status string) history.AuditRow {
		return history.AuditRow{Writer: writer, Op: "UPDATE", EventID: id, OldStatus: "Processing", NewStatus: status, OldClaim: claim, NewClaim: claim}
	}
	for _, tc := range []struct {
		name string
		rows []history.AuditRow
		want int
	}{
		{"no trail", nil, 0},
		{"one claim, settled", []history.AuditRow{claim("relay-1", "a", "c1"), claim("relay-1", "b", "c1"), settle("relay-1", "a", "c1", "Published")}, 1},
		{"one after the other", []history.AuditRow{claim("relay-1", "a", "c1"), settle("relay-1", "a", "c1", "Published"), claim("relay-1", "b", "c2")}, 1},
		{"a second claim before the first was settled", []history.AuditRow{claim("relay-1", "a", "c1"), claim("relay-1", "b", "c2"), settle("relay-1", "a", "c1", "Pending")}, 2},
		{"two relays, one claim each", []history.AuditRow{claim("relay-1", "a", "c1"), claim("relay-2", "b", "c2"), settle("relay-1", "a", "c1", "Published")}, 1},
		{"a renewal is no settling", []history.AuditRow{claim("relay-1", "a", "c1"), settle("relay-1", "a", "c1", "Processing"), claim("relay-1", "b", "c2")}, 2},
		{"given up on settles it", []history.AuditRow{claim("relay-1", "a", "c1"), settle("relay-1", "a", "c1", "Failed"), claim("relay-1", "b", "c2")}, 1},
	} {
		assert.Equal(t, tc.want, ClaimsInFlight(tc.rows), tc.name)
		seen, detail := TwoClaimsInFlight().Check(&history.Record{Audit: &history.AuditTrail{Rows: tc.rows}})
		assert.Equal(t, tc.want >= 2, seen, "%s: %s", tc.name, detail)
	}
}

func TestNackBeforeAck(t *testing.T) {
	pub := func(claim, id string) eventlog.Entry {
		return eventlog.Entry{Event: eventlog.Published, ClaimID: claim, EventID: id}
	}
	ans := func(event, claim, id string) eventlog.Entry {
		return eventlog.Entry{Event: event, ClaimID: claim, EventID: id}
	}
	for _, tc := range []struct {
		name   string
		log    []eventlog.Entry
		nacked int
	}{
		{"no log", nil, 0},
		{"all confirmed", []eventlog.Entry{pub("c1", "a"), pub("c1", "b"), ans(eventlog.Confirmed, "c1", "a"), ans(eventlog.Confirmed, "c1", "b")}, 0},
		{"nacks after the confirms: the queue filled", []eventlog.Entry{pub("c1", "a"), pub("c1", "b"), pub("c1", "c"),
			ans(eventlog.Confirmed, "c1", "a"), ans(eventlog.Nacked, "c1", "b"), ans(eventlog.Nacked, "c1", "c")}, 0},
		{"a nack ahead of a confirm: room made", []eventlog.Entry{pub("c1", "a"), pub("c1", "b"), pub("c1", "c"),
			ans(eventlog.Nacked, "c1", "a"), ans(eventlog.Nacked, "c1", "b"), ans(eventlog.Confirmed, "c1", "c")}, 2},
		{"the nack and the confirm in other claims", []eventlog.Entry{pub("c1", "a"), pub("c2", "b"),
			ans(eventlog.Nacked, "c1", "a"), ans(eventlog.Confirmed, "c2", "b")}, 0},
		{"answer lines written before their claim's later publishes still follow the publish order", []eventlog.Entry{pub("c1", "a"), pub("c1", "b"),
			ans(eventlog.Confirmed, "c1", "b"), ans(eventlog.Nacked, "c1", "a")}, 1},
		{"the last publish unanswered (the relay's wait ran out): not decided by a confirmed last", []eventlog.Entry{pub("c1", "a"), pub("c1", "b"), pub("c1", "c"),
			ans(eventlog.Nacked, "c1", "a"), ans(eventlog.Confirmed, "c1", "b")}, 0},
	} {
		_, n := NackBeforeAck(tc.log)
		assert.Equal(t, tc.nacked, n, tc.name)
		seen, detail := NackThenAck().Check(&history.Record{Log: tc.log})
		assert.Equal(t, tc.nacked > 0, seen, "%s: %s", tc.name, detail)
	}
}

func TestReturnsAheadOfTheirBatch(t *testing.T) {
	line := func(process, event, claim, id string) eventlog.Entry {
		return eventlog.Entry{Process: process, Event: event, ClaimID: claim, EventID: id}
	}
	r1 := func(event, claim, id string) eventlog.Entry { return line("relay-1", event, claim, id) }
	for _, tc := range []struct {
		name     string
		log      []eventlog.Entry
		settling string
		returns  int
	}{
		{"no log", nil, "", 0},
		{"each batch's returns drained as it settles", []eventlog.Entry{
			r1(eventlog.Published, "c1", "a"), r1(eventlog.Published, "c2", "b"),
			r1(eventlog.Returned, "c1", "a"), r1(eventlog.Confirmed, "c1", "a"),
			r1(eventlog.Returned, "c2", "b"), r1(eventlog.Confirmed, "c2", "b")}, "", 0},
		{"the later batch's returns drained while the first settles", []eventlog.Entry{
			r1(eventlog.Published, "c1", "a"), r1(eventlog.Published, "c2", "b"), r1(eventlog.Published, "c2", "c"),
			r1(eventlog.Returned, "c1", "a"), r1(eventlog.Returned, "c2", "b"), r1(eventlog.Returned, "c2", "c"), r1(eventlog.Confirmed, "c1", "a"),
			r1(eventlog.Confirmed, "c2", "b"), r1(eventlog.Confirmed, "c2", "c")}, "c1", 2},
		{"a nack settles too", []eventlog.Entry{
			r1(eventlog.Published, "c1", "a"), r1(eventlog.Published, "c2", "b"),
			r1(eventlog.Returned, "c2", "b"), r1(eventlog.Nacked, "c1", "a")}, "c1", 1},
		{"an earlier batch left unanswered (its wait ran out) is not settled by a later one's answers", []eventlog.Entry{
			r1(eventlog.Published, "c1", "a"), r1(eventlog.Returned, "c1", "a"),
			r1(eventlog.Published, "c2", "b"), r1(eventlog.Confirmed, "c2", "b")}, "", 0},
		{"another relay's return", []eventlog.Entry{
			r1(eventlog.Published, "c1", "a"), line("relay-2", eventlog.Published, "d1", "b"),
			line("relay-2", eventlog.Returned, "d1", "b"), r1(eventlog.Confirmed, "c1", "a")}, "", 0},
		{"a return logged after its own batch's answers", []eventlog.Entry{
			r1(eventlog.Published, "c1", "a"), r1(eventlog.Published, "c2", "b"),
			r1(eventlog.Confirmed, "c2", "b"), r1(eventlog.Returned, "c2", "b"), r1(eventlog.Confirmed, "c1", "a")}, "", 0},
	} {
		settling, n := ReturnsAheadOfTheirBatch(tc.log)
		assert.Equal(t, tc.returns, n, tc.name)
		assert.Equal(t, tc.settling, settling, tc.name)
		seen, detail := ReturnAheadOfItsBatch().Check(&history.Record{Log: tc.log})
		assert.Equal(t, tc.returns > 0, seen, "%s: %s", tc.name, detail)
	}
}
