package inventory_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/crashpoint"
	"github.com/faultline-dev/faultline/system/inventory"
	"github.com/faultline-dev/faultline/system/topology"
)

// The same eventId delivered twice takes effect once; both deliveries are acked.
func TestDuplicateEventIDTakesEffectOnce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		txBatch       int
		publishBefore bool // both published before the consumer starts: likely one batch
	}{
		{"one transaction per delivery", 1, false},
		{"batched, both in flight together", 32, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cfg := e.config()
			cfg.TxBatch = tc.txBatch
			msg := event("evt-dup-1", "order-1", 1)
			if tc.publishBefore {
				e.publish(msg, msg)
				e.start(cfg)
			} else {
				e.start(cfg)
				e.publish(msg)
				e.waitCount(eventlog.Acked, "evt-dup-1", 1)
				e.publish(msg)
			}
			es := e.waitCount(eventlog.Acked, "evt-dup-1", 2)
			e.waitDrained()

			assert.Equal(t, []string{"evt-dup-1"}, e.reservations(), "one reservation")
			assert.Equal(t, 2, count(es, eventlog.Delivered, "evt-dup-1"))
			assert.Equal(t, 1, count(es, eventlog.Reserved, "evt-dup-1"))
			assert.Equal(t, 1, count(es, eventlog.Duplicate, "evt-dup-1"))
		})
	}
}

// A message that can never be processed is dead-lettered, never requeued,
// and does not block the messages after it.
func TestPoisonIsDeadLettered(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		body      string
		messageID string
		errText   string
	}{
		{"not JSON", `{"eventId": "x", oops`, "m-not-json", "not JSON"},
		{"no eventId", `{"eventType":"order.created","orderId":"o-1","amount":"1","currency":"EUR"}`, "m-no-id", "no eventId"},
		{"unstorable currency", `{"eventId":"evt-bad-cur","eventType":"order.created","orderId":"o-1","amount":"1","currency":"EURO"}`, "evt-bad-cur", "currency"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.start(e.config())
			e.publish(amqp.Publishing{MessageId: tc.messageID, Body: []byte(tc.body)}, event("evt-after-poison", "order-2", 1))

			es := e.waitCount(eventlog.Acked, "evt-after-poison", 1)
			es = e.waitCount(eventlog.DeadLettered, tc.messageID, 1)
			e.waitReady(topology.DeadLetterQueue, 1)
			e.waitDrained()

			assert.Equal(t, []string{"evt-after-poison"}, e.reservations())
			for _, x := range es {
				if x.Event == eventlog.DeadLettered {
					assert.Contains(t, x.Error, tc.errText)
				}
			}
			// Never requeued: delivered exactly once.
			assert.Equal(t, 1, count(es, eventlog.Delivered, tc.messageID))
		})
	}
}

// A value the database refuses makes the batch's transaction fail for good:
// the batch is retried one delivery per transaction, the refused one is
// dead-lettered, and the others of its batch take effect.
func TestDatabaseRejectsOneEventOfABatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startWith(func(ctx context.Context, cfg inventory.Config) error {
		return inventory.RunFailingEffect(ctx, cfg, "evt-refused")
	}, e.config())
	// Hold the first batch for a moment, so the next deliveries pile up in
	// the consumer's buffer and share the following batch.
	code, body := request(t, http.MethodPut, r.control, "/crashpoints/"+crashpoint.InventoryAfterReceive, "delay:300ms@1")
	require.Equal(t, http.StatusNoContent, code, body)
	e.publish(event("evt-ok-1", "order-1", 1), event("evt-refused", "order-2", 1), event("evt-ok-2", "order-3", 1))

	es := e.waitCount(eventlog.DeadLettered, "evt-refused", 1)
	es = e.waitCount(eventlog.Acked, "", 2)
	e.waitReady(topology.DeadLetterQueue, 1)
	e.waitDrained()
	assert.ElementsMatch(t, []string{"evt-ok-1", "evt-ok-2"}, e.reservations())
	assert.Equal(t, 0, count(es, eventlog.Acked, "evt-refused"))
	assert.Contains(t, dump(es), "retrying each delivery alone", "the refused event shared a batch")
	var inbox int
	require.NoError(t, e.db.QueryRow(t.Context(), `SELECT count(*) FROM inbox_messages WHERE event_id = 'evt-refused'`).Scan(&inbox))
	assert.Zero(t, inbox, "its inbox row was rolled back with its effect")
}

// Events of one aggregate take effect in sequence order, whatever order they
// arrive in: an event ahead of its predecessor is held back (parked, acked),
// then applied when its predecessor is — also within one batch.
func TestAggregateOrder(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		txBatch int
		rounds  [][]int64 // sequences published together; every round but the last is waited on until held back
		want    []int64
	}{
		{"3, 2, 1 one by one, one transaction each", 1, [][]int64{{3}, {2}, {1}}, []int64{1, 2, 3}},
		{"3, 2, 1 at once, batched", 32, [][]int64{{3, 2, 1}}, []int64{1, 2, 3}},
		{"3 held back, then 4, 1, 2 batched", 32, [][]int64{{3}, {4, 1, 2}}, []int64{1, 2, 3, 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cfg := e.config()
			cfg.TxBatch = tc.txBatch
			e.start(cfg)
			id := func(seq int64) string { return fmt.Sprintf("evt-seq-%d", seq) }
			for i, round := range tc.rounds {
				var msgs []amqp.Publishing
				for _, seq := range round {
					msgs = append(msgs, event(id(seq), "agg-1", seq))
				}
				e.publish(msgs...)
				if i < len(tc.rounds)-1 {
					for _, seq := range round {
						e.waitCount(eventlog.HeldBack, id(seq), 1)
					}
				}
			}
			delivered := 0
			for _, round := range tc.rounds {
				delivered += len(round)
			}
			e.waitCount(eventlog.Reserved, "", len(tc.want))
			es := e.waitCount(eventlog.Acked, "", delivered) // each ack is logged just after its batch's reservations
			e.waitDrained()

			var want []string
			for _, seq := range tc.want {
				want = append(want, id(seq))
				assert.Equal(t, 1, count(es, eventlog.Acked, id(seq)), "acked once: %s", id(seq))
			}
			assert.Equal(t, want, e.reservations(), "reservation_id order")
			// Deliveries are handled in delivery (= publish) order, batched or
			// not: an event is held back iff a predecessor had not arrived.
			arrived := map[int64]bool{}
			for _, round := range tc.rounds {
				for _, seq := range round {
					held := 0
					for k := int64(1); k < seq; k++ {
						if !arrived[k] {
							held = 1
						}
					}
					assert.Equal(t, held, count(es, eventlog.HeldBack, id(seq)), "held back: %s", id(seq))
					arrived[seq] = true
				}
			}
			var last int64
			require.NoError(t, e.db.QueryRow(t.Context(), `SELECT last_sequence FROM aggregate_versions WHERE aggregate_id = 'agg-1'`).Scan(&last))
			assert.Equal(t, tc.want[len(tc.want)-1], last)
			var parked int
			require.NoError(t, e.db.QueryRow(t.Context(), `SELECT count(*) FROM parked_events`).Scan(&parked))
			assert.Zero(t, parked)
		})
	}
}

// The retention boundary: while the inbox row exists a replay is absorbed;
// once the cleanup removed it, a replay of the same eventId takes effect a
// second time. That is the expected limit of an inbox (the article:
// retention must cover the replay window), not a bug.
func TestInboxRetentionBoundary(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.start(e.config())
	msg := event("evt-replay", "order-9", 1)

	e.publish(msg)
	e.waitCount(eventlog.Acked, "evt-replay", 1)
	e.publish(msg) // replay inside the retention: absorbed
	e.waitCount(eventlog.Duplicate, "evt-replay", 1)
	e.waitCount(eventlog.Acked, "evt-replay", 2)
	require.Equal(t, []string{"evt-replay"}, e.reservations())

	code, body := request(t, http.MethodPost, r.control, "/inbox/cleanup?older-than=bogus", "")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "older-than")
	code, body = request(t, http.MethodPost, r.control, "/inbox/cleanup?older-than=1h", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.JSONEq(t, `{"deleted": 0}`, body)
	code, body = request(t, http.MethodPost, r.control, "/inbox/cleanup?older-than=0s", "")
	require.Equal(t, http.StatusOK, code, body)
	var res struct{ Deleted int }
	require.NoError(t, json.Unmarshal([]byte(body), &res))
	assert.Equal(t, 1, res.Deleted)
	e.waitCount(eventlog.InboxCleaned, "", 2)

	e.publish(msg) // replay past the retention: takes effect again
	e.waitCount(eventlog.Acked, "evt-replay", 3)
	e.waitDrained()
	assert.Equal(t, []string{"evt-replay", "evt-replay"}, e.reservations(), "the replay past the retention is applied twice: the inbox's limit")
}

// The periodic cleanup deletes rows older than the retention.
func TestPeriodicInboxCleanup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.CleanupInterval = 100 * time.Millisecond
	cfg.InboxRetention = time.Hour
	e.start(cfg)
	e.publish(event("evt-new", "order-1", 1))
	e.waitCount(eventlog.Acked, "evt-new", 1)
	_, err := e.db.Exec(t.Context(), `INSERT INTO inbox_messages (consumer_name, event_id, received_at) VALUES ($1, 'evt-old', now() - interval '2 hours')`, cfg.ConsumerName)
	require.NoError(t, err)
	e.waitFor("cleanup of the old row", func(es []eventlog.Entry) bool {
		for _, x := range es {
			if x.Event == eventlog.InboxCleaned && x.Detail == "1" {
				return true
			}
		}
		return false
	})
	var ids []string
	rows, err := e.db.Query(t.Context(), `SELECT event_id FROM inbox_messages`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	assert.Equal(t, []string{"evt-new"}, ids)
}

// PostgreSQL going away: the delivery is not acked while the transaction
// fails, and takes effect once when the database is back, without a restart.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fw := newForwarder(t, testInfra.PostgresAddr())
	cfg := e.config()
	cfg.DBURL = e.dbURLVia(fw.addr)
	e.start(cfg)
	e.publish(event("evt-before", "order-1", 1))
	e.waitCount(eventlog.Acked, "evt-before", 1)

	fw.cut()
	e.publish(event("evt-during", "order-2", 1))
	e.waitCount(eventlog.Delivered, "evt-during", 1)
	e.waitCount(eventlog.Disconnected, "", 1)
	e.waitFor("the transaction retried", func(es []eventlog.Entry) bool {
		for _, x := range es {
			if x.Event == eventlog.ErrorOccurred && x.Attempt >= 4 {
				return true
			}
		}
		return false
	})
	e.waitReady(topology.Queue, 0) // held by the consumer, not ready
	assert.Equal(t, 0, count(e.events(), eventlog.Acked, "evt-during"), "never acked before commit")

	fw.restore(t)
	es := e.waitCount(eventlog.Acked, "evt-during", 1)
	e.waitDrained()
	assert.Equal(t, []string{"evt-before", "evt-during"}, e.reservations())
	assert.GreaterOrEqual(t, count(es, eventlog.Connected, ""), 3, "amqp, postgres, postgres again")
}

// Stopping while the database is down gives up the uncommitted batch without
// acking it: the broker has it again, and the next consumer applies it.
func TestStopWhileDatabaseDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fw := newForwarder(t, testInfra.PostgresAddr())
	cfg := e.config()
	cfg.DBURL = e.dbURLVia(fw.addr)
	r := e.start(cfg)
	fw.cut()
	e.publish(event("evt-stranded", "order-1", 1))
	e.waitCount(eventlog.Disconnected, "", 1)
	r.stop(t)
	e.waitReady(topology.Queue, 1) // back in the queue, not acked
	assert.Equal(t, 0, count(e.events(), eventlog.Acked, "evt-stranded"))

	fw.restore(t)
	e.start(cfg)
	e.waitCount(eventlog.Acked, "evt-stranded", 1)
	e.waitDrained()
	assert.Equal(t, []string{"evt-stranded"}, e.reservations())
}

// RabbitMQ going away: the consumer reconnects, declares again and consumes.
func TestBrokerConnectionLoss(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fw := newForwarder(t, testInfra.AMQPAddr())
	cfg := e.config()
	cfg.AMQPURL = e.amqpURLVia(fw.addr)
	e.start(cfg)
	e.publish(event("evt-1", "order-1", 1))
	e.waitCount(eventlog.Acked, "evt-1", 1)

	fw.cut()
	e.waitCount(eventlog.Disconnected, "", 1)
	e.publish(event("evt-2", "order-2", 1)) // straight to the broker, not through the cut link
	fw.restore(t)
	e.waitFor("reconnected", func(es []eventlog.Entry) bool {
		n := 0
		for _, x := range es {
			if x.Event == eventlog.Connected && x.Detail != "postgres" {
				n++
			}
		}
		return n >= 2
	})
	e.waitCount(eventlog.Acked, "evt-2", 1)
	e.waitDrained()
	assert.Equal(t, []string{"evt-1", "evt-2"}, e.reservations())
}

// Under --exit-on-broker-loss the consumer gives up on a broker gone that
// long: Run returns a *BrokerLostError (the process exits non-zero for its
// supervisor to restart it) after what it had consumed was committed and
// acked, and says why in its event log. The default, reconnecting forever,
// is TestBrokerConnectionLoss.
func TestExitsOnBrokerLoss(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fw := newForwarder(t, testInfra.AMQPAddr())
	cfg := e.config()
	cfg.AMQPURL = e.amqpURLVia(fw.addr)
	cfg.Workers = 2 // the broker is lost only once neither worker holds a session
	cfg.ExitOnBrokerLoss = 500 * time.Millisecond
	r := e.start(cfg)
	e.publish(event("evt-1", "order-1", 1))
	e.waitCount(eventlog.Acked, "evt-1", 1)

	cut := time.Now()
	fw.cut()
	select {
	case err := <-r.done:
		close(r.done) // stop, at the test's end, has nothing left to wait for
		var lost *inventory.BrokerLostError
		require.True(t, errors.As(err, &lost), "want a *BrokerLostError, got %v", err)
		assert.GreaterOrEqual(t, time.Since(cut), cfg.ExitOnBrokerLoss, "it gave up before the broker was lost that long")
	case <-time.After(waitTimeout):
		require.FailNow(t, "the consumer kept running with its broker gone", "for %s", waitTimeout)
	}
	assert.Contains(t, dump(e.events()), "exit-on-broker-loss")
	assert.Equal(t, []string{"evt-1"}, e.reservations())
}

// Several workers in one consumer: every event of 20 aggregates × 10
// sequences, published in a scrambled order with every one of them twice,
// takes effect exactly once and in sequence order per aggregate, whichever
// worker's transaction got it.
func TestWorkersKeepOnceAndOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.Workers, cfg.Prefetch, cfg.TxBatch = 4, 8, 4
	const aggregates, sequences = 20, 10
	id := func(a int, seq int64) string { return fmt.Sprintf("evt-%02d-%02d", a, seq) }
	var msgs []amqp.Publishing
	for round := 0; round < 2; round++ {
		for seq := int64(sequences); seq >= 1; seq-- { // later sequences first: most are held back
			for a := 0; a < aggregates; a++ {
				msgs = append(msgs, event(id(a, seq), fmt.Sprintf("agg-%02d", a), seq))
			}
		}
	}
	e.publish(msgs...)
	e.start(cfg)
	e.waitCount(eventlog.Reserved, "", aggregates*sequences)
	es := e.waitCount(eventlog.Acked, "", len(msgs)) // every delivery settled: its duplicate line is in
	e.waitDrained()

	got := e.reservations()
	require.Len(t, got, aggregates*sequences, "each event once")
	position := map[string]int{}
	for i, eid := range got {
		_, dup := position[eid]
		require.False(t, dup, "%s reserved twice", eid)
		position[eid] = i
	}
	for a := 0; a < aggregates; a++ {
		for seq := int64(2); seq <= sequences; seq++ {
			assert.Less(t, position[id(a, seq-1)], position[id(a, seq)], "aggregate %d: sequence %d after %d", a, seq, seq-1)
		}
	}
	assert.Equal(t, aggregates*sequences, count(es, eventlog.Duplicate, ""), "every second delivery absorbed by the inbox")
	assert.GreaterOrEqual(t, countAMQPConnected(es), 4, "one channel per worker")
}
