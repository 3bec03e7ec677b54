package order_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/message"
	"github.com/faultline-dev/faultline/system/order"
)

const validBody = `{"customerId":"cust-1","amount":12.50,"currency":"EUR","items":[{"sku":"sku-1","quantity":2}]}`

// postCreated posts body to path and expects a 201 with an order.Created.
func (e *env) postCreated(path, body string) order.Created {
	e.t.Helper()
	code, answer := e.post(path, body)
	return created(e.t, code, answer)
}

// created decodes a 201 answer and checks its ids.
func created(t *testing.T, code int, body string) order.Created {
	t.Helper()
	require.Equal(t, http.StatusCreated, code, body)
	var c order.Created
	require.NoError(t, json.Unmarshal([]byte(body), &c), body)
	require.Len(t, c.EventID, 26, "eventId is a ULID: %q", c.EventID)
	_, err := ulid.ParseStrict(c.EventID)
	require.NoError(t, err, "eventId %q is a ULID", c.EventID)
	return c
}

// outboxRow is one outbox_messages row.
type outboxRow struct {
	EventID, AggregateID, EventType, Status string
	Sequence                                int64
	Attempts                                int
	Payload                                 map[string]any
	OccurredAt                              time.Time
	Unlocked, Unpublished                   bool
	Xmin                                    string // the writing transaction
}

func (e *env) outbox(eventID string) outboxRow {
	e.t.Helper()
	var r outboxRow
	var payload []byte
	require.NoError(e.t, e.db.QueryRow(e.t.Context(), `
		SELECT event_id, aggregate_id, event_type, status, sequence, attempt_count, payload::text, occurred_at,
		       locked_by IS NULL AND locked_until IS NULL, published_at IS NULL, xmin::text
		FROM outbox_messages WHERE event_id = $1`, eventID).Scan(
		&r.EventID, &r.AggregateID, &r.EventType, &r.Status, &r.Sequence, &r.Attempts, &payload, &r.OccurredAt,
		&r.Unlocked, &r.Unpublished, &r.Xmin))
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	require.NoError(e.t, dec.Decode(&r.Payload))
	return r
}

// orderRow is one orders row.
type orderRow struct {
	CustomerID, Amount, Currency, Items, Status string
	Version                                     int64
	CreatedAt                                   time.Time
	Xmin                                        string
}

func (e *env) order(orderID string) orderRow {
	e.t.Helper()
	var r orderRow
	require.NoError(e.t, e.db.QueryRow(e.t.Context(), `
		SELECT customer_id, amount::text, currency, items::text, status, version, created_at, xmin::text
		FROM orders WHERE order_id = $1`, orderID).Scan(
		&r.CustomerID, &r.Amount, &r.Currency, &r.Items, &r.Status, &r.Version, &r.CreatedAt, &r.Xmin))
	return r
}

func TestCreateWritesOrderAndOutboxRowInOneTransaction(t *testing.T) {
	e := newEnv(t)
	c := e.postCreated("/orders", validBody)
	assert.Regexp(t, `^ORD-[0-9A-Z]{26}$`, c.OrderID)
	assert.Equal(t, int64(1), c.Sequence)
	assert.NotEqual(t, c.OrderID[len("ORD-"):], c.EventID, "orderId and eventId are distinct ULIDs")

	require.Equal(t, 1, e.count("orders"))
	require.Equal(t, 1, e.count("outbox_messages"))

	o := e.order(c.OrderID)
	assert.Equal(t, orderRow{CustomerID: "cust-1", Amount: "12.50", Currency: "EUR", Items: `[{"sku": "sku-1", "quantity": 2}]`,
		Status: "Created", Version: 1, CreatedAt: o.CreatedAt, Xmin: o.Xmin}, o)

	m := e.outbox(c.EventID)
	assert.Equal(t, c.OrderID, m.AggregateID)
	assert.Equal(t, int64(1), m.Sequence)
	assert.Equal(t, message.OrderCreated, m.EventType)
	assert.Equal(t, "Pending", m.Status)
	assert.Zero(t, m.Attempts)
	assert.True(t, m.Unlocked, "not claimed")
	assert.True(t, m.Unpublished, "not published")
	assert.Equal(t, o.Xmin, m.Xmin, "written by the same transaction")
	assert.True(t, o.CreatedAt.Equal(m.OccurredAt), "same time: order %s, event %s", o.CreatedAt, m.OccurredAt)
	assert.WithinDuration(t, time.Now(), m.OccurredAt, time.Minute)

	p := m.Payload
	assert.Equal(t, c.EventID, p["eventId"])
	assert.Equal(t, message.OrderCreated, p["eventType"])
	assert.Equal(t, c.OrderID, p["orderId"])
	assert.Equal(t, c.OrderID, p["aggregateId"])
	assert.Equal(t, "cust-1", p["customerId"])
	assert.Equal(t, json.Number("12.50"), p["amount"], "the amount as the client wrote it, as a JSON number")
	assert.Equal(t, "EUR", p["currency"])
	assert.Equal(t, json.Number("1"), p["sequence"])
	occurred, err := time.Parse(time.RFC3339Nano, p["occurredAt"].(string))
	require.NoError(t, err, "occurredAt is RFC 3339")
	assert.True(t, occurred.Equal(m.OccurredAt), "payload occurredAt %s = row occurred_at %s", occurred, m.OccurredAt)
	assert.Equal(t, []any{map[string]any{"sku": "sku-1", "quantity": json.Number("2")}}, p["items"])

	// The payload is the message contract: the consumer parses it.
	raw, err := json.Marshal(p)
	require.NoError(t, err)
	ev, err := message.Parse(raw)
	require.NoError(t, err)
	assert.Equal(t, c.EventID, ev.EventID)

	// The commit is in the event log, after the fact.
	var committed []eventlog.Entry
	for _, x := range e.events() {
		if x.Event == eventlog.Committed {
			committed = append(committed, x)
		}
	}
	require.Len(t, committed, 1)
	assert.Equal(t, c.EventID, committed[0].EventID)
	assert.Equal(t, c.OrderID, committed[0].AggregateID)
	assert.Equal(t, int64(1), committed[0].Sequence)
}

func TestCreateWithoutItems(t *testing.T) {
	e := newEnv(t)
	c := e.postCreated("/orders", `{"customerId":"c.2_x-Y","amount":0,"currency":"JPY"}`)
	o := e.order(c.OrderID)
	assert.Equal(t, "[]", o.Items)
	assert.Equal(t, "0.00", o.Amount)
	assert.Equal(t, []any{}, e.outbox(c.EventID).Payload["items"])
}

func TestCreateRejectsBadBodies(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"malformed JSON", `{"customerId":"c-1","amount":`, "malformed JSON body"},
		{"empty body", ``, "malformed JSON body"},
		{"JSON array", `[` + validBody + `]`, "malformed JSON body"},
		{"null", `null`, "customerId is required"},
		{"missing customerId", `{"amount":1,"currency":"EUR"}`, "customerId is required"},
		{"empty customerId", `{"customerId":"","amount":1,"currency":"EUR"}`, "customerId is required"},
		{"customerId with spaces", `{"customerId":"a b","amount":1,"currency":"EUR"}`, "customerId must be"},
		{"missing amount", `{"customerId":"c-1","currency":"EUR"}`, "amount is required"},
		{"null amount", `{"customerId":"c-1","amount":null,"currency":"EUR"}`, "amount is required"},
		{"negative amount", `{"customerId":"c-1","amount":-1.00,"currency":"EUR"}`, "amount -1.00 is negative"},
		{"amount as a string", `{"customerId":"c-1","amount":"12.50","currency":"EUR"}`, "amount must be a JSON number"},
		{"amount as a word", `{"customerId":"c-1","amount":"lots","currency":"EUR"}`, "amount must be a JSON number"},
		{"amount as a bool", `{"customerId":"c-1","amount":true,"currency":"EUR"}`, "amount must be a JSON number"},
		{"amount with exponent", `{"customerId":"c-1","amount":1e3,"currency":"EUR"}`, "plain decimal"},
		{"amount too large", `{"customerId":"c-1","amount":10000000000000000,"currency":"EUR"}`, "too large"},
		{"amount with more than two decimals", `{"customerId":"c-1","amount":12.345,"currency":"EUR"}`, "at most 2 decimal places"},
		{"missing currency", `{"customerId":"c-1","amount":1}`, "currency is required"},
		{"unknown currency", `{"customerId":"c-1","amount":1,"currency":"XXX"}`, `unknown currency "XXX"`},
		{"lower-case currency", `{"customerId":"c-1","amount":1,"currency":"eur"}`, `unknown currency "eur"`},
		{"unknown field", `{"customerId":"c-1","amount":1,"currency":"EUR","coupon":"FREE"}`, `unknown field "coupon"`},
		{"items with quantity 0", `{"customerId":"c-1","amount":1,"currency":"EUR","items":[{"sku":"a","quantity":0}]}`, "items[0].quantity must be positive"},
		{"items with negative quantity", `{"customerId":"c-1","amount":1,"currency":"EUR","items":[{"sku":"a","quantity":1},{"sku":"b","quantity":-2}]}`, "items[1].quantity must be positive"},
		{"item without sku", `{"customerId":"c-1","amount":1,"currency":"EUR","items":[{"quantity":1}]}`, "items[0].sku is required"},
		{"two JSON values", validBody + validBody, "more than one JSON value"},
		{"trailing garbage", validBody + ` x`, "more than one JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.post("/orders", tc.body)
			assert.Equal(t, http.StatusBadRequest, code, body)
			var answer map[string]string
			require.NoError(t, json.Unmarshal([]byte(body), &answer), "the error is JSON: %s", body)
			assert.Contains(t, answer["error"], tc.want)
		})
	}
	assert.Zero(t, e.count("orders"), "no order written for a bad body")
	assert.Zero(t, e.count("outbox_messages"), "no outbox row written for a bad body")
	for _, x := range e.events() {
		assert.NotEqual(t, eventlog.Committed, x.Event)
	}
}

func TestCreateRejectsOversizedBody(t *testing.T) {
	e := newEnv(t)
	big := `{"customerId":"c-1","amount":1,"currency":"EUR","items":[`
	for i := range 4000 {
		if i > 0 {
			big += ","
		}
		big += `{"sku":"sku-with-a-long-name","quantity":1}`
	}
	big += `]}`
	require.Greater(t, len(big), 64<<10)
	code, body := e.post("/orders", big)
	assert.Equal(t, http.StatusBadRequest, code, body)
	assert.Contains(t, body, "too large")
	assert.Zero(t, e.count("orders"))
}

func TestTransitions(t *testing.T) {
	e := newEnv(t)
	c := e.postCreated("/orders", validBody)

	// pay: sequence 2, an order.paid row of the same aggregate.
	paid := e.postCreated("/orders/"+c.OrderID+"/pay", "")
	assert.Equal(t, c.OrderID, paid.OrderID)
	assert.Equal(t, int64(2), paid.Sequence)
	assert.NotEqual(t, c.EventID, paid.EventID)
	m := e.outbox(paid.EventID)
	assert.Equal(t, message.OrderPaid, m.EventType)
	assert.Equal(t, c.OrderID, m.AggregateID)
	assert.Equal(t, int64(2), m.Sequence)
	assert.Equal(t, "Pending", m.Status)
	assert.Equal(t, message.OrderPaid, m.Payload["eventType"])
	assert.Equal(t, json.Number("2"), m.Payload["sequence"])
	assert.Equal(t, json.Number("12.50"), m.Payload["amount"], "the paid event carries the order's amount")
	assert.Equal(t, "cust-1", m.Payload["customerId"])
	o := e.order(c.OrderID)
	assert.Equal(t, "Paid", o.Status)
	assert.Equal(t, int64(2), o.Version)
	assert.Equal(t, o.Xmin, m.Xmin, "status change and event in one transaction")

	// pay again: 409, nothing written.
	code, body := e.post("/orders/"+c.OrderID+"/pay", "")
	assert.Equal(t, http.StatusConflict, code, body)
	assert.Contains(t, body, "is Paid: cannot become Paid")
	assert.Equal(t, 2, e.count("outbox_messages"))

	// cancel: sequence 3.
	cancelled := e.postCreated("/orders/"+c.OrderID+"/cancel", "")
	assert.Equal(t, int64(3), cancelled.Sequence)
	m = e.outbox(cancelled.EventID)
	assert.Equal(t, message.OrderCancelled, m.EventType)
	assert.Equal(t, int64(3), m.Sequence)
	assert.Equal(t, "Cancelled", e.order(c.OrderID).Status)

	// cancel or pay a cancelled order: 409.
	code, body = e.post("/orders/"+c.OrderID+"/cancel", "")
	assert.Equal(t, http.StatusConflict, code, body)
	code, body = e.post("/orders/"+c.OrderID+"/pay", "")
	assert.Equal(t, http.StatusConflict, code, body)
	assert.Contains(t, body, "is Cancelled: cannot become Paid")

	// unknown order: 404.
	for _, action := range []string{"pay", "cancel"} {
		code, body = e.post("/orders/ORD-NOPE/"+action, "")
		assert.Equal(t, http.StatusNotFound, code, body)
		assert.Contains(t, body, `order \"ORD-NOPE\" not found`)
	}
	assert.Equal(t, 3, e.count("outbox_messages"), "refused transitions write nothing")
	assert.Equal(t, 1, e.count("orders"))

	// The aggregate's events are 1, 2, 3 with no gap.
	rows, err := e.db.Query(t.Context(), `SELECT sequence, event_type FROM outbox_messages WHERE aggregate_id = $1 ORDER BY sequence`, c.OrderID)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var seq int64
		var typ string
		require.NoError(t, rows.Scan(&seq, &typ))
		got = append(got, typ)
		assert.Equal(t, int64(len(got)), seq)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{message.OrderCreated, message.OrderPaid, message.OrderCancelled}, got)
}

func TestCancelBeforePay(t *testing.T) {
	e := newEnv(t)
	c := e.postCreated("/orders", validBody)
	cancelled := e.postCreated("/orders/"+c.OrderID+"/cancel", "")
	assert.Equal(t, int64(2), cancelled.Sequence)
	code, body := e.post("/orders/"+c.OrderID+"/pay", "")
	assert.Equal(t, http.StatusConflict, code, body)
}

// TestConcurrentPaysOneWins: racing pays of one order give one 201 and 409s,
// never two order.paid events.
func TestConcurrentPaysOneWins(t *testing.T) {
	e := newEnv(t)
	c := e.postCreated("/orders", validBody)
	codes := make([]int, 8)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() { codes[i], _ = e.post("/orders/"+c.OrderID+"/pay", "") })
	}
	wg.Wait()
	won := 0
	for _, code := range codes {
		switch code {
		case http.StatusCreated:
			won++
		default:
			assert.Equal(t, http.StatusConflict, code)
		}
	}
	assert.Equal(t, 1, won)
	var paid int
	require.NoError(t, e.db.QueryRow(t.Context(), `SELECT count(*) FROM outbox_messages WHERE event_type = 'order.paid'`).Scan(&paid))
	assert.Equal(t, 1, paid)
}

func TestConcurrentCreates(t *testing.T) {
	e := newEnv(t)
	const orders, workers = 200, 8
	jobs := make(chan int)
	results := make(chan order.Created, orders)
	failures := make(chan string, orders)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range jobs {
				code, body := e.post("/orders", validBody)
				if code != http.StatusCreated {
					failures <- body
					continue
				}
				var c order.Created
				if err := json.Unmarshal([]byte(body), &c); err != nil {
					failures <- body
					continue
				}
				results <- c
			}
		})
	}
	for i := range orders {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(results)
	close(failures)
	for f := range failures {
		t.Errorf("failed create: %s", f)
	}

	eventIDs, orderIDs := map[string]bool{}, map[string]bool{}
	for c := range results {
		assert.False(t, eventIDs[c.EventID], "duplicate eventId %s", c.EventID)
		assert.False(t, orderIDs[c.OrderID], "duplicate orderId %s", c.OrderID)
		eventIDs[c.EventID], orderIDs[c.OrderID] = true, true
	}
	assert.Len(t, eventIDs, orders)
	assert.Equal(t, orders, e.count("orders"))
	assert.Equal(t, orders, e.count("outbox_messages"))
	var distinct, mismatched int
	require.NoError(t, e.db.QueryRow(t.Context(), `SELECT count(DISTINCT event_id) FROM outbox_messages`).Scan(&distinct))
	assert.Equal(t, orders, distinct)
	require.NoError(t, e.db.QueryRow(t.Context(), `
		SELECT count(*) FROM orders o FULL JOIN outbox_messages m ON m.aggregate_id = o.order_id
		WHERE o.order_id IS NULL OR m.event_id IS NULL OR m.sequence <> 1 OR o.xmin <> m.xmin`).Scan(&mismatched))
	assert.Zero(t, mismatched, "every order has exactly its own order.created row, from its own transaction")
}

// TestRun runs the service as its program does: schema applied at start,
// bound address logged as `control`, health and the API on one listener,
// a clean stop when ctx ends.
func TestRun(t *testing.T) {
	name := newDatabase(t)
	logPath := filepath.Join(t.TempDir(), "order.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- order.Run(ctx, order.Config{DBURL: testInfra.PostgresURL(name), Listen: "127.0.0.1:0", Instance: "order-1", EventLog: logPath})
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "Run returns nil on a clean stop")
		case <-time.After(waitTimeout):
			t.Errorf("Run did not return within %s of ctx ending", waitTimeout)
		}
	}
	t.Cleanup(stop)

	var addr string
	waitLog(t, logPath, "the control line", func(es []eventlog.Entry) bool {
		for _, x := range es {
			if x.Event == eventlog.Control {
				addr = x.Detail
				return true
			}
		}
		return false
	})
	base := "http://" + addr
	client := &http.Client{Timeout: 10 * time.Second}

	code, body := do(t, client, http.MethodGet, base+"/healthz", "")
	assert.Equal(t, http.StatusOK, code, body)

	code, body = do(t, client, http.MethodPost, base+"/orders", validBody)
	c := created(t, code, body)
	code, body = do(t, client, http.MethodPost, base+"/orders/"+c.OrderID+"/pay", "")
	paid := created(t, code, body)
	assert.Equal(t, int64(2), paid.Sequence)

	code, body = do(t, client, http.MethodGet, base+"/crashpoints", "")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "order.before-commit")

	es := readLog(t, logPath)
	require.NotEmpty(t, es)
	assert.Equal(t, eventlog.Started, es[0].Event)
	for _, x := range es {
		assert.Equal(t, "order-1", x.Process)
	}

	stop()
	client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/healthz", nil)
	require.NoError(t, err)
	_, err = client.Do(req)
	assert.Error(t, err, "the listener is closed after Run returns")
}

func TestRunRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  order.Config
		want string
	}{
		{order.Config{Listen: "127.0.0.1:0", Instance: "order"}, "--db-url is required"},
		{order.Config{DBURL: "postgres://x/y", Listen: "127.0.0.1:0"}, "--instance must not be empty"},
		{order.Config{DBURL: "postgres://x/y", Listen: "0.0.0.0:8080", Instance: "order"}, "only loopback"},
	} {
		err := order.Run(t.Context(), tc.cfg)
		assert.ErrorContains(t, err, tc.want)
	}
}
