package infra

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testContract exercises what every provider must do the same way:
// per-scenario databases and vhosts, queue counters. prefix keeps names
// apart from other tests on the same services.
func testContract(ctx context.Context, t *testing.T, in Infra, prefix string) {
	t.Run("database", func(t *testing.T) {
		for _, bad := range []string{"", "Orders", "a-b", `x"; DROP`, strings.Repeat("a", 64)} {
			assert.Error(t, in.CreateDatabase(ctx, bad), "name %q", bad)
			assert.Error(t, in.DropDatabase(ctx, bad), "name %q", bad)
		}
		db := prefix + "_orders"
		require.NoError(t, in.CreateDatabase(ctx, db))
		t.Cleanup(func() { _ = in.DropDatabase(context.Background(), db) })
		assert.Error(t, in.CreateDatabase(ctx, db), "creating an existing database fails")

		conn, err := pgx.Connect(ctx, in.PostgresURL(db))
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `INSERT INTO t VALUES (1, 'one')`)
		require.NoError(t, err)
		var v, fsync string
		require.NoError(t, conn.QueryRow(ctx, `SELECT v FROM t WHERE id = 1`).Scan(&v))
		assert.Equal(t, "one", v)
		require.NoError(t, conn.QueryRow(ctx, `SHOW fsync`).Scan(&fsync))
		assert.Equal(t, "on", fsync, "a crash must be real: fsync stays on")

		require.NoError(t, in.DropDatabase(ctx, db), "drops under an open session")
		_ = conn.Close(ctx)
		require.NoError(t, in.DropDatabase(ctx, db), "dropping a missing database is fine")
		_, err = pgx.Connect(ctx, in.PostgresURL(db))
		assert.Error(t, err)
	})

	t.Run("a database's replication slots go with it", func(t *testing.T) { testSlots(ctx, t, in, prefix+"_cdc") })

	t.Run("firehose", func(t *testing.T) { testFirehose(ctx, t, in, prefix+"_trace") })
	t.Run("vhost and queue", func(t *testing.T) {
		vhost := prefix + "/scenario" // a slash must survive escaping
		require.NoError(t, in.CreateVHost(ctx, vhost))
		t.Cleanup(func() { _ = in.DeleteVHost(context.Background(), vhost) })
		assert.Error(t, in.CreateVHost(ctx, vhost), "creating an existing vhost fails")

		conn, err := amqp.Dial(in.AMQPURL(vhost))
		require.NoError(t, err)
		defer conn.Close()
		ch, err := conn.Channel()
		require.NoError(t, err)
		require.NoError(t, ch.Confirm(false))
		_, err = ch.QueueDeclare("parked", true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		require.NoError(t, err)
		_, err = ch.QueueDeclare("work", true, false, false, false, nil)
		require.NoError(t, err)
		publish(ctx, t, ch, "parked", "kept")
		publish(ctx, t, ch, "work", "hello")

		// Consume from one queue while the other keeps its message.
		msgs, err := ch.Consume("work", "c1", false, false, false, false, nil)
		require.NoError(t, err)
		select {
		case m := <-msgs:
			assert.Equal(t, "hello", string(m.Body))
			require.NoError(t, m.Ack(false))
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery from queue work")
		}

		// Queue() is eventually consistent: poll.
		want := map[string]history.QueueInfo{
			"parked": {Messages: 1, Ready: 1, Type: "quorum"},
			"work":   {Consumers: 1, Delivered: 1, Acked: 1, Type: "classic"},
		}
		for q, w := range want {
			assert.EventuallyWithT(t, func(c *assert.CollectT) {
				got, err := in.Queue(ctx, vhost, q)
				require.NoError(c, err)
				assert.Equal(c, w, got)
			}, 15*time.Second, 100*time.Millisecond, "queue %s", q)
		}
		_, err = in.Queue(ctx, vhost, "nope")
		assert.ErrorIs(t, err, ErrNotFound)
		// VHost counts the vhost's publishes and the unroutable ones.
		require.NoError(t, ch.PublishWithContext(ctx, "", "no-such-queue", false, false, amqp.Publishing{Body: []byte("lost")}))
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			got, err := in.VHost(ctx, vhost)
			require.NoError(c, err)
			assert.Equal(c, VHostInfo{Published: 3, Unroutable: 1}, got)
		}, 15*time.Second, 100*time.Millisecond, "vhost %s", vhost)

		// ClientConnections counts the client above, not faultline's own.
		own, err := amqp.DialConfig(in.AMQPURL(vhost), OwnAMQPConfig(10*time.Second))
		require.NoError(t, err)
		defer own.Close()
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			n, err := in.ClientConnections(ctx, vhost)
			require.NoError(c, err)
			assert.Equal(c, 1, n)
		}, 15*time.Second, 100*time.Millisecond, "client connections of vhost %s", vhost)

		require.NoError(t, in.DeleteVHost(ctx, vhost))
		require.NoError(t, in.DeleteVHost(ctx, vhost), "deleting a missing vhost is fine")
		_, err = in.Queue(ctx, vhost, "parked")
		assert.ErrorIs(t, err, ErrNotFound)
	})
}

// waitQueuesSaved waits until the broker's Ra registries on disk name
// every quorum queue it lists (QueueRegistry): a node killed sooner comes
// back with the queue but not its server, leaderless for good.
func waitQueuesSaved(ctx context.Context, t *testing.T, in Infra) {
	t.Helper()
	reg, ok := in.(QueueRegistry)
	require.True(t, ok, "the %s provider reads its Ra registries", in.Name())
	begin := time.Now()
	first, err := reg.QueueServersSaved(ctx)
	require.NoError(t, err)
	last := first
	for !last.Saved() {
		require.Less(t, time.Since(begin), 30*time.Second, "registries never named every queue: %s", last)
		time.Sleep(50 * time.Millisecond)
		last, err = reg.QueueServersSaved(ctx)
		require.NoError(t, err)
	}
	require.Positive(t, last.Servers, "the broker lists the test's quorum queue")
	t.Logf("FIGURE Ra registries: %d of %d servers unsaved at first, all saved after %s", len(first.Unsaved), first.Servers,
		time.Since(begin).Round(time.Millisecond))
}

// testRestartKeepsQuorumMessage crashes and restarts the broker under a
// client: the client sees its connection drop, and a persistent message in
// a quorum queue is there again once the queue has a leader.
func testRestartKeepsQuorumMessage(ctx context.Context, t *testing.T, in Infra, vhost string) {
	require.NoError(t, in.CreateVHost(ctx, vhost))
	conn, err := amqp.Dial(in.AMQPURL(vhost))
	require.NoError(t, err)
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	_, err = ch.QueueDeclare("q", true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	require.NoError(t, err)
	publish(ctx, t, ch, "q", "survives")
	waitQueuesSaved(ctx, t, in)

	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	t0 := time.Now()
	require.NoError(t, in.RestartBroker(ctx))
	t.Logf("broker restart took %s", time.Since(t0).Round(100*time.Millisecond))
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Error("client did not see the connection drop")
	}

	conn, err = amqp.Dial(in.AMQPURL(vhost))
	require.NoError(t, err)
	defer conn.Close()
	// The quorum queue elects its leader shortly after the node is up.
	var body string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ch, err := conn.Channel()
		require.NoError(c, err)
		defer ch.Close()
		m, ok, err := ch.Get("q", true)
		require.NoError(c, err)
		require.True(c, ok, "queue empty")
		body = string(m.Body)
	}, 30*time.Second, 200*time.Millisecond)
	assert.Equal(t, "survives", body)
	require.NoError(t, in.DeleteVHost(ctx, vhost))
}

// testSlots: the server serves logical replication (a relay that tails the
// write-ahead log creates a slot), and dropping a run's database drops its
// slots, one of them held by a WAL sender streaming from it: DROP DATABASE
// alone refuses a database that has one.
func testSlots(ctx context.Context, t *testing.T, in Infra, db string) {
	require.NoError(t, in.CreateDatabase(ctx, db))
	t.Cleanup(func() { _ = in.DropDatabase(context.Background(), db) })
	conn, err := pgx.Connect(ctx, in.PostgresURL(db))
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	var level string
	require.NoError(t, conn.QueryRow(ctx, `SHOW wal_level`).Scan(&level))
	require.Equal(t, "logical", level)
	_, err = conn.Exec(ctx, `CREATE TABLE outbox (id int PRIMARY KEY); CREATE PUBLICATION outbox_pub FOR TABLE outbox`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, db+"_idle")
	require.NoError(t, err)

	// A WAL sender streaming from the second slot, as a log relay's.
	u, err := url.Parse(in.PostgresURL(db))
	require.NoError(t, err)
	q := u.Query()
	q.Set("replication", "database")
	u.RawQuery = q.Encode()
	rc, err := pgconn.Connect(ctx, u.String())
	require.NoError(t, err)
	defer rc.Close(context.WithoutCancel(ctx))
	_, err = rc.Exec(ctx, "CREATE_REPLICATION_SLOT "+db+"_busy LOGICAL pgoutput").ReadAll()
	require.NoError(t, err)
	rc.Frontend().Send(&pgproto3.Query{String: "START_REPLICATION SLOT " + db + "_busy LOGICAL 0/0 (proto_version '1', publication_names 'outbox_pub')"})
	require.NoError(t, rc.Frontend().Flush())
	msg, err := rc.Frontend().Receive()
	require.NoError(t, err)
	require.IsType(t, &pgproto3.CopyBothResponse{}, msg, "streaming")
	var active int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1 AND active`, db).Scan(&active))
	require.Equal(t, 1, active)
	_ = conn.Close(ctx)

	require.NoError(t, in.DropDatabase(ctx, db))
	admin, err := pgx.Connect(ctx, in.PostgresURL("postgres"))
	require.NoError(t, err)
	defer admin.Close(context.WithoutCancel(ctx))
	var slots, dbs int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, db).Scan(&slots))
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, db).Scan(&dbs))
	assert.Zero(t, slots, "its slots are gone")
	assert.Zero(t, dbs, "the database is gone")
}

// testFirehose turns a vhost's firehose on: a mandatory publish routed
// nowhere is still returned, and its copy (with its message id) reaches a
// queue bound to amq.rabbitmq.trace; turned off, no copy comes (a marker
// published after it on the same channel comes first). A vhost that does
// not exist is an error, and is not created.
func testFirehose(ctx context.Context, t *testing.T, in Infra, vhost string) {
	require.NoError(t, in.CreateVHost(ctx, vhost))
	t.Cleanup(func() { _ = in.DeleteVHost(context.Background(), vhost) })
	conn, err := amqp.Dial(in.AMQPURL(vhost))
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	returns := ch.NotifyReturn(make(chan amqp.Return, 4))
	require.NoError(t, ch.ExchangeDeclare("events", "direct", false, true, false, false, nil))
	_, err = ch.QueueDeclare("copies", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind("copies", "publish.events", "amq.rabbitmq.trace", false, nil))

	unroutable := func(id string) {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "events", "nowhere", true, false, amqp.Publishing{MessageId: id, Headers: amqp.Table{"x-event-id": "H" + id}, Body: []byte(`{}`)})
		require.NoError(t, err)
		ok, err := dc.WaitContext(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		select {
		case r := <-returns:
			assert.Equal(t, id, r.MessageId, "returned")
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no return", id)
		}
	}
	first := func() amqp.Delivery {
		m, ok, err := ch.Get("copies", true)
		require.NoError(t, err)
		require.True(t, ok, "copies holds a message")
		return m
	}

	require.NoError(t, in.TraceVHost(ctx, vhost, true))
	unroutable("E1")
	props, _ := first().Headers["properties"].(amqp.Table)
	assert.Equal(t, "E1", props["message_id"], "the copy carries the publish's message id")
	headers, _ := props["headers"].(amqp.Table)
	assert.Equal(t, "HE1", headers["x-event-id"], "and its headers")

	require.NoError(t, in.TraceVHost(ctx, vhost, false))
	unroutable("E2")
	publish(ctx, t, ch, "copies", "marker")
	assert.Equal(t, "marker", string(first().Body), "no copy once off")

	missing := vhost + "_missing"
	err = in.TraceVHost(ctx, missing, true)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = in.VHost(ctx, missing)
	assert.ErrorIs(t, err, ErrNotFound, "not created")
}
