// Package order is the order service: an HTTP API that writes an order and
// its outbox row in one PostgreSQL transaction. It never talks to RabbitMQ:
// the relay publishes what the outbox holds. (Only its two broken variants,
// which have no outbox, publish themselves: see variant_*.go.)
package order

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/crashpoint"
	"github.com/faultline-dev/faultline/system/message"
)

// Currencies the service accepts.
var currencies = map[string]bool{"CNY": true, "USD": true, "EUR": true, "GBP": true, "JPY": true}

var customerIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// maxBody bounds a request body.
const maxBody = 64 << 10

// Service serves the order API.
type Service struct {
	db     *pgxpool.Pool
	log    *eventlog.Log
	points *crashpoint.Set

	idMu    sync.Mutex
	entropy io.Reader

	// emit is how an event leaves the order's transaction: the outbox row,
	// or a variant's direct publish.
	emit emitter
	// commit commits the order's transaction: commitTx, or a variant's.
	commit func(ctx context.Context, tx pgx.Tx) error
}

// New makes a service over db.
func New(db *pgxpool.Pool, log *eventlog.Log, points *crashpoint.Set) *Service {
	return &Service{db: db, log: log, points: points, entropy: ulid.Monotonic(rand.Reader, 0), emit: outbox{}, commit: commitTx}
}

// emitter is how an event leaves the order service. The correct one writes
// the outbox row in the order's transaction and nothing else; the variants
// without an outbox publish the event to RabbitMQ themselves.
type emitter interface {
	// inTx runs in the order's transaction after its writes, before the
	// order.before-commit crash point and the commit.
	inTx(ctx context.Context, tx pgx.Tx, ev message.Event, now time.Time) error
	// committed runs after the commit, its `committed` line and the
	// order.after-commit crash point.
	committed(ctx context.Context, ev message.Event) error
}

// outbox is the correct emitter: the event is an outbox row, committed with
// the order or not at all; the relay publishes it.
type outbox struct{}

func (outbox) inTx(ctx context.Context, tx pgx.Tx, ev message.Event, now time.Time) error {
	return insertOutbox(ctx, tx, ev, now)
}

func (outbox) committed(context.Context, message.Event) error { return nil }

// Item is one line of an order.
type Item struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// CreateRequest is the body of POST /orders.
type CreateRequest struct {
	CustomerID *string `json:"customerId"`
	Amount     *Amount `json:"amount"`
	Currency   *string `json:"currency"`
	Items      []Item  `json:"items"`
}

// Amount is a JSON number. A json.Number would also take a string holding
// a number ("12.50"); the API takes only a number.
type Amount json.Number

// UnmarshalJSON accepts a JSON number only. b is one valid JSON value, so a
// leading '-' or digit makes it a number.
func (a *Amount) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return fmt.Errorf("amount must be a JSON number, not %s", b)
	}
	*a = Amount(b)
	return nil
}

// Created is the answer to POST /orders and to the state changes.
type Created struct {
	OrderID  string `json:"orderId"`
	EventID  string `json:"eventId"`
	Sequence int64  `json:"sequence"`
}

// Register mounts the API on mux.
func (s *Service) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /orders", s.handleCreate)
	mux.HandleFunc("POST /orders/{id}/pay", s.handleTransition(message.OrderPaid))
	mux.HandleFunc("POST /orders/{id}/cancel", s.handleTransition(message.OrderCancelled))
}

func (s *Service) newID() string {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	return ulid.MustNew(ulid.Timestamp(time.Now()), s.entropy).String()
}

type validated struct {
	customerID string
	amount     string
	currency   string
	items      []byte
}

func validate(r *http.Request) (validated, error) {
	r.Body = http.MaxBytesReader(nil, r.Body, maxBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var req CreateRequest
	if err := dec.Decode(&req); err != nil {
		return validated{}, fmt.Errorf("malformed JSON body: %v", err)
	}
	if dec.More() {
		return validated{}, errors.New("malformed JSON body: more than one JSON value")
	}
	var v validated
	switch {
	case req.CustomerID == nil || *req.CustomerID == "":
		return v, errors.New("customerId is required")
	case !customerIDPattern.MatchString(*req.CustomerID):
		return v, errors.New("customerId must be 1-64 letters, digits, '_', '.' or '-'")
	case req.Amount == nil:
		return v, errors.New("amount is required")
	case req.Currency == nil || *req.Currency == "":
		return v, errors.New("currency is required")
	}
	number := json.Number(*req.Amount)
	amount, err := number.Float64()
	if err != nil {
		return v, fmt.Errorf("amount %q is not a number", number.String())
	}
	if amount < 0 {
		return v, fmt.Errorf("amount %s is negative", number.String())
	}
	if amount > 1e15 {
		return v, fmt.Errorf("amount %s is too large", number.String())
	}
	if strings.Contains(strings.ToLower(number.String()), "e") {
		return v, fmt.Errorf("amount %s: write it as a plain decimal", number.String())
	}
	// orders.amount is numeric(18,2): more decimals would be rounded in the
	// row while the event carried them unrounded.
	if _, frac, ok := strings.Cut(number.String(), "."); ok && len(frac) > 2 {
		return v, fmt.Errorf("amount %s: at most 2 decimal places", number.String())
	}
	if !currencies[*req.Currency] {
		return v, fmt.Errorf("unknown currency %q (accepted: CNY, EUR, GBP, JPY, USD)", *req.Currency)
	}
	for i, it := range req.Items {
		if it.SKU == "" {
			return v, fmt.Errorf("items[%d].sku is required", i)
		}
		if it.Quantity <= 0 {
			return v, fmt.Errorf("items[%d].quantity must be positive", i)
		}
	}
	if req.Items == nil {
		req.Items = []Item{}
	}
	items, _ := json.Marshal(req.Items)
	return validated{customerID: *req.CustomerID, amount: number.String(), currency: *req.Currency, items: items}, nil
}

func (s *Service) handleCreate(w http.ResponseWriter, r *http.Request) {
	v, err := validate(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	created, err := s.Create(r.Context(), v)
	if err != nil {
		s.log.Errorf("create order: %v", err)
		writeError(w, http.StatusServiceUnavailable, "could not create the order: "+err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, created)
}

// Create writes the order and its order.created outbox row in one transaction.
// (A variant's emitter replaces the outbox row.)
func (s *Service) Create(ctx context.Context, v validated) (Created, error) {
	orderID := "ORD-" + s.newID()
	eventID := s.newID()
	now := time.Now().UTC().Truncate(time.Microsecond) // what timestamptz keeps
	ev := message.Event{
		EventID: eventID, EventType: message.OrderCreated, OccurredAt: now.Format(time.RFC3339Nano),
		OrderID: orderID, CustomerID: v.customerID, Amount: json.Number(v.amount), Currency: v.currency,
		Items: v.items, AggregateID: orderID, Sequence: 1,
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx,
			`INSERT INTO orders (order_id, customer_id, amount, currency, items, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			orderID, v.customerID, v.amount, v.currency, v.items, now); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		return s.emit.inTx(ctx, tx, ev, now)
	})
	if err != nil {
		return Created{}, err
	}
	s.afterCommit(ev)
	if err := s.emit.committed(ctx, ev); err != nil {
		return Created{}, err
	}
	return Created{OrderID: orderID, EventID: eventID, Sequence: 1}, nil
}

func (s *Service) handleTransition(eventType string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		orderID := r.PathValue("id")
		created, err := s.Transition(r.Context(), orderID, eventType)
		var he *httpError
		switch {
		case errors.As(err, &he):
			writeError(w, he.status, he.msg)
		case err != nil:
			s.log.Errorf("%s %s: %v", eventType, orderID, err)
			writeError(w, http.StatusServiceUnavailable, "could not change the order: "+err.Error())
		default:
			writeJSON(w, http.StatusCreated, created)
		}
	}
}

type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// Transition moves an order to Paid or Cancelled and writes the event with
// the aggregate's next sequence in the same transaction.
func (s *Service) Transition(ctx context.Context, orderID, eventType string) (Created, error) {
	next := map[string]string{message.OrderPaid: "Paid", message.OrderCancelled: "Cancelled"}[eventType]
	eventID := s.newID()
	now := time.Now().UTC().Truncate(time.Microsecond) // what timestamptz keeps
	var ev message.Event
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var status, customer, amount, currency string
		var version int64
		err := tx.QueryRow(ctx,
			`SELECT status, version, customer_id, amount::text, currency FROM orders WHERE order_id = $1 FOR UPDATE`,
			orderID).Scan(&status, &version, &customer, &amount, &currency)
		if errors.Is(err, pgx.ErrNoRows) {
			return &httpError{http.StatusNotFound, fmt.Sprintf("order %q not found", orderID)}
		}
		if err != nil {
			return fmt.Errorf("read order: %w", err)
		}
		allowed := (next == "Paid" && status == "Created") || (next == "Cancelled" && status != "Cancelled")
		if !allowed {
			return &httpError{http.StatusConflict, fmt.Sprintf("order %s is %s: cannot become %s", orderID, status, next)}
		}
		version++
		if _, err := tx.Exec(ctx, `UPDATE orders SET status = $2, version = $3 WHERE order_id = $1`, orderID, next, version); err != nil {
			return fmt.Errorf("update order: %w", err)
		}
		ev = message.Event{
			EventID: eventID, EventType: eventType, OccurredAt: now.Format(time.RFC3339Nano),
			OrderID: orderID, CustomerID: customer, Amount: json.Number(amount), Currency: currency,
			AggregateID: orderID, Sequence: version,
		}
		return s.emit.inTx(ctx, tx, ev, now)
	})
	if err != nil {
		return Created{}, err
	}
	s.afterCommit(ev)
	if err := s.emit.committed(ctx, ev); err != nil {
		return Created{}, err
	}
	return Created{OrderID: orderID, EventID: eventID, Sequence: ev.Sequence}, nil
}

func insertOutbox(ctx context.Context, tx pgx.Tx, ev message.Event, now time.Time) error {
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	_, err = tx.Exec(ctx,
		`INSERT INTO outbox_messages (event_id, aggregate_id, sequence, event_type, payload, occurred_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		ev.EventID, ev.AggregateID, ev.Sequence, ev.EventType, payload, now)
	if err != nil {
		return fmt.Errorf("insert outbox row: %w", err)
	}
	return nil
}

// inTx runs fn in a transaction and commits; the order.before-commit crash
// point sits between the writes and the commit.
func (s *Service) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	if err := fn(tx); err != nil {
		return err
	}
	s.points.Hit(crashpoint.OrderBeforeCommit)
	return s.commit(ctx, tx)
}

// commitTx commits tx. A COMMIT that failed is an error whatever its cause:
// on a connection cut with the COMMIT in flight its outcome is unknown, and
// the order is not answered as created (the client tries again).
func commitTx(ctx context.Context, tx pgx.Tx) error {
	if err := tx.Commit(ctx); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			return fmt.Errorf("commit: %s", pgErr.Message)
		}
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (s *Service) afterCommit(ev message.Event) {
	s.log.Log(eventlog.Entry{Event: eventlog.Committed, EventID: ev.EventID, AggregateID: ev.AggregateID, Sequence: ev.Sequence, Detail: ev.EventType})
	s.points.Hit(crashpoint.OrderAfterCommit)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
