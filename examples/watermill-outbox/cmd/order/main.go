// Command order is the order service: POST /orders writes an order and
// publishes its order.created event through Watermill's SQL publisher in
// the same transaction (the library's transactional outbox: the SQL
// publisher bound to the transaction, wrapped by the forwarder's publisher,
// which envelopes the event for the forwarder topic); POST
// /orders/{id}/pay and /cancel do the same for the later events.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/faultline-dev/faultline/examples/watermill-outbox/internal/pipeline"
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
	db, err := pipeline.Connect(ctx, "database", time.Second, func() (*sql.DB, error) { return pipeline.OpenDB(ctx, dbURL) })
	if err != nil {
		return err
	}
	defer db.Close()
	s := &service{db: db, logger: pipeline.Logger(instance)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", s.create)
	mux.HandleFunc("POST /orders/{id}/pay", s.step("paid", "order.paid", "created"))
	mux.HandleFunc("POST /orders/{id}/cancel", s.step("cancelled", "order.cancelled", "created", "paid"))
	if err := pipeline.ServeHealth(ctx, listen, mux, db.PingContext); err != nil {
		return err
	}
	log.Printf("order %s: listening on %s", instance, listen)
	<-ctx.Done()
	return nil
}

type service struct {
	db     *sql.DB
	logger watermill.LoggerAdapter
}

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
	orderID := "ORD-" + watermill.NewULID()
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO orders (order_id, customer_id, amount, currency, items, status, version) VALUES ($1, $2, $3, $4, $5, 'created', 1)`,
			orderID, req.CustomerID, string(req.Amount), req.Currency, string(orNull(req.Items))); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		return s.publish(ctx, tx, "order.created", orderID, 1, req)
	})
	if err != nil {
		s.logger.Error("create order", err, nil)
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"orderId": orderID})
}

// step moves an order from one of the statuses from to status to, with
// its event; 409 when the order is not in one of them (a retried step
// that had already committed, or an order already cancelled).
func (s *service) step(to, eventType string, from ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		orderID := r.PathValue("id")
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		conflict := false
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			var version int
			err := tx.QueryRowContext(ctx,
				`UPDATE orders SET status = $2, version = version + 1, updated_at = now() WHERE order_id = $1 AND status = ANY($3) RETURNING version`,
				orderID, to, from).Scan(&version)
			if errors.Is(err, sql.ErrNoRows) {
				conflict = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("update order: %w", err)
			}
			return s.publish(ctx, tx, eventType, orderID, version, map[string]string{"status": to})
		})
		switch {
		case err != nil:
			s.logger.Error("order step", err, watermill.LogFields{"order_id": orderID, "to": to})
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		case conflict:
			http.Error(w, "order not found or not in a status that allows this step", http.StatusConflict)
		default:
			writeJSON(w, http.StatusCreated, map[string]string{"orderId": orderID, "status": to})
		}
	}
}

// publish publishes one event through the SQL publisher bound to tx,
// wrapped by the forwarder's publisher: the enveloped message is a row of
// the forwarder topic's table, committed or rolled back with the order.
func (s *service) publish(ctx context.Context, tx *sql.Tx, eventType, orderID string, sequence int, order any) error {
	sqlPublisher, err := watermillsql.NewPublisher(watermillsql.TxFromStdSQL(tx), watermillsql.PublisherConfig{
		SchemaAdapter: pipeline.SQLSchema(),
	}, s.logger)
	if err != nil {
		return fmt.Errorf("sql publisher: %w", err)
	}
	publisher := forwarder.NewPublisher(sqlPublisher, forwarder.PublisherConfig{ForwarderTopic: pipeline.OutboxTopic})
	eventID := watermill.NewUUID()
	body, err := json.Marshal(pipeline.Event{
		EventID: eventID, EventType: eventType, OrderID: orderID, Sequence: sequence,
		OccurredAt: time.Now().UTC(), Order: order,
	})
	if err != nil {
		return fmt.Errorf("marshal event: %w", err)
	}
	msg := message.NewMessage(eventID, body)
	msg.Metadata.Set(pipeline.MetaAggregateID, orderID)
	msg.Metadata.Set(pipeline.MetaSequence, strconv.Itoa(sequence))
	msg.SetContext(ctx)
	if err := publisher.Publish(eventType, msg); err != nil {
		return fmt.Errorf("publish %s: %w", eventType, err)
	}
	return nil
}

func (s *service) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
