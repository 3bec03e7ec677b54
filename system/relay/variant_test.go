package relay

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"faultline/system/crashpoint"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"faultline/system/topology"
	"faultline/system/variant"
)

func TestGuardsForEachVariant(t *testing.T) {
	off := map[string]func(Guards) bool{
		variant.NoMandatory:            func(g Guards) bool { return !g.Mandatory },
		variant.IgnoreReturn:           func(g Guards) bool { return !g.HonourReturns },
		variant.PublishedBeforeConfirm: func(g Guards) bool { return !g.AwaitConfirm },
		variant.NoFencing:              func(g Guards) bool { return !g.FenceByClaimID },
		variant.NoLease:                func(g Guards) bool { return !g.LeaseExpiry },
	}
	for _, v := range variant.Catalogue() {
		g, err := GuardsFor(v.Name)
		require.NoError(t, err)
		if v.Process != variant.Relay {
			assert.Equal(t, AllGuards(), g, "%s breaks %s, not the relay", v.Name, v.Process)
			continue
		}
		require.Contains(t, off, v.Name)
		assert.True(t, off[v.Name](g), "%s switches its guard off", v.Name)
		all := AllGuards()
		diff := 0
		for _, pair := range [][2]bool{{g.Mandatory, all.Mandatory}, {g.HonourReturns, all.HonourReturns}, {g.AwaitConfirm, all.AwaitConfirm}, {g.FenceByClaimID, all.FenceByClaimID}, {g.LeaseExpiry, all.LeaseExpiry}} {
			if pair[0] != pair[1] {
				diff++
			}
		}
		assert.Equal(t, 1, diff, "%s removes exactly one guard", v.Name)
	}
	for _, name := range []string{"", variant.Correct} {
		g, err := GuardsFor(name)
		require.NoError(t, err)
		assert.Equal(t, AllGuards(), g)
	}
	_, err := GuardsFor("nope")
	assert.ErrorContains(t, err, `unknown variant "nope"`)
}

// runVariant starts a relay in-process with the variant until the test ends.
func (e *env) runVariant(name string, c Config) {
	e.t.Helper()
	c.Variant = name
	require.NoError(e.t, c.Validate())
	e.run(c)
}

// Against an exchange with no queue bound, the correct relay gets every row
// back (TestUnroutableIsReturnedNotPublished); without mandatory, or with
// the returns ignored, the rows are Published although nothing received them.
func TestUnroutableRowsArePublishedWithoutTheReturnGuard(t *testing.T) {
	for _, tc := range []struct {
		variant  string
		returned bool // the broker still sends basic.return
	}{
		{variant.NoMandatory, false},
		{variant.IgnoreReturn, true},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			e := newEnv(t)
			require.NoError(t, topology.DeclareExchange(e.channel())) // no queue bound: unroutable
			ids := e.insert(3)
			e.runVariant(tc.variant, e.config("relay-1"))
			e.waitFor("every row Published", func() bool {
				for _, id := range ids {
					if e.row(id).status != "Published" {
						return false
					}
				}
				return true
			})
			for _, id := range ids {
				r := e.row(id)
				assert.True(t, r.published, id)
				assert.Zero(t, r.attempts, "no failed attempt recorded for %s", id)
			}
			entries := e.log("relay-1")
			assert.Equal(t, 3, count(entries, eventlog.Marked))
			assert.Equal(t, 3, count(entries, eventlog.Confirmed), "the broker confirms an unroutable message")
			if tc.returned {
				assert.Equal(t, 3, count(entries, eventlog.Returned), "the returns came and were ignored")
			} else {
				assert.Zero(t, count(entries, eventlog.Returned), "without mandatory nothing comes back")
			}
			assert.Zero(t, count(entries, eventlog.Retry))
			assert.Contains(t, started(entries), "variant="+tc.variant)
		})
	}
}

// published-before-confirm marks every sent row without waiting for (or
// logging) a confirm.
func TestPublishedBeforeConfirmMarksWithoutConfirms(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, topology.DeclareConsumer(e.channel(), topology.QueueOptions{}))
	ids := e.insert(5)
	c := e.config("relay-1")
	c.BatchSize = 2
	e.runVariant(variant.PublishedBeforeConfirm, c)
	e.waitFor("every row Published", func() bool {
		for _, id := range ids {
			if e.row(id).status != "Published" {
				return false
			}
		}
		return true
	})
	entries := e.log("relay-1")
	assert.Equal(t, 5, count(entries, eventlog.Published))
	assert.Equal(t, 5, count(entries, eventlog.Marked))
	assert.Zero(t, count(entries, eventlog.Confirmed), "no confirm was awaited, none is logged")
	assert.Zero(t, count(entries, eventlog.Nacked))
	assert.Zero(t, count(entries, eventlog.Unknown))
	e.waitFor("the messages in the queue", func() bool {
		q, err := e.channel().QueueDeclarePassive(topology.Queue, true, false, false, false, nil)
		require.NoError(t, err)
		return q.Messages == 5
	})
}

// no-fencing: the stale claim's writes are accepted over the claim that now
// holds the rows (the correct store fences them: TestStaleClaimIsFenced).
func TestNoFencingAcceptsAStaleClaimsWrites(t *testing.T) {
	e := newEnv(t)
	ids := e.insert(2)
	ctx := context.Background()
	guards, err := GuardsFor(variant.NoFencing)
	require.NoError(t, err)
	s := newStore(e.db, guards)
	first, err := s.claim(ctx, "relay-1:first", 10, 50*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, first, 2)
	e.waitFor("the lease to run out and another claim to take the rows", func() bool {
		second, err := s.claim(ctx, "relay-2:second", 10, time.Minute)
		require.NoError(t, err)
		return len(second) == 2
	})

	log, err := eventlog.Open(filepath.Join(e.dir, "relay-1.jsonl"), "relay-1")
	require.NoError(t, err)
	r := &Relay{cfg: e.config("relay-1"), store: s, log: log, points: crashpoint.NewSet("relay", log), guards: guards}
	res := batchResult{outcome: map[string]outcome{ids[0]: outcomeConfirmed, ids[1]: outcomeReturned}, reason: map[string]string{ids[1]: "returned"}}
	r.settle(ctx, "relay-1:first", first, res)

	entries := e.log("relay-1")
	assert.Zero(t, count(entries, eventlog.Fenced), "nothing is fenced")
	assert.Equal(t, 1, count(entries, eventlog.Marked), "the stale mark is accepted")
	assert.Equal(t, 1, count(entries, eventlog.Retry), "the stale retry is accepted")
	assert.Equal(t, "Published", e.row(ids[0]).status, "the stale claim overwrote the new claim's row")
	assert.Equal(t, "Pending", e.row(ids[1]).status, "the stale claim released the new claim's row")
}

// no-lease: a relay never takes over a Processing row whose lease ran out
// (the correct relay does: TestExpiredLeaseIsClaimedByAnotherRelay).
func TestNoLeaseNeverReclaimsAnExpiredClaim(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, topology.DeclareConsumer(e.channel(), topology.QueueOptions{}))
	ids := e.insert(2)
	ctx := context.Background()
	held, err := store{db: e.db}.claim(ctx, "relay-dead:claim", 10, 50*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, held, 2)
	fresh := e.insertMore(1, 100)
	e.runVariant(variant.NoLease, e.config("relay-1"))
	e.waitFor("the fresh row Published", func() bool { return e.row(fresh[0]).status == "Published" })
	time.Sleep(500 * time.Millisecond) // ten lease lengths, many polls
	for _, id := range ids {
		assert.Equal(t, "Processing", e.row(id).status, "%s stays with its dead claim", id)
	}
	for _, x := range e.log("relay-1") {
		if x.Event == eventlog.Claimed {
			assert.Equal(t, fresh[0], x.EventID, "only the fresh row is claimed")
		}
	}
}

// A variant of another process leaves the relay correct.
func TestOtherProcessVariantKeepsTheRelayCorrect(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, topology.DeclareExchange(e.channel())) // unroutable
	ids := e.insert(1)
	c := e.config("relay-1")
	c.RetryBudget = 100
	e.runVariant(variant.NoInbox, c)
	e.waitFor("a return", func() bool { return e.row(ids[0]).attempts >= 1 })
	assert.NotEqual(t, "Published", e.row(ids[0]).status)
	assert.Contains(t, started(e.log("relay-1")), "variant=no-inbox (breaks inventory; this process is correct)")
}

// started is the Detail of the log's started line.
func started(entries []eventlog.Entry) string {
	for _, x := range entries {
		if x.Event == eventlog.Started {
			return x.Detail
		}
	}
	return ""
}
