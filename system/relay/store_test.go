package relay

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A claim that had to wait still gets its whole lease: the lease runs from
// when the rows are taken, not from when the statement (or a transaction
// around it) began. Counted from the start, a claim that waited longer
// than its lease handed back rows already due again, and the relay that
// made it claimed them a second time while its first publishes were out.
func TestLeaseRunsFromTheClaimNotFromItsStart(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// One connection, its claim statement already prepared: the wait then
	// falls inside the claim's execution (as on a slow link), not in its
	// first preparation.
	cfg, err := pgxpool.ParseConfig(e.dbURL)
	require.NoError(t, err)
	cfg.MaxConns = 1
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer db.Close()
	s := newStore(db, AllGuards())
	const lease = time.Second
	warm, err := s.claim(ctx, "relay-1:warm", 10, lease)
	require.NoError(t, err)
	require.Empty(t, warm)
	ids := e.insert(3)

	// Another session holds a lock the claim's UPDATE must wait for.
	blocker, err := e.db.Begin(ctx)
	require.NoError(t, err)
	defer blocker.Rollback(context.Background()) //nolint:errcheck
	_, err = blocker.Exec(ctx, `LOCK TABLE outbox_messages IN SHARE MODE`)
	require.NoError(t, err)

	type claimed struct {
		rows []Row
		err  error
	}
	done := make(chan claimed, 1)
	go func() {
		rows, err := s.claim(ctx, "relay-1:waited", 10, lease)
		done <- claimed{rows, err}
	}()
	// The claim waits until a lease counted from its transaction's start
	// would have run out half a lease ago.
	e.waitFor("the claim waiting for the lock past its lease", func() bool {
		var n int
		require.NoError(t, e.db.QueryRow(ctx,
			`SELECT count(*) FROM pg_stat_activity
			 WHERE wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE SKIP LOCKED%'
			   AND xact_start + $1 * INTERVAL '1 millisecond' < clock_timestamp()`, (lease+lease/2).Milliseconds()).Scan(&n))
		return n > 0
	})
	require.NoError(t, blocker.Commit(ctx))
	got := <-done
	require.NoError(t, got.err)
	require.Len(t, got.rows, len(ids))

	var left time.Duration
	require.NoError(t, e.db.QueryRow(ctx,
		`SELECT min(locked_until - clock_timestamp()) FROM outbox_messages WHERE locked_by = 'relay-1:waited'`).Scan(&left))
	assert.Greater(t, left, time.Duration(0), "the lease had run out by the time the claim returned")
	again, err := s.claim(ctx, "relay-1:again", 10, lease)
	require.NoError(t, err)
	var dueAgain []string
	for _, r := range again {
		dueAgain = append(dueAgain, r.EventID)
	}
	assert.Empty(t, dueAgain, "rows just claimed were due again")
}

// Every row of one claim, and of one renewal, gets the same lease: a
// takeover after it ran out takes all of the claim's rows at once, never a
// part of them (with clock_timestamp() read per row the leases of one
// claim's rows were microseconds apart).
func TestOneLeasePerClaimAndRenewal(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := newStore(e.db, AllGuards())
	ids := e.insert(200)
	distinct := func() int {
		t.Helper()
		var n int
		require.NoError(t, e.db.QueryRow(ctx, `SELECT count(DISTINCT locked_until) FROM outbox_messages WHERE event_id = ANY($1)`, ids).Scan(&n))
		return n
	}
	claimed, err := s.claim(ctx, "relay-1:c", len(ids), time.Minute)
	require.NoError(t, err)
	require.Len(t, claimed, len(ids))
	assert.Equal(t, 1, distinct(), "one lease for the claim's rows")
	still, err := s.renew(ctx, "relay-1:c", ids, time.Minute)
	require.NoError(t, err)
	require.Len(t, still, len(ids))
	assert.Equal(t, 1, distinct(), "one lease for the renewal's rows")
}
