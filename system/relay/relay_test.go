package relay

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/infra/infratest"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/crashpoint"
	"github.com/faultline-dev/faultline/system/schema"
	"github.com/faultline-dev/faultline/system/topology"
)

// local is the test binary's PostgreSQL and RabbitMQ.
var local infra.Infra

func TestMain(m *testing.M) {
	infratest.Main(m, func(in infra.Infra) { local = in })
}

var envSeq atomic.Int64

// env is one test's outbox database and vhost.
type env struct {
	t     *testing.T
	db    *pgxpool.Pool
	dbURL string
	vhost string
	amqp  string
	dir   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("relay_test_%d_%d", os.Getpid(), envSeq.Add(1))
	require.NoError(t, local.CreateDatabase(ctx, name))
	require.NoError(t, local.CreateVHost(ctx, name))
	e := &env{t: t, dbURL: local.PostgresURL(name), vhost: name, amqp: local.AMQPURL(name), dir: t.TempDir()}
	var err error
	e.db, err = pgxpool.New(ctx, e.dbURL)
	require.NoError(t, err)
	require.NoError(t, schema.ApplyOrders(ctx, e.db))
	t.Cleanup(func() {
		e.db.Close()
		_ = local.DropDatabase(context.Background(), name)
		_ = local.DeleteVHost(context.Background(), name)
	})
	return e
}

// channel opens an admin channel on the test's vhost.
func (e *env) channel() *amqp.Channel {
	e.t.Helper()
	conn, err := amqp.Dial(e.amqp)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	require.NoError(e.t, err)
	return ch
}

// insert puts n Pending outbox rows in and returns their eventIds.
func (e *env) insert(n int) []string {
	e.t.Helper()
	return e.insertMore(n, 0)
}

// insertMore inserts n rows numbered from first.
func (e *env) insertMore(n, first int) []string {
	e.t.Helper()
	var ids []string
	for i := first; i < first+n; i++ {
		id := fmt.Sprintf("EV%s%04d", strings.ToUpper(e.vhost[len(e.vhost)-3:]), i)
		payload := fmt.Sprintf(`{"eventId":%q,"eventType":"order.created","orderId":"ORD-%d","aggregateId":"ORD-%d","sequence":1,"amount":1,"currency":"CNY"}`, id, i, i)
		_, err := e.db.Exec(context.Background(),
			`INSERT INTO outbox_messages (event_id, aggregate_id, sequence, event_type, payload, occurred_at) VALUES ($1, $2, 1, 'order.created', $3, now())`,
			id, fmt.Sprintf("ORD-%s-%d", e.vhost, i), payload)
		require.NoError(e.t, err)
		ids = append(ids, id)
	}
	return ids
}

func (e *env) config(instance string) Config {
	var c Config
	fs := newFlagSet()
	c.Flags(fs)
	require.NoError(e.t, fs.Parse(nil))
	c.DBURL, c.AMQPURL, c.Instance = e.dbURL, e.amqp, instance
	c.EventLog = filepath.Join(e.dir, instance+".jsonl")
	c.Lease, c.PollInterval, c.BackoffBase, c.BackoffMax = 2*time.Second, 20*time.Millisecond, 50*time.Millisecond, 200*time.Millisecond
	require.NoError(e.t, c.Validate())
	return c
}

// run starts a relay in-process until the test ends.
func (e *env) run(c Config) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c) }()
	e.t.Cleanup(func() {
		cancel()
		assert.NoError(e.t, <-done)
	})
}

// waitFor polls cond until it holds or 20 s pass.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type row struct {
	status, lastError string
	attempts          int
	nextInFuture      bool
	published         bool
}

// cycle inserts one fresh row (numbered n) and waits until the relay has
// Published it: the relay has since run a whole claim, publish and mark,
// and every row it would claim or write by then it has (a negative check
// rests on that, not on a sleep).
func (e *env) cycle(n int) {
	e.t.Helper()
	fresh := e.insertMore(1, n)
	e.waitFor("a fresh row Published (a whole cycle of the relay's)", func() bool { return e.row(fresh[0]).status == "Published" })
}

func (e *env) row(id string) row {
	e.t.Helper()
	var r row
	require.NoError(e.t, e.db.QueryRow(context.Background(),
		`SELECT status, coalesce(last_error, ''), attempt_count, next_attempt_at > now(), published_at IS NOT NULL FROM outbox_messages WHERE event_id = $1`, id).
		Scan(&r.status, &r.lastError, &r.attempts, &r.nextInFuture, &r.published))
	return r
}

func (e *env) log(instance string) []eventlog.Entry {
	e.t.Helper()
	path := filepath.Join(e.dir, instance+".jsonl")
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return nil // not started yet
	}
	entries, err := eventlog.ReadFile(path)
	require.NoError(e.t, err)
	return entries
}

// waitLogged waits until instance's event log holds n lines of event and
// returns the log: a status write commits before its line is written, so
// a row seen Published can precede its Marked line.
func (e *env) waitLogged(instance, event string, n int) []eventlog.Entry {
	e.t.Helper()
	var entries []eventlog.Entry
	e.waitFor(fmt.Sprintf("%d %q lines in %s's event log", n, event, instance), func() bool {
		entries = e.log(instance)
		return count(entries, event) >= n
	})
	return entries
}

func count(entries []eventlog.Entry, event string) int {
	n := 0
	for _, x := range entries {
		if x.Event == event {
			n++
		}
	}
	return n
}

// An unroutable row is returned, never Published: in one batch, and when
// several small batches overlap (each return stays with its own row).
func TestUnroutableIsReturnedNotPublished(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rows, size int
	}{
		{"one batch", 3, 100},
		{"overlapping batches", 12, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			require.NoError(t, topology.DeclareExchange(e.channel())) // no queue bound: unroutable
			ids := e.insert(tc.rows)
			c := e.config("relay-1")
			c.RetryBudget, c.BatchSize = 100, tc.size
			e.run(c)
			e.waitFor("two attempts on every row", func() bool {
				for _, id := range ids {
					if e.row(id).attempts < 2 {
						return false
					}
				}
				return true
			})
			for _, id := range ids {
				r := e.row(id)
				assert.NotEqual(t, "Published", r.status, id)
				assert.False(t, r.published, id)
				assert.Contains(t, r.lastError, "returned: 312 NO_ROUTE", id)
			}
			entries := e.log("relay-1")
			assert.GreaterOrEqual(t, count(entries, eventlog.Returned), 2*tc.rows)
			assert.Zero(t, count(entries, eventlog.Marked))
			// A retried row waits for its backoff: every retry the relay
			// logged names a delay above zero (the rows' own status at this
			// moment may be Processing, claimed again).
			retries := 0
			for _, x := range entries {
				if x.Event == eventlog.Retry {
					retries++
					d, err := time.ParseDuration(strings.TrimPrefix(x.Detail, "next attempt in "))
					if assert.NoError(t, err, x.Detail) {
						assert.Positive(t, d, x.EventID)
					}
				}
			}
			assert.GreaterOrEqual(t, retries, tc.rows)
		})
	}
}

func TestRetryBudgetExhaustedFailsWithAlert(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, topology.DeclareExchange(e.channel()))
	ids := e.insert(2)
	c := e.config("relay-1")
	c.RetryBudget = 2
	e.run(c)
	e.waitFor("rows Failed", func() bool { return e.row(ids[0]).status == "Failed" && e.row(ids[1]).status == "Failed" })
	for _, id := range ids {
		r := e.row(id)
		assert.Equal(t, 2, r.attempts)
		assert.False(t, r.published)
	}
	alerts := 0
	for _, x := range e.waitLogged("relay-1", eventlog.FailedAlert, 2) {
		if x.Event == eventlog.FailedAlert {
			alerts++
			assert.Contains(t, x.Detail, "ALERT: outbox event "+x.EventID+" Failed after 2 attempts")
		}
	}
	assert.Equal(t, 2, alerts)
}

func TestFullQueueNacksAndIsNotPublished(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, topology.DeclareConsumer(e.channel(), topology.QueueOptions{MaxLength: 1}))
	// A quorum queue applies its limit once it has seen it exceeded. The
	// first rows fill it: published together, all of them may go in before
	// it refuses; published apart, the second or third is refused. Either
	// way, once one of them is in and the queue has either refused one or
	// holds two, nothing consumes and it refuses every later publish.
	first := e.insert(3)
	c := e.config("relay-1")
	c.RetryBudget = 100
	e.run(c)
	e.waitFor("the queue filled by the first rows and refusing", func() bool {
		published, refused := 0, 0
		for _, id := range first {
			r := e.row(id)
			if r.status == "Published" {
				published++
			}
			if strings.Contains(r.lastError, "nacked by the broker") {
				refused++
			}
		}
		return published >= 2 || (published >= 1 && refused >= 1)
	})
	later := e.insertMore(3, 100)
	// The nacked line is logged before the retry is written: wait for the row.
	e.waitFor("a nack recorded on a row", func() bool {
		for _, id := range later {
			if strings.Contains(e.row(id).lastError, "nacked by the broker") {
				return true
			}
		}
		return false
	})
	assert.Positive(t, count(e.log("relay-1"), eventlog.Nacked))
	nacked := 0
	for _, id := range later {
		r := e.row(id)
		assert.NotEqual(t, "Published", r.status, id)
		if strings.Contains(r.lastError, "nacked by the broker") {
			nacked++
			assert.Positive(t, r.attempts)
		}
	}
	assert.Positive(t, nacked)
}

func TestStaleClaimIsFenced(t *testing.T) {
	e := newEnv(t)
	ids := e.insert(2)
	ctx := context.Background()
	s := store{db: e.db}
	first, err := s.claim(ctx, "relay-1:first", 10, 50*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, first, 2)
	var second []Row
	e.waitFor("the lease to run out and another claim to take the rows", func() bool {
		second, err = s.claim(ctx, "relay-2:second", 10, time.Minute)
		require.NoError(t, err)
		return len(second) == 2
	})

	log, err := eventlog.Open(filepath.Join(e.dir, "relay-1.jsonl"), "relay-1")
	require.NoError(t, err)
	r := &Relay{cfg: e.config("relay-1"), store: s, log: log, points: crashpoint.NewSet("relay", log), guards: AllGuards()}
	res := batchResult{outcome: map[string]outcome{ids[0]: outcomeConfirmed, ids[1]: outcomeReturned}, reason: map[string]string{ids[1]: "returned"}}
	r.settle(ctx, "relay-1:first", first, res)

	assert.Equal(t, 2, count(e.log("relay-1"), eventlog.Fenced), "both the mark and the retry of the stale claim are fenced")
	for _, id := range ids {
		assert.Equal(t, "Processing", e.row(id).status, "the new claim still holds %s", id)
	}
	marked, err := s.markPublished(ctx, "relay-2:second", ids)
	require.NoError(t, err)
	assert.Len(t, marked, 2, "the claim that holds the rows can complete them")
}

func TestExpiredLeaseIsClaimedByAnotherRelay(t *testing.T) {
	e := newEnv(t)
	e.insert(3)
	ctx := context.Background()
	s := store{db: e.db}
	held, err := s.claim(ctx, "relay-1:dead", 10, 300*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, held, 3)
	again, err := s.claim(ctx, "relay-2:now", 10, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, again, "a live lease is not taken")
	e.waitFor("the lease to run out", func() bool {
		var expired int
		require.NoError(t, e.db.QueryRow(ctx, `SELECT count(*) FROM outbox_messages WHERE locked_until < CURRENT_TIMESTAMP`).Scan(&expired))
		return expired == 3
	})
	noExpiry := store{db: e.db, noExpiry: true}
	taken, err := noExpiry.claim(ctx, "relay-3:no-lease", 10, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, taken, "without lease expiry an expired claim is never taken over")
	again, err = s.claim(ctx, "relay-2:now", 10, time.Minute)
	require.NoError(t, err)
	assert.Len(t, again, 3, "with lease expiry another relay takes the expired rows")
}

func TestGuardVariantsChangeTheSQL(t *testing.T) {
	fenced := store{}
	unfenced := store{unfenced: true}
	noExpiry := store{noExpiry: true}
	for _, q := range []string{markPublishedSQL, retrySQL, renewSQL} {
		assert.Contains(t, fenced.sql(q), "locked_by = $2")
		assert.NotContains(t, unfenced.sql(q), "locked_by = $2")
	}
	assert.Contains(t, fenced.sql(claimSQL), "locked_until < CURRENT_TIMESTAMP")
	assert.NotContains(t, noExpiry.sql(claimSQL), "locked_until < CURRENT_TIMESTAMP")
	ignoresLease := store{ignoreLease: true}.sql(claimSQL)
	assert.NotContains(t, ignoresLease, "locked_until < CURRENT_TIMESTAMP")
	assert.Contains(t, ignoresLease, "OR status = 'Processing'\n", "lease-ignored claims every Processing row")
	// unfenced-retry and unfenced-renewal drop the fence from one write each.
	for _, tc := range []struct {
		s       store
		dropped string
	}{
		{store{unfencedRetry: true}, retrySQL},
		{store{unfencedRenewal: true}, renewSQL},
	} {
		for _, q := range []string{markPublishedSQL, retrySQL, renewSQL} {
			if q == tc.dropped {
				assert.NotContains(t, tc.s.sql(q), "locked_by = $2")
			} else {
				assert.Equal(t, fenced.sql(q), tc.s.sql(q))
			}
		}
	}
}

func TestBackoffGrowsWithJitterUpToTheCap(t *testing.T) {
	r := &Relay{cfg: Config{BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second}}
	for _, tc := range []struct {
		attempt  int
		min, max time.Duration
	}{
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 200 * time.Millisecond},
		{4, 400 * time.Millisecond, 800 * time.Millisecond},
		{10, 500 * time.Millisecond, time.Second},
	} {
		for i := 0; i < 50; i++ {
			d := r.backoff(tc.attempt)
			assert.GreaterOrEqual(t, d, tc.min, "attempt %d", tc.attempt)
			assert.LessOrEqual(t, d, tc.max, "attempt %d", tc.attempt)
		}
	}
}

// buildRelay compiles the relay program.
func buildRelay(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "relay")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/faultline-dev/faultline/system/cmd/relay").CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

func TestCrashPointKillAtHitThree(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, topology.DeclareConsumer(e.channel(), topology.QueueOptions{}))
	e.insert(6)
	bin := buildRelay(t)
	logPath := filepath.Join(e.dir, "relay-1.jsonl")
	cmd := exec.Command(bin, "--db-url", e.dbURL, "--amqp-url", e.amqp, "--batch-size", "1", "--event-log", logPath, "--poll-interval", "20ms")
	cmd.Env = append(os.Environ(), crashpoint.EnvVar+"="+crashpoint.RelayAfterConfirm+"=kill@3")
	require.NoError(t, cmd.Start())
	err := cmd.Wait()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr)
	status := exitErr.Sys().(syscall.WaitStatus)
	require.True(t, status.Signaled(), "relay must die by a signal, got %v", err)
	assert.Equal(t, syscall.SIGKILL, status.Signal())
	entries, err := eventlog.ReadFile(logPath)
	require.NoError(t, err)
	last := entries[len(entries)-1]
	assert.Equal(t, eventlog.CrashPoint, last.Event)
	assert.Equal(t, crashpoint.RelayAfterConfirm, last.Point)
	assert.EqualValues(t, 3, last.Hit)
	// The status writes of a batch go on beside the next batch, so at the
	// third confirm the first batch is surely marked, the second may be,
	// and the third is not: the kill lands before its mark.
	var confirmed []string
	marked := map[string]bool{}
	for _, x := range entries {
		switch x.Event {
		case eventlog.Confirmed:
			confirmed = append(confirmed, x.EventID)
		case eventlog.Marked:
			marked[x.EventID] = true
		}
	}
	require.Len(t, confirmed, 3, "one row a batch, three confirms")
	assert.True(t, marked[confirmed[0]], "the first batch was marked before the third confirm")
	assert.False(t, marked[confirmed[2]], "the third batch is killed before its mark")
	var row string
	require.NoError(t, e.db.QueryRow(context.Background(), `SELECT status FROM outbox_messages WHERE event_id = $1`, confirmed[2]).Scan(&row))
	assert.Equal(t, "Processing", row, "the killed batch's row waits for its lease")
}

func TestCrashPointPauseStopsUntilResumed(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, topology.DeclareConsumer(e.channel(), topology.QueueOptions{}))
	e.insert(3)
	bin := buildRelay(t)
	logPath := filepath.Join(e.dir, "relay-1.jsonl")
	cmd := exec.Command(bin, "--db-url", e.dbURL, "--amqp-url", e.amqp, "--batch-size", "1", "--event-log", logPath, "--poll-interval", "20ms")
	cmd.Env = append(os.Environ(), crashpoint.EnvVar+"="+crashpoint.RelayAfterConfirm+"=pause@1")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	e.waitFor("the relay to stop itself", func() bool { return procState(cmd.Process.Pid) == "T" })
	entries, err := eventlog.ReadFile(logPath)
	require.NoError(t, err)
	assert.Equal(t, eventlog.CrashPoint, entries[len(entries)-1].Event, "nothing runs past a pause")
	assert.Zero(t, count(entries, eventlog.Marked))
	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	e.waitFor("all rows Published after the resume", func() bool {
		var n int
		require.NoError(t, e.db.QueryRow(context.Background(), `SELECT count(*) FROM outbox_messages WHERE status = 'Published'`).Scan(&n))
		return n == 3
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	_, _ = cmd.Process.Wait()
}

// procState reads a process's state letter from /proc.
func procState(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// The relay publishes the next batch before it finishes the one awaiting
// its confirms: the second claim's publishes are in the log before the
// first claim's confirms.
func TestNextBatchGoesOutBeforeThePreviousIsConfirmed(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, topology.DeclareConsumer(e.channel(), topology.QueueOptions{}))
	ids := e.insert(30)
	c := e.config("relay-1")
	c.BatchSize = 10
	e.run(c)
	e.waitFor("every row Published", func() bool {
		for _, id := range ids {
			if e.row(id).status != "Published" {
				return false
			}
		}
		return true
	})
	entries := e.waitLogged("relay-1", eventlog.Marked, 30)
	var claims []string
	firstOf := map[string]int{} // event + claim → first line
	for i, x := range entries {
		if x.Event == eventlog.Claimed && !slices.Contains(claims, x.ClaimID) {
			claims = append(claims, x.ClaimID)
		}
		if _, ok := firstOf[x.Event+x.ClaimID]; !ok {
			firstOf[x.Event+x.ClaimID] = i
		}
	}
	require.GreaterOrEqual(t, len(claims), 2)
	assert.Less(t, firstOf[eventlog.Published+claims[1]], firstOf[eventlog.Confirmed+claims[0]],
		"batch 2 went out before batch 1's confirms were taken")
	assert.Equal(t, 30, count(entries, eventlog.Marked))
}
