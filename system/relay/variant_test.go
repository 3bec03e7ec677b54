package relay

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/crashpoint"
	"github.com/faultline-dev/faultline/system/schema"
	"github.com/faultline-dev/faultline/system/topology"
	"github.com/faultline-dev/faultline/system/variant"
)

func TestGuardsForEachVariant(t *testing.T) {
	off := map[string]func(Guards) bool{
		variant.NoMandatory:            func(g Guards) bool { return !g.Mandatory },
		variant.IgnoreReturn:           func(g Guards) bool { return !g.HonourReturns },
		variant.PublishedBeforeConfirm: func(g Guards) bool { return !g.AwaitConfirm },
		variant.NoFencing:              func(g Guards) bool { return !g.FenceByClaimID },
		variant.NoLease:                func(g Guards) bool { return !g.LeaseExpiry },
		variant.LeaseIgnored:           func(g Guards) bool { return !g.LeaseHonoured },
		variant.UnfencedRetry:          func(g Guards) bool { return !g.FenceRetries },
		variant.UnfencedRenewal:        func(g Guards) bool { return !g.FenceRenewal },
		variant.NoBackoff:              func(g Guards) bool { return !g.Backoff },
		variant.ReadsByID:              func(g Guards) bool { return !g.ClaimByStatus },
		variant.NackAsSuccess:          func(g Guards) bool { return !g.HonourNacks },
		variant.LastConfirmOnly:        func(g Guards) bool { return !g.EachConfirm },
		variant.OwnBatchReturnsOnly:    func(g Guards) bool { return !g.KeepLaterReturns },
		variant.SingleNode:             func(g Guards) bool { return !g.Failover },
	}
	assert.Len(t, off, 14, "fourteen of the twenty-nine variants break the relay")
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
		for _, pair := range [][2]bool{{g.Mandatory, all.Mandatory}, {g.HonourReturns, all.HonourReturns}, {g.AwaitConfirm, all.AwaitConfirm}, {g.FenceByClaimID, all.FenceByClaimID}, {g.LeaseExpiry, all.LeaseExpiry}, {g.LeaseHonoured, all.LeaseHonoured},
			{g.FenceRetries, all.FenceRetries}, {g.FenceRenewal, all.FenceRenewal}, {g.Backoff, all.Backoff}, {g.ClaimByStatus, all.ClaimByStatus},
			{g.HonourNacks, all.HonourNacks}, {g.EachConfirm, all.EachConfirm}, {g.Failover, all.Failover}, {g.KeepLaterReturns, all.KeepLaterReturns}} {
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

	// Combined: each relay variant named switches its guard off; another
	// process's leaves the relay's guards alone.
	g, err := GuardsFor("ignore-return,ack-before-commit")
	require.NoError(t, err)
	want := AllGuards()
	want.HonourReturns = false
	assert.Equal(t, want, g)
	g, err = GuardsFor("no-fencing,no-lease")
	require.NoError(t, err)
	want = AllGuards()
	want.FenceByClaimID, want.LeaseExpiry = false, false
	assert.Equal(t, want, g)
	_, err = GuardsFor("ignore-return,nope")
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
			entries := e.waitLogged("relay-1", eventlog.Marked, 3)
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
	entries := e.waitLogged("relay-1", eventlog.Marked, 5)
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
	e.waitFor("the dead claim's lease run out", func() bool {
		var expired bool
		require.NoError(t, e.db.QueryRow(ctx, `SELECT bool_and(locked_until < now()) FROM outbox_messages WHERE event_id = ANY($1)`, ids).Scan(&expired))
		return expired
	})
	e.cycle(200) // a claim made after the lease ran out
	for _, id := range ids {
		assert.Equal(t, "Processing", e.row(id).status, "%s stays with its dead claim", id)
	}
	for _, x := range e.log("relay-1") {
		if x.Event == eventlog.Claimed {
			assert.NotContains(t, ids, x.EventID, "only fresh rows are claimed")
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

// lockedBy is the claim id holding the row (empty: none).
func (e *env) lockedBy(id string) string {
	e.t.Helper()
	var by string
	require.NoError(e.t, e.db.QueryRow(context.Background(), `SELECT coalesce(locked_by, '') FROM outbox_messages WHERE event_id = $1`, id).Scan(&by))
	return by
}

// takeOver claims every row for "relay-1:first" with a short lease, waits
// for the lease to run out and claims them again for "relay-2:second".
func (e *env) takeOver(s store, n int) []Row {
	e.t.Helper()
	ctx := context.Background()
	first, err := s.claim(ctx, "relay-1:first", 10, 50*time.Millisecond)
	require.NoError(e.t, err)
	require.Len(e.t, first, n)
	e.waitFor("the lease to run out and another claim to take the rows", func() bool {
		second, err := s.claim(ctx, "relay-2:second", 10, time.Minute)
		require.NoError(e.t, err)
		return len(second) == n
	})
	return first
}

// unfenced-retry: a retry write, and a Failed write past the budget, from a
// claim whose rows were claimed again are refused by the correct store and
// accepted by the variant's; the Published write stays fenced in both.
func TestUnfencedRetryAcceptsAStaleRetryButNotAStaleMark(t *testing.T) {
	for _, tc := range []struct {
		variant  string
		accepted bool
	}{
		{variant.Correct, false},
		{variant.UnfencedRetry, true},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			e := newEnv(t)
			ids := e.insert(3)
			ctx := context.Background()
			guards, err := GuardsFor(tc.variant)
			require.NoError(t, err)
			s := newStore(e.db, guards)
			e.takeOver(s, 3)

			marked, err := s.markPublished(ctx, "relay-1:first", ids[:1])
			require.NoError(t, err)
			assert.Empty(t, marked, "the Published write keeps the claim id")
			retried, err := s.scheduleRetries(ctx, "relay-1:first", 8, []retry{{EventID: ids[1], Err: "returned", Delay: time.Second}})
			require.NoError(t, err)
			failed, err := s.scheduleRetries(ctx, "relay-1:first", 1, []retry{{EventID: ids[2], Err: "returned", Delay: time.Second}})
			require.NoError(t, err)

			assert.Equal(t, "Processing", e.row(ids[0]).status)
			assert.Equal(t, "relay-2:second", e.lockedBy(ids[0]))
			if tc.accepted {
				assert.Equal(t, map[string]retryOutcome{ids[1]: {Attempt: 1}}, retried, "the stale retry is accepted")
				assert.Equal(t, map[string]retryOutcome{ids[2]: {Failed: true, Attempt: 1}}, failed, "the stale Failed write is accepted")
				for _, id := range ids[1:] {
					assert.Empty(t, e.lockedBy(id), "the stale claim released the row the new claim holds")
					assert.Equal(t, 1, e.row(id).attempts)
				}
				assert.Equal(t, "Failed", e.row(ids[2]).status)
				return
			}
			assert.Empty(t, retried, "the stale retry is fenced")
			assert.Empty(t, failed, "the stale Failed write is fenced")
			for _, id := range ids[1:] {
				r := e.row(id)
				assert.Equal(t, "Processing", r.status)
				assert.Zero(t, r.attempts)
				assert.Equal(t, "relay-2:second", e.lockedBy(id), "the new claim still holds %s", id)
			}
		})
	}
}

// relay.before-retry: a relay with a return to record is frozen (SIGSTOP)
// before its retry write, past its lease, while another claim takes the
// row. Resumed, the correct relay's late retry write is refused and logged
// fenced (eventId, claim id); unfenced-retry's is accepted (retry-scheduled)
// and releases the row the other claim holds.
func TestLateRetryAfterAFreezeBeforeRetry(t *testing.T) {
	bin := buildRelay(t)
	for _, tc := range []struct {
		variant  string
		accepted bool
	}{
		{variant.Correct, false},
		{variant.UnfencedRetry, true},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			e := newEnv(t)
			require.NoError(t, topology.DeclareExchange(e.channel())) // no queue bound: every publish comes back
			ids := e.insert(1)
			logPath := filepath.Join(e.dir, "relay-1.jsonl")
			cmd := exec.Command(bin, "--db-url", e.dbURL, "--amqp-url", e.amqp, "--instance", "relay-1", "--event-log", logPath,
				"--lease", "500ms", "--poll-interval", "20ms", "--retry-budget", "100", "--backoff-base", "50ms", "--backoff-max", "200ms")
			cmd.Env = append(os.Environ(), crashpoint.EnvVar+"="+crashpoint.RelayBeforeRetry+"=pause@1", variant.EnvVar+"="+tc.variant)
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
			e.waitFor("the relay to freeze before its retry write", func() bool { return procState(cmd.Process.Pid) == "T" })

			entries := e.log("relay-1")
			last := entries[len(entries)-1]
			require.Equal(t, eventlog.CrashPoint, last.Event, "nothing runs past a pause")
			assert.Equal(t, crashpoint.RelayBeforeRetry, last.Point)
			assert.Equal(t, 1, count(entries, eventlog.Returned), "the return was seen")
			assert.Zero(t, count(entries, eventlog.Retry)+count(entries, eventlog.Fenced), "the retry is not written yet")
			var claimID string
			for _, x := range entries {
				if x.Event == eventlog.Claimed {
					claimID = x.ClaimID
				}
			}
			require.NotEmpty(t, claimID)
			assert.Equal(t, claimID, e.lockedBy(ids[0]), "the frozen claim still holds the row")

			ctx := context.Background()
			e.waitFor("the lease to run out and another claim to take the row", func() bool {
				rows, err := store{db: e.db}.claim(ctx, "relay-2:takeover", 10, time.Minute)
				require.NoError(t, err)
				return len(rows) == 1
			})
			require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
			var write eventlog.Entry
			e.waitFor("the late retry write", func() bool {
				for _, x := range e.log("relay-1") {
					if (x.Event == eventlog.Fenced || x.Event == eventlog.Retry) && x.ClaimID == claimID {
						write = x
						return true
					}
				}
				return false
			})
			assert.Equal(t, ids[0], write.EventID)
			if tc.accepted {
				assert.Equal(t, eventlog.Retry, write.Event, "the stale retry is accepted")
				assert.Equal(t, 1, write.Attempt)
				e.waitFor("the row released", func() bool { return e.lockedBy(ids[0]) != "relay-2:takeover" })
				assert.Positive(t, e.row(ids[0]).attempts)
			} else {
				assert.Equal(t, eventlog.Fenced, write.Event, "the stale retry is refused")
				assert.Equal(t, "schedule retry: 0 rows", write.Detail)
				// The outage ends, and the relay settles another batch.
				require.NoError(t, topology.DeclareConsumer(e.channel(), topology.QueueOptions{}))
				e.cycle(100)
				assert.Zero(t, count(e.log("relay-1"), eventlog.Retry))
				r := e.row(ids[0])
				assert.Equal(t, "Processing", r.status)
				assert.Zero(t, r.attempts)
				assert.Equal(t, "relay-2:takeover", e.lockedBy(ids[0]), "the claim that took the row still holds it")
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			_, _ = cmd.Process.Wait()
		})
	}
}

// unfenced-renewal: the heartbeat of a claim whose rows another claim took
// extends 0 rows in the correct relay (the claim is lost) and every row in
// the variant's. The third heartbeat is held at relay.before-renew (a
// delay: a freeze of the heartbeat) while the lease runs out and another
// claim takes the rows, and the batch finishes (stop) meanwhile: the
// renewal after the crash point still runs, after the takeover. Each
// accepted renewal is one renewed line per row, with its claim id.
func TestUnfencedRenewalKeepsALostClaim(t *testing.T) {
	for _, tc := range []struct {
		variant string
		stale   bool
	}{
		{variant.Correct, false},
		{variant.UnfencedRenewal, true},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			// Every renewal is bounded by the lease; one that timed out (a
			// slow database), the held one or one before it, renewed
			// nothing and showed nothing: the window did not open, and the
			// run is tried again.
			for attempt := 1; attempt <= 3; attempt++ {
				if renewalUnfenced(t, tc.variant, tc.stale) {
					return
				}
				t.Logf("attempt %d: a renewal failed (its error is in the event log): window not opened, trying again", attempt)
			}
			t.Fatal("a renewal failed in each of 3 attempts: the window never opened")
		})
	}
}

// renewalUnfenced is one run of TestUnfencedRenewalKeepsALostClaim; false
// when the held renewal itself failed, before anything was asserted.
func renewalUnfenced(t *testing.T, variantName string, stale bool) bool {
	e := newEnv(t)
	ids := e.insert(2)
	ctx := context.Background()
	guards, err := GuardsFor(variantName)
	require.NoError(t, err)
	s := newStore(e.db, guards)
	cfg := e.config("relay-1")
	// A renewal gives up after one lease: 150 ms was too short for
	// its commit on a loaded disk (no renewed line before the third
	// heartbeat). The hold at the third is 5 leases, for the lease
	// to run out and relay-2 to take the rows meanwhile.
	cfg.Lease, cfg.RenewInterval = 600*time.Millisecond, 100*time.Millisecond
	first, err := s.claim(ctx, "relay-1:first", 10, cfg.Lease)
	require.NoError(t, err)
	require.Len(t, first, 2)

	log, err := eventlog.Open(filepath.Join(e.dir, "relay-1.jsonl"), "relay-1")
	require.NoError(t, err)
	r := &Relay{cfg: cfg, store: s, log: log, points: crashpoint.NewSet("relay", log), guards: guards}
	require.NoError(t, r.points.ArmList(crashpoint.RelayBeforeRenew+"=delay:3s@3"))
	rn := r.startRenewal(ctx, "relay-1:first", first)
	e.waitFor("the third heartbeat held at relay.before-renew", func() bool { return count(e.log("relay-1"), eventlog.CrashPoint) == 1 })
	if count(e.log("relay-1"), eventlog.ErrorOccurred) > 0 {
		// A heartbeat before the held one failed (its renewal, bounded by
		// the lease, did not commit in time): the claim was not renewed
		// twice, so the window did not open.
		rn.stop() // the held renewal runs to its end first
		return false
	}
	renewed := func() []eventlog.Entry {
		var out []eventlog.Entry
		for _, x := range e.log("relay-1") {
			if x.Event == eventlog.Renewed {
				out = append(out, x)
			}
		}
		return out
	}
	before := renewed()
	require.Len(t, before, 4, "two heartbeats, one line per row")
	for _, x := range before {
		assert.Contains(t, ids, x.EventID)
		assert.Equal(t, "relay-1:first", x.ClaimID)
	}

	e.waitFor("the lease to run out and another claim to take the rows", func() bool {
		second, err := s.claim(ctx, "relay-2:second", 10, time.Minute)
		require.NoError(t, err)
		return len(second) == 2
	})
	lost := rn.stop() // the batch finishes while the heartbeat is held
	if count(e.log("relay-1"), eventlog.ErrorOccurred) > 0 {
		return false
	}
	after := renewed()
	if stale {
		assert.Empty(t, lost, "the variant never sees its claim lost")
		require.Len(t, after, 6, "the stale renewal extended both rows")
		for _, x := range after[4:] {
			assert.Contains(t, ids, x.EventID)
			assert.Equal(t, "relay-1:first", x.ClaimID)
		}
	} else {
		assert.Equal(t, map[string]bool{ids[0]: true, ids[1]: true}, lost, "0 rows renewed: the claim is lost")
		assert.Len(t, after, 4, "nothing renewed after the takeover")
	}
	for _, id := range ids {
		assert.Equal(t, "relay-2:second", e.lockedBy(id), "the rows stay the new claim's")
	}

	// The statement alone: the lost claim's renewal.
	still, err := s.renew(ctx, "relay-1:first", ids, time.Minute)
	require.NoError(t, err)
	if stale {
		assert.Len(t, still, 2)
	} else {
		assert.Empty(t, still)
	}
	return true
}

// no-backoff: a failed attempt is due again at once (next_attempt_at not in
// the future), where the correct relay's backoff puts it off.
func TestNoBackoffRetriesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		variant string
		backoff bool
	}{
		{variant.Correct, true},
		{variant.NoBackoff, false},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			e := newEnv(t)
			ids := e.insert(1)
			ctx := context.Background()
			guards, err := GuardsFor(tc.variant)
			require.NoError(t, err)
			s := newStore(e.db, guards)
			cfg := e.config("relay-1")
			cfg.BackoffBase, cfg.BackoffMax = time.Second, 4*time.Second
			r := &Relay{cfg: cfg, store: s, guards: guards}
			for attempt := 1; attempt <= 10; attempt++ {
				if tc.backoff {
					assert.GreaterOrEqual(t, r.retryAfter(attempt), cfg.BackoffBase/2, "attempt %d", attempt)
				} else {
					assert.Zero(t, r.retryAfter(attempt), "attempt %d", attempt)
				}
			}
			rows, err := s.claim(ctx, "relay-1:c", 10, time.Minute)
			require.NoError(t, err)
			require.Len(t, rows, 1)
			done, err := s.scheduleRetries(ctx, "relay-1:c", 8, []retry{{EventID: ids[0], Err: "returned", Delay: r.retryAfter(1)}})
			require.NoError(t, err)
			assert.Equal(t, retryOutcome{Attempt: 1}, done[ids[0]])
			assert.Equal(t, tc.backoff, e.row(ids[0]).nextInFuture)
		})
	}
}

// A short outage (no queue bound for a while): the correct relay's backoff
// outlasts it and the rows are Published once the binding is back;
// no-backoff burns the whole retry budget at once and the rows end Failed.
func TestNoBackoffFailsInAShortOutage(t *testing.T) {
	for _, tc := range []struct {
		variant string
		failed  bool
	}{
		{variant.Correct, false},
		{variant.NoBackoff, true},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			e := newEnv(t)
			require.NoError(t, topology.DeclareExchange(e.channel())) // the outage: nothing bound
			ids := e.insert(2)
			c := e.config("relay-1")
			// The correct relay needs 5.4 s at least to spend 8 attempts.
			c.RetryBudget, c.BackoffBase, c.BackoffMax = 8, 400*time.Millisecond, 2*time.Second
			e.runVariant(tc.variant, c)
			if tc.failed {
				e.waitFor("every row Failed", func() bool { return e.row(ids[0]).status == "Failed" && e.row(ids[1]).status == "Failed" })
			} else {
				// The outage lasts until each row has been retried twice
				// (seen, not a fixed time): long enough to show the budget
				// is still there when it ends.
				e.waitFor("two attempts of each row", func() bool { return e.row(ids[0]).attempts >= 2 && e.row(ids[1]).attempts >= 2 })
			}
			require.NoError(t, topology.DeclareConsumer(e.channel(), topology.QueueOptions{})) // the outage ends
			if tc.failed {
				entries := e.waitLogged("relay-1", eventlog.FailedAlert, 2)
				// Every retry is due at once: the budget is spent with no
				// wait between attempts (what the logs say, not how long
				// it took).
				for _, x := range entries {
					if x.Event == eventlog.Retry {
						assert.Equal(t, "next attempt in 0s", x.Detail)
					}
				}
				assert.Equal(t, 2, count(entries, eventlog.FailedAlert))
				assert.Equal(t, 14, count(entries, eventlog.Retry), "seven retries a row, then Failed")
				e.cycle(100) // a claim made after the outage ended
				for _, id := range ids {
					r := e.row(id)
					assert.Equal(t, "Failed", r.status, "a Failed row is not retried after the outage")
					assert.Equal(t, 8, r.attempts)
					assert.False(t, r.nextInFuture)
					assert.False(t, r.published)
				}
				return
			}
			e.waitFor("every row Published after the outage", func() bool {
				return e.row(ids[0]).status == "Published" && e.row(ids[1]).status == "Published"
			})
			for _, id := range ids {
				assert.Less(t, e.row(id).attempts, 8, "budget left")
			}
			assert.Zero(t, count(e.log("relay-1"), eventlog.FailedAlert))
		})
	}
}

// The reads-by-id relay's position passes a row whose transaction commits
// after a later row's: the id was drawn at its INSERT, so once it commits
// it is behind the position and no read returns it. The correct relay's
// claim, by status, takes it as soon as it is committed.
func TestReadsByIDSkipsARowCommittedAfterALaterOne(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for range 2 { // idempotent: two relays start at once
		require.NoError(t, schema.ApplyOutboxID(ctx, e.db))
	}
	g, err := GuardsFor(variant.ReadsByID)
	require.NoError(t, err)
	byID := newStore(e.db, g)

	late, err := e.db.Begin(ctx)
	require.NoError(t, err)
	defer late.Rollback(ctx) //nolint:errcheck // committed below
	_, err = late.Exec(ctx, `INSERT INTO outbox_messages (event_id, aggregate_id, sequence, event_type, payload, occurred_at)
VALUES ('EV-LATE', 'ORD-LATE', 1, 'order.created', '{"eventId":"EV-LATE"}', now())`)
	require.NoError(t, err)
	later := e.insertMore(1, 1) // drawn its id after EV-LATE's, committed first

	rows, err := byID.claim(ctx, "relay-1:read", 10, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, later, ids(rows), "only the committed row is visible")
	require.NoError(t, late.Commit(ctx))
	rows, err = byID.claim(ctx, "relay-1:read", 10, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, rows, "EV-LATE committed behind the position: never read")
	assert.Equal(t, "Pending", e.row("EV-LATE").status)

	claimed, err := newStore(e.db, AllGuards()).claim(ctx, "relay-2:claim", 10, time.Minute)
	require.NoError(t, err)
	assert.ElementsMatch(t, append([]string{"EV-LATE"}, later...), ids(claimed), "a claim by status takes every Pending row")
}

// last-confirm-only: every row of the batch takes the answer to its last
// publish, so a nack ahead of a confirmed last counts as a confirm.
func TestLastAnswers(t *testing.T) {
	flights := []inFlight{{row: Row{EventID: "a"}}, {row: Row{EventID: "b"}}, {row: Row{EventID: "c"}}}
	assert.Equal(t, map[string]bool{"a": true, "b": true, "c": true},
		lastAnswers(flights, map[string]bool{"a": false, "b": false, "c": true}), "nacks ahead of a confirmed last")
	assert.Equal(t, map[string]bool{"a": false, "b": false, "c": false},
		lastAnswers(flights, map[string]bool{"a": true, "b": true, "c": false}), "confirms ahead of a nacked last")
	assert.Empty(t, lastAnswers(flights, map[string]bool{"a": true}), "the last unanswered: none answered")
}
