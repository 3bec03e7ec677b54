package inventory_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/infra/infratest"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/inventory"
	"github.com/faultline-dev/faultline/system/topology"
)

// testInfra is the one PostgreSQL + RabbitMQ of this test binary
// (FAULTLINE_INFRA chooses it); every test gets its own database and vhost.
var testInfra infra.Infra

func TestMain(m *testing.M) {
	infratest.Main(m, func(in infra.Infra) { testInfra = in })
}

// waitTimeout bounds every wait for a condition.
const waitTimeout = 30 * time.Second

// env is one test's database, vhost and event log.
type env struct {
	t       *testing.T
	name    string // database and vhost name
	db      *pgxpool.Pool
	logPath string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "inv_" + hex.EncodeToString(b)
	ctx := t.Context()
	require.NoError(t, testInfra.CreateDatabase(ctx, name))
	require.NoError(t, testInfra.CreateVHost(ctx, name))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := testInfra.DropDatabase(ctx, name); err != nil {
			t.Logf("drop database: %v", err)
		}
		if err := testInfra.DeleteVHost(ctx, name); err != nil {
			t.Logf("delete vhost: %v", err)
		}
	})
	db, err := pgxpool.New(ctx, testInfra.PostgresURL(name))
	require.NoError(t, err)
	t.Cleanup(db.Close)
	e := &env{t: t, name: name, db: db, logPath: filepath.Join(t.TempDir(), "inventory.jsonl")}
	e.declare()
	return e
}

func (e *env) dbURL() string { return testInfra.PostgresURL(e.name) }

// dbURLVia is dbURL through a forwarder at addr, with its credentials, and
// a short connect timeout so that an outage ends each dial quickly.
func (e *env) dbURLVia(addr string) string {
	u, err := url.Parse(e.dbURL())
	require.NoError(e.t, err)
	u.Host = addr
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	return u.String()
}
func (e *env) amqpURL() string { return testInfra.AMQPURL(e.name) }

// amqpURLVia is amqpURL through a forwarder at addr, with its credentials.
func (e *env) amqpURLVia(addr string) string {
	u, err := url.Parse(e.amqpURL())
	require.NoError(e.t, err)
	u.Host = addr
	return u.String()
}

// config is a consumer configuration for this env: fast retries, no
// periodic cleanup.
func (e *env) config() inventory.Config {
	cfg := inventory.DefaultConfig()
	cfg.DBURL = e.dbURL()
	cfg.AMQPURL = e.amqpURL()
	cfg.EventLog = e.logPath
	cfg.CleanupInterval = 0
	cfg.ReconnectMax = 200 * time.Millisecond
	cfg.Workers = 1 // one channel: the tests follow its deliveries one by one (TestWorkers runs several)
	return cfg
}

// declare declares the topology, so messages can be published before the
// consumer runs.
func (e *env) declare() {
	conn, err := amqp.Dial(e.amqpURL())
	require.NoError(e.t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(e.t, err)
	require.NoError(e.t, topology.DeclareConsumer(ch, topology.QueueOptions{}))
}

// running is an in-process consumer.
type running struct {
	cancel  context.CancelFunc
	done    chan error
	control string // control server address
}

// start runs the consumer in-process until the test ends, and waits until it
// consumes.
func (e *env) start(cfg inventory.Config) *running {
	e.t.Helper()
	return e.startWith(inventory.Run, cfg)
}

// startWith is start with another entry point (a test variant).
func (e *env) startWith(run func(context.Context, inventory.Config) error, cfg inventory.Config) *running {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	before := len(e.events())
	go func() { r.done <- run(ctx, cfg) }()
	e.t.Cleanup(func() { r.stop(e.t) })
	var control string
	e.waitFor("consumer connected", func(es []eventlog.Entry) bool {
		for _, x := range es[before:] {
			if x.Event == eventlog.Control {
				control = x.Detail
			}
			if x.Event == eventlog.Connected && strings.HasPrefix(x.Detail, "amqp") {
				return true
			}
		}
		return false
	})
	r.control = control
	return r
}

// stop cancels the consumer and waits for Run to return.
func (r *running) stop(t *testing.T) {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			require.NoError(t, err)
			close(r.done)
		}
	case <-time.After(waitTimeout):
		t.Errorf("consumer did not stop within %s", waitTimeout)
	}
}

// publish sends bodies to the events exchange as persistent messages and
// waits for the broker's confirms.
func (e *env) publish(msgs ...amqp.Publishing) {
	e.t.Helper()
	conn, err := amqp.Dial(e.amqpURL())
	require.NoError(e.t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(e.t, err)
	require.NoError(e.t, ch.Confirm(false))
	returns := ch.NotifyReturn(make(chan amqp.Return, len(msgs)))
	ctx, cancel := context.WithTimeout(e.t.Context(), waitTimeout)
	defer cancel()
	for _, m := range msgs {
		m.DeliveryMode = amqp.Persistent
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, topology.Exchange, "order.created", true, false, m)
		require.NoError(e.t, err)
		ok, err := dc.WaitContext(ctx)
		require.NoError(e.t, err)
		require.True(e.t, ok, "broker nacked the publish")
	}
	select {
	case r := <-returns:
		e.t.Fatalf("message %s returned: %s", r.MessageId, r.ReplyText)
	default:
	}
}

// event is a valid message body.
func event(id, aggregate string, seq int64) amqp.Publishing {
	body, _ := json.Marshal(map[string]any{
		"eventId": id, "eventType": "order.created", "occurredAt": "2026-01-01T00:00:00Z",
		"orderId": aggregate, "customerId": "c-1", "amount": "12.50", "currency": "EUR",
		"aggregateId": aggregate, "sequence": seq,
	})
	return amqp.Publishing{MessageId: id, ContentType: "application/json", Body: body}
}

func (e *env) events() []eventlog.Entry {
	es, err := eventlog.ReadFile(e.logPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(e.t, err)
	return es
}

// waitFor polls the event log until cond holds, at most waitTimeout.
func (e *env) waitFor(what string, cond func([]eventlog.Entry) bool) []eventlog.Entry {
	e.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		es := e.events()
		if cond(es) {
			return es
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s; event log:\n%s", waitTimeout, what, dump(es))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// count counts log entries with that event (and eventId, if not empty).
func count(es []eventlog.Entry, event, eventID string) int {
	n := 0
	for _, x := range es {
		if x.Event == event && (eventID == "" || x.EventID == eventID) {
			n++
		}
	}
	return n
}

// waitCount waits until the log has at least n entries of event for eventID.
func (e *env) waitCount(event, eventID string, n int) []eventlog.Entry {
	e.t.Helper()
	return e.waitFor(fmt.Sprintf("%d × %s %s", n, event, eventID), func(es []eventlog.Entry) bool {
		return count(es, event, eventID) >= n
	})
}

func dump(es []eventlog.Entry) string {
	var b strings.Builder
	for _, x := range es {
		line, _ := json.Marshal(x)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// waitQueue polls the management API until the queue's counters satisfy cond.
func (e *env) waitQueue(queue string, what string, cond func(history.QueueInfo) bool) history.QueueInfo {
	e.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		q, err := testInfra.Queue(e.t.Context(), e.name, queue)
		if err == nil && cond(q) {
			return q
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for queue %s: %s (last: %+v, %v)", waitTimeout, queue, what, q, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ready is the queue's exact count of ready messages (a passive declare).
func (e *env) ready(queue string) (int, error) {
	conn, err := amqp.Dial(e.amqpURL())
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	return q.Messages, err
}

// waitReady waits until the queue holds exactly n ready messages.
func (e *env) waitReady(queue string, n int) {
	e.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		got, err := e.ready(queue)
		if err == nil && got == n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %d ready in %s (last: %d, %v)", waitTimeout, n, queue, got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitDrained waits until the inventory queue holds nothing: no ready
// message (exact), and nothing unacked (management API).
func (e *env) waitDrained() {
	e.t.Helper()
	e.waitReady(topology.Queue, 0)
	e.waitQueue(topology.Queue, "drained, nothing unacked", func(q history.QueueInfo) bool {
		return q.Messages == 0 && q.Ready == 0 && q.Unacked == 0
	})
}

// reservations returns the event ids of the reservations, in reservation_id order.
func (e *env) reservations() []string {
	e.t.Helper()
	rows, err := e.db.Query(e.t.Context(), `SELECT event_id FROM inventory_reservations ORDER BY reservation_id`)
	require.NoError(e.t, err)
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(e.t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(e.t, rows.Err())
	return ids
}

// request calls the control server.
func request(t *testing.T, method, control, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+control+path, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

// forwarder is a TCP proxy that can be cut (listener closed, every
// connection reset) and restored on the same address: a dependency going
// away and coming back.
type forwarder struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

func newForwarder(t *testing.T, target string) *forwarder {
	f := &forwarder{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f.addr = ln.Addr().String()
	f.serve(ln)
	t.Cleanup(f.cut)
	return f
}

func (f *forwarder) serve(ln net.Listener) {
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", f.target)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns[c], f.conns[up] = struct{}{}, struct{}{}
			f.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close(); c.Close() }()
			go func() { _, _ = io.Copy(c, up); up.Close(); c.Close() }()
		}
	}()
}

// cut stops accepting and resets every connection.
func (f *forwarder) cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		f.ln.Close()
		f.ln = nil
	}
	for c := range f.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
	clear(f.conns)
}

// restore listens on the same address again.
func (f *forwarder) restore(t *testing.T) {
	ln, err := net.Listen("tcp", f.addr)
	require.NoError(t, err)
	f.serve(ln)
}
