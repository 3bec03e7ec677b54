package variant_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/crashpoint"
	"github.com/faultline-dev/faultline/system/schema"
	"github.com/faultline-dev/faultline/system/topology"
	"github.com/faultline-dev/faultline/system/variant"
)

var envSeq atomic.Int64

// orderEnv is one test's orders database, vhost (with the inventory queue
// bound) and the order program.
type orderEnv struct {
	t       *testing.T
	name    string
	db      *pgxpool.Pool
	bin     string
	logPath string
}

func newOrderEnv(t *testing.T, bin string) *orderEnv {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("variant_test_%d_%d", os.Getpid(), envSeq.Add(1))
	require.NoError(t, local.CreateDatabase(ctx, name))
	require.NoError(t, local.CreateVHost(ctx, name))
	t.Cleanup(func() {
		_ = local.DropDatabase(context.Background(), name)
		_ = local.DeleteVHost(context.Background(), name)
	})
	db, err := pgxpool.New(ctx, local.PostgresURL(name))
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.NoError(t, schema.ApplyOrders(ctx, db))
	e := &orderEnv{t: t, name: name, db: db, bin: bin, logPath: filepath.Join(t.TempDir(), "order.jsonl")}
	conn, err := amqp.Dial(local.AMQPURL(name))
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, topology.DeclareConsumer(ch, topology.QueueOptions{}))
	return e
}

// start runs the order program with the variant (and crash point arming)
// from the environment, as the harness does, and returns its API address.
func (e *orderEnv) start(name, arming string) (*exec.Cmd, string) {
	e.t.Helper()
	before := len(e.events())
	cmd := exec.Command(e.bin, "--db-url", local.PostgresURL(e.name), "--listen", "127.0.0.1:0", "--event-log", e.logPath)
	cmd.Env = append(os.Environ(), variant.EnvVar+"="+name, "ORDER_AMQP_URL="+local.AMQPURL(e.name), crashpoint.EnvVar+"="+arming)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(e.t, cmd.Start())
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if e.t.Failed() {
			e.t.Logf("stderr of the order service:\n%s", stderr.String())
		}
	})
	var addr string
	e.waitFor("the order service's address", func(es []eventlog.Entry) bool {
		for _, x := range es[before:] {
			if x.Event == eventlog.Control {
				addr = x.Detail
				return true
			}
		}
		return false
	})
	return cmd, addr
}

func (e *orderEnv) events() []eventlog.Entry {
	es, err := eventlog.ReadFile(e.logPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(e.t, err)
	return es
}

func (e *orderEnv) waitFor(what string, cond func([]eventlog.Entry) bool) []eventlog.Entry {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		es := e.events()
		if cond(es) {
			return es
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s; log: %+v", what, es)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createOrder posts one order; it returns the status (0 if the connection
// broke) and the eventId of a 201.
func createOrder(t *testing.T, addr string) (int, string) {
	t.Helper()
	body := `{"customerId":"c-1","amount":12.5,"currency":"EUR","items":[{"sku":"A","quantity":1}]}`
	resp, err := http.Post("http://"+addr+"/orders", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	var created struct {
		EventID string `json:"eventId"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&created)
	return resp.StatusCode, created.EventID
}

func (e *orderEnv) count(table string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.db.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// queued takes every message of the inventory queue.
func (e *orderEnv) queued() []amqp.Delivery {
	e.t.Helper()
	conn, err := amqp.Dial(local.AMQPURL(e.name))
	require.NoError(e.t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(e.t, err)
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(topology.Queue, true)
		require.NoError(e.t, err)
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

func events(es []eventlog.Entry, event string) []eventlog.Entry {
	var out []eventlog.Entry
	for _, x := range es {
		if x.Event == event {
			out = append(out, x)
		}
	}
	return out
}

func waitKilled(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("order service %d did not die", cmd.Process.Pid)
	}
	status := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, status.Signaled(), "killed by a signal, got %v", cmd.ProcessState)
	require.Equal(t, syscall.SIGKILL, status.Signal())
}

func TestOrderVariants(t *testing.T) {
	t.Parallel()
	bin := build(t, "order")

	// commit-then-publish: no outbox row; the service itself publishes to
	// the bound queue after the commit, persistent, MessageId = eventId.
	t.Run("commit-then-publish publishes itself", func(t *testing.T) {
		t.Parallel()
		e := newOrderEnv(t, bin)
		_, addr := e.start(variant.CommitThenPublish, "")
		status, eventID := createOrder(t, addr)
		require.Equal(t, http.StatusCreated, status)
		assert.Equal(t, 1, e.count("orders"))
		assert.Equal(t, 0, e.count("outbox_messages"), "no outbox")
		msgs := e.queued()
		require.Len(t, msgs, 1)
		assert.Equal(t, eventID, msgs[0].MessageId)
		assert.Equal(t, "order.created", msgs[0].RoutingKey)
		assert.Equal(t, uint8(amqp.Persistent), msgs[0].DeliveryMode)
		es := e.events()
		assert.Contains(t, events(es, eventlog.Started)[0].Detail, "variant="+variant.CommitThenPublish)
		var order []string
		for _, x := range es {
			if x.EventID == eventID {
				order = append(order, x.Event)
			}
		}
		assert.Equal(t, []string{eventlog.Committed, eventlog.Published, eventlog.Confirmed}, order)
	})

	// Its window: a crash after the commit loses the event.
	t.Run("commit-then-publish killed at order.after-commit loses the event", func(t *testing.T) {
		t.Parallel()
		e := newOrderEnv(t, bin)
		cmd, addr := e.start(variant.CommitThenPublish, crashpoint.OrderAfterCommit+"=kill@1")
		status, _ := createOrder(t, addr)
		assert.Zero(t, status, "the service died during the request")
		waitKilled(t, cmd)
		assert.Equal(t, 1, e.count("orders"), "the order committed")
		assert.Equal(t, 0, e.count("outbox_messages"))
		assert.Empty(t, e.queued(), "its event was never published")
		assert.Empty(t, events(e.events(), eventlog.Published))
	})

	// publish-then-commit: the event is published and confirmed inside the
	// transaction; a crash before the commit leaves a delivered message
	// and no order.
	t.Run("publish-then-commit killed at order.before-commit leaves a phantom", func(t *testing.T) {
		t.Parallel()
		e := newOrderEnv(t, bin)
		cmd, addr := e.start(variant.PublishThenCommit, crashpoint.OrderBeforeCommit+"=kill@1")
		status, _ := createOrder(t, addr)
		assert.Zero(t, status, "the service died during the request")
		waitKilled(t, cmd)
		es := e.events()
		published := events(es, eventlog.Published)
		require.Len(t, published, 1)
		assert.Len(t, events(es, eventlog.Confirmed), 1)
		assert.Empty(t, events(es, eventlog.Committed))
		assert.Equal(t, eventlog.CrashPoint, es[len(es)-1].Event)
		assert.Equal(t, 0, e.count("orders"), "the order rolled back")
		assert.Equal(t, 0, e.count("outbox_messages"))
		msgs := e.queued()
		require.Len(t, msgs, 1, "the event was delivered")
		assert.Equal(t, published[0].EventID, msgs[0].MessageId)
	})

	// Unharmed, publish-then-commit commits after the confirm; pay goes the
	// same way.
	t.Run("publish-then-commit without a crash", func(t *testing.T) {
		t.Parallel()
		e := newOrderEnv(t, bin)
		_, addr := e.start(variant.PublishThenCommit, "")
		status, eventID := createOrder(t, addr)
		require.Equal(t, http.StatusCreated, status)
		var orderID string
		require.NoError(t, e.db.QueryRow(context.Background(), `SELECT order_id FROM orders`).Scan(&orderID))
		resp, err := http.Post("http://"+addr+"/orders/"+orderID+"/pay", "application/json", nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		assert.Equal(t, 0, e.count("outbox_messages"))
		msgs := e.queued()
		require.Len(t, msgs, 2)
		assert.Equal(t, eventID, msgs[0].MessageId)
		assert.Equal(t, "order.paid", msgs[1].RoutingKey)
		var order []string
		for _, x := range e.events() {
			if x.EventID == eventID {
				order = append(order, x.Event)
			}
		}
		assert.Equal(t, []string{eventlog.Published, eventlog.Confirmed, eventlog.Committed}, order)
	})

	// A variant of another process leaves the order service correct.
	t.Run("another process's variant", func(t *testing.T) {
		t.Parallel()
		e := newOrderEnv(t, bin)
		_, addr := e.start(variant.NoInbox, "")
		status, _ := createOrder(t, addr)
		require.Equal(t, http.StatusCreated, status)
		assert.Equal(t, 1, e.count("outbox_messages"), "the outbox row is written")
		assert.Empty(t, e.queued(), "nothing published by the order service")
		assert.Contains(t, events(e.events(), eventlog.Started)[0].Detail, "variant=no-inbox (breaks inventory; this process is correct)")
	})
}
