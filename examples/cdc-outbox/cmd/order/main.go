// Command order is the order service: POST /orders writes an order and its
// order.created event into the outbox in one transaction; POST
// /orders/{id}/pay and /cancel do the same for the later events. It never
// talks to the broker: the relay streams the outbox's inserts from the
// write-ahead log.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/examples/cdc-outbox/internal/pipeline"
)

func main() {
	instance := flag.String("instance", "order", "this instance's name")
	dbURL := flag.String("db-url", "", "PostgreSQL URL of the orders database")
	listen := flag.String("listen", "127.0.0.1:8080", "address of the order API and /healthz")
	flag.Parse()
	if err := run(*instance, *dbURL, *listen); err != nil {
		log.Fatalf("order: %v", err)
	}
}

func run(instance, dbURL, listen string) error {
	ctx, stop := pipeline.SignalContext()
	defer stop()
	if dbURL == "" {
		return errors.New("--db-url is required")
	}
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer db.Close()
	s := &service{db: db}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", s.create)
	mux.HandleFunc("POST /orders/{id}/pay", s.step("paid", "order.paid", "created"))
	mux.HandleFunc("POST /orders/{id}/cancel", s.step("cancelled", "order.cancelled", "created", "paid"))
	if err := pipeline.ServeHealth(ctx, listen, mux, db.Ping); err != nil {
		return err
	}
	log.Printf("order %s: listening on %s", instance, listen)
	<-ctx.Done()
	return nil
}

type service struct{ db *pgxpool.Pool }

type createRequest struct {
	CustomerID string          `json:"customerId"`
	Amount     json.Number     `json:"amount"`
	Currency   string          `json:"currency"`
	Items      json.RawMessage `json:"items"`
}

func (s *service) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
		http.Error(w, fmt.Sprintf("bad request: %v", err), http.StatusBadRequest)
		return
	}
	if req.CustomerID == "" || req.Currency == "" || req.Amount == "" {
		http.Error(w, "customerId, amount and currency are required", http.StatusBadRequest)
		return
	}
	orderID := "ORD-" + newUUID()
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx,
			`INSERT INTO orders (order_id, customer_id, amount, currency, items, status, version) VALUES ($1, $2, $3, $4, $5, 'created', 1)`,
			orderID, req.CustomerID, string(req.Amount), req.Currency, orNull(req.Items)); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		return addEvent(ctx, tx, "order.created", orderID, 1, req)
	})
	if err != nil {
		log.Printf("create order: %v", err)
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"orderId": orderID})
}

// step moves an order from one of the statuses from to status to, with its
// event; 409 when the order is not in one of them (a retried step that had
// already committed, or an order already cancelled).
func (s *service) step(to, eventType string, from ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		orderID := r.PathValue("id")
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		conflict := false
		err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
			var version int
			err := tx.QueryRow(ctx,
				`UPDATE orders SET status = $2, version = version + 1, updated_at = now() WHERE order_id = $1 AND status = ANY($3) RETURNING version`,
				orderID, to, from).Scan(&version)
			if errors.Is(err, pgx.ErrNoRows) {
				conflict = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("update order: %w", err)
			}
			return addEvent(ctx, tx, eventType, orderID, version, map[string]string{"status": to})
		})
		switch {
		case err != nil:
			log.Printf("order %s to %s: %v", orderID, to, err)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		case conflict:
			http.Error(w, "order not found or not in a status that allows this step", http.StatusConflict)
		default:
			writeJSON(w, http.StatusCreated, map[string]string{"orderId": orderID, "status": to})
		}
	}
}

// addEvent writes the event's outbox row in the order's transaction.
func addEvent(ctx context.Context, tx pgx.Tx, eventType, orderID string, sequence int, order any) error {
	e := pipeline.Event{EventID: newUUID(), EventType: eventType, OrderID: orderID, Sequence: sequence, OccurredAt: time.Now().UTC(), Order: order}
	body, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("marshal event: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO outbox (event_id, aggregate_id, sequence, event_type, payload) VALUES ($1, $2, $3, $4, $5)`,
		e.EventID, orderID, sequence, eventType, body); err != nil {
		return fmt.Errorf("insert outbox row: %w", err)
	}
	return nil
}

// newUUID is a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func orNull(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("null")
	}
	return raw
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
