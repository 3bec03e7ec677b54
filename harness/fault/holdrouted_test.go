package fault

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/protocol/eventlog"
)

func TestHeldBatchIsTheLastPublishedAheadOfTheHit(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(1_000_000 + ms)) }
	line := func(ms int, event, claim, id string) eventlog.Entry {
		return eventlog.Entry{Time: at(ms), Event: event, ClaimID: claim, EventID: id}
	}
	hit := eventlog.Entry{Time: at(50), Event: eventlog.CrashPoint, Point: "after-publish", Hit: 2}
	log := []eventlog.Entry{
		line(10, eventlog.Claimed, "c1", "a"), line(11, eventlog.Published, "c1", "a"),
		line(20, eventlog.Claimed, "c2", "b"), line(20, eventlog.Claimed, "c2", "c"),
		line(30, eventlog.Published, "c2", "b"), line(30, eventlog.Published, "c2", "c"),
		hit,
		line(60, eventlog.Claimed, "c3", "d"), line(61, eventlog.Published, "c3", "d"),
	}
	claim, ids, since := heldBatch(log, hit)
	assert.Equal(t, "c2", claim)
	assert.Equal(t, []string{"b", "c"}, ids)
	assert.Equal(t, at(20), since, "from the claim's first line")

	claim, _, _ = heldBatch(log[:1], eventlog.Entry{Time: at(15), Event: eventlog.CrashPoint, Point: "after-publish", Hit: 1})
	assert.Empty(t, claim, "nothing published ahead of the hit")

	routed := map[string][]time.Time{"b": {at(5), at(31)}, "c": {at(5)}}
	assert.Equal(t, []string{"c"}, notYetRouted(routed, ids, since), "a copy from before the claim is an earlier publish")
	routed["c"] = append(routed["c"], at(20))
	assert.Empty(t, notYetRouted(routed, ids, since))
}
