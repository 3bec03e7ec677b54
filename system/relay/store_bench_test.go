package relay

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/system/schema"
)

// The store's hot path on the test binary's real PostgreSQL: claiming a
// batch, then marking it Published or scheduling its retries. Each
// benchmark has its own database with a backlog of Pending rows; seeding
// and the steps that only keep that backlog in shape run with the timer
// stopped. Each figure has a baseline next to it, in the same run, doing the
// same work row by row, so the batch's worth is a ratio, not an absolute
// number of this machine.

const (
	benchBatch = 100
	// benchBacklog is how many due Pending rows the claim always has to
	// choose from (the outbox of a relay that is behind).
	benchBacklog = 10_000
	benchLease   = time.Minute
)

// benchOutbox is one benchmark's outbox database.
type benchOutbox struct {
	b     *testing.B
	db    *pgxpool.Pool
	store store
	first time.Time // occurred_at of row 0
	next  int       // number of the next row to seed
	due   int       // seeded rows not claimed yet
}

func newBenchOutbox(b *testing.B) *benchOutbox {
	b.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("relay_bench_%d_%d", os.Getpid(), envSeq.Add(1))
	if err := local.CreateDatabase(ctx, name); err != nil {
		b.Fatal(err)
	}
	db, err := pgxpool.New(ctx, local.PostgresURL(name))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		db.Close()
		_ = local.DropDatabase(context.Background(), name)
	})
	if err := schema.ApplyOrders(ctx, db); err != nil {
		b.Fatal(err)
	}
	o := &benchOutbox{b: b, db: db, store: store{db: db}, first: time.Now().Add(-time.Hour)}
	o.topUp()
	return o
}

// seed copies n Pending rows in, due now, after every row seeded before.
func (o *benchOutbox) seed(n int) {
	o.b.Helper()
	rows := make([][]any, n)
	for i := range rows {
		k := o.next + i
		id := fmt.Sprintf("EV%09d", k)
		payload := fmt.Sprintf(`{"eventId":%q,"eventType":"order.created","orderId":"ORD-%d","aggregateId":"ORD-%d","sequence":1,"amount":1,"currency":"CNY"}`, id, k, k)
		rows[i] = []any{id, fmt.Sprintf("ORD-%09d", k), int64(1), "order.created", payload, o.first.Add(time.Duration(k) * time.Microsecond)}
	}
	n64, err := o.db.CopyFrom(context.Background(), pgx.Identifier{"outbox_messages"},
		[]string{"event_id", "aggregate_id", "sequence", "event_type", "payload", "occurred_at"}, pgx.CopyFromRows(rows))
	if err != nil || n64 != int64(n) {
		o.b.Fatalf("seed %d rows: %d copied, %v", n, n64, err)
	}
	if _, err := o.db.Exec(context.Background(), `ANALYZE outbox_messages`); err != nil {
		o.b.Fatal(err)
	}
	o.next += n
	o.due += n
}

// topUp keeps at least benchBacklog due rows beyond the next claim.
func (o *benchOutbox) topUp() {
	if o.due < benchBacklog+benchBatch {
		o.seed(benchBacklog)
	}
}

// claim takes a full batch for claimID (the benchmarks' untimed setup).
func (o *benchOutbox) claim(claimID string) []Row {
	o.b.Helper()
	o.topUp()
	rows, err := o.store.claim(context.Background(), claimID, benchBatch, benchLease)
	if err != nil || len(rows) != benchBatch {
		o.b.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	o.due -= len(rows)
	return rows
}

// publish completes a claim as a relay would, so claimed rows leave the
// dispatch index instead of piling up in front of the next claim.
func (o *benchOutbox) publish(claimID string, rows []Row) {
	o.b.Helper()
	marked, err := o.store.markPublished(context.Background(), claimID, ids(rows))
	if err != nil || len(marked) != len(rows) {
		o.b.Fatalf("mark published: %d of %d rows, %v", len(marked), len(rows), err)
	}
}

func ids(rows []Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.EventID
	}
	return out
}

// untimed runs f with the benchmark timer stopped.
func untimed(b *testing.B, f func()) {
	b.StopTimer()
	f()
	b.StartTimer()
}

func reportRows(b *testing.B) {
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkClaim: one op claims 100 rows out of a backlog of >= 10,000 due
// Pending rows. batch-100 is the relay's claim; one-by-one is 100 claims of
// one row (a relay with --batch-size 1); select-only reads the same 100 due
// rows without locking or leasing them, the floor of any claim.
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	b.Run("batch-100", func(b *testing.B) {
		o := newBenchOutbox(b)
		b.ReportAllocs()
		for b.Loop() {
			untimed(b, o.topUp)
			rows, err := o.store.claim(ctx, "relay-1:bench", benchBatch, benchLease)
			if err != nil || len(rows) != benchBatch {
				b.Fatalf("claim: %d rows, %v", len(rows), err)
			}
			untimed(b, func() { o.due -= len(rows); o.publish("relay-1:bench", rows) })
		}
		reportRows(b)
	})
	b.Run("one-by-one", func(b *testing.B) {
		o := newBenchOutbox(b)
		b.ReportAllocs()
		rows := make([]Row, 0, benchBatch)
		for b.Loop() {
			untimed(b, o.topUp)
			rows = rows[:0]
			for range benchBatch {
				one, err := o.store.claim(ctx, "relay-1:bench", 1, benchLease)
				if err != nil || len(one) != 1 {
					b.Fatalf("claim: %d rows, %v", len(one), err)
				}
				rows = append(rows, one...)
			}
			untimed(b, func() { o.due -= len(rows); o.publish("relay-1:bench", rows) })
		}
		reportRows(b)
	})
	b.Run("select-only", func(b *testing.B) {
		o := newBenchOutbox(b)
		b.ReportAllocs()
		const q = `
SELECT event_id, aggregate_id, sequence, event_type, payload, attempt_count
FROM outbox_messages
WHERE (status = 'Pending' AND next_attempt_at <= CURRENT_TIMESTAMP)
   OR (status = 'Processing' AND locked_until < CURRENT_TIMESTAMP)
ORDER BY occurred_at, event_id
LIMIT $1`
		for b.Loop() {
			rows, err := o.db.Query(ctx, q, benchBatch)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rows.Next() {
				var r Row
				if err := rows.Scan(&r.EventID, &r.AggregateID, &r.Sequence, &r.EventType, &r.Payload, &r.AttemptCount); err != nil {
					b.Fatal(err)
				}
				n++
			}
			if err := rows.Err(); err != nil || n != benchBatch {
				b.Fatalf("select: %d rows, %v", n, err)
			}
		}
		reportRows(b)
	})
}

// markOneSQL is markPublishedSQL for one row: the row-by-row baseline.
const markOneSQL = `
UPDATE outbox_messages
SET status = 'Published',
    published_at = CURRENT_TIMESTAMP,
    locked_by = NULL,
    locked_until = NULL
WHERE event_id = $1
  AND status = 'Processing' AND locked_by = $2`

// BenchmarkMarkPublished: one op marks a claimed batch of 100 rows
// Published. batch-100 is store.markPublished (one statement, = ANY);
// per-row is one fenced UPDATE per row, each its own round trip;
// per-row-pipelined sends the same 100 UPDATEs in one pgx batch.
func BenchmarkMarkPublished(b *testing.B) {
	ctx := context.Background()
	b.Run("batch-100", func(b *testing.B) {
		o := newBenchOutbox(b)
		b.ReportAllocs()
		for b.Loop() {
			var batch []string
			untimed(b, func() { batch = ids(o.claim("relay-1:bench")) })
			marked, err := o.store.markPublished(ctx, "relay-1:bench", batch)
			if err != nil || len(marked) != benchBatch {
				b.Fatalf("mark published: %d rows, %v", len(marked), err)
			}
		}
		reportRows(b)
	})
	b.Run("per-row", func(b *testing.B) {
		o := newBenchOutbox(b)
		b.ReportAllocs()
		for b.Loop() {
			var batch []string
			untimed(b, func() { batch = ids(o.claim("relay-1:bench")) })
			for _, id := range batch {
				tag, err := o.db.Exec(ctx, markOneSQL, id, "relay-1:bench")
				if err != nil || tag.RowsAffected() != 1 {
					b.Fatalf("mark %s: %d rows, %v", id, tag.RowsAffected(), err)
				}
			}
		}
		reportRows(b)
	})
	b.Run("per-row-pipelined", func(b *testing.B) {
		o := newBenchOutbox(b)
		b.ReportAllocs()
		for b.Loop() {
			var batch []string
			untimed(b, func() { batch = ids(o.claim("relay-1:bench")) })
			var q pgx.Batch
			for _, id := range batch {
				q.Queue(markOneSQL, id, "relay-1:bench")
			}
			res := o.db.SendBatch(ctx, &q)
			for _, id := range batch {
				tag, err := res.Exec()
				if err != nil || tag.RowsAffected() != 1 {
					b.Fatalf("mark %s: %d rows, %v", id, tag.RowsAffected(), err)
				}
			}
			if err := res.Close(); err != nil {
				b.Fatal(err)
			}
		}
		reportRows(b)
	})
}

// retryOneSQL is retrySQL for one row: the row-by-row baseline.
const retryOneSQL = `
UPDATE outbox_messages
SET attempt_count = attempt_count + 1,
    last_error = $3,
    status = CASE WHEN attempt_count + 1 >= $4 THEN 'Failed' ELSE 'Pending' END,
    next_attempt_at = CURRENT_TIMESTAMP + $5 * INTERVAL '1 millisecond',
    locked_by = NULL,
    locked_until = NULL
WHERE event_id = $1
  AND status = 'Processing' AND locked_by = $2
RETURNING status = 'Failed', attempt_count`

// BenchmarkScheduleRetries: one op records a failed attempt on each of a
// claimed batch of 100 rows (back to Pending, due in an hour, so they are
// not claimed again). batch-100 is store.scheduleRetries (one statement
// over unnest); per-row is one fenced UPDATE per row.
func BenchmarkScheduleRetries(b *testing.B) {
	ctx := context.Background()
	const budget = 10
	retries := func(rows []Row) []retry {
		rs := make([]retry, len(rows))
		for i, r := range rows {
			rs[i] = retry{EventID: r.EventID, Err: "returned: 312 NO_ROUTE", Delay: time.Hour}
		}
		return rs
	}
	b.Run("batch-100", func(b *testing.B) {
		o := newBenchOutbox(b)
		b.ReportAllocs()
		for b.Loop() {
			var rs []retry
			untimed(b, func() { rs = retries(o.claim("relay-1:bench")) })
			done, err := o.store.scheduleRetries(ctx, "relay-1:bench", budget, rs)
			if err != nil || len(done) != benchBatch {
				b.Fatalf("schedule retries: %d rows, %v", len(done), err)
			}
		}
		reportRows(b)
	})
	b.Run("per-row", func(b *testing.B) {
		o := newBenchOutbox(b)
		b.ReportAllocs()
		for b.Loop() {
			var rs []retry
			untimed(b, func() { rs = retries(o.claim("relay-1:bench")) })
			for _, r := range rs {
				var out retryOutcome
				if err := o.db.QueryRow(ctx, retryOneSQL, r.EventID, "relay-1:bench", r.Err, budget, r.Delay.Milliseconds()).Scan(&out.Failed, &out.Attempt); err != nil {
					b.Fatalf("retry %s: %v", r.EventID, err)
				}
			}
		}
		reportRows(b)
	})
}
