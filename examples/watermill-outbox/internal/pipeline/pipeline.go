// Package pipeline holds what the three programs of the example share: the
// names of the Watermill topics and tables, the event's body, the broker
// configuration, and the small process plumbing (flags, health, signals).
package pipeline

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

const (
	// OutboxTopic is the Watermill SQL topic the order service publishes
	// its enveloped events to and the forwarder reads: the library's
	// PostgreSQL schema keeps it in table watermill_orders_outbox, and its
	// offsets adapter the consumer group's position in
	// watermill_offsets_orders_outbox.
	OutboxTopic = "orders_outbox"
	// RelayConsumerGroup is the forwarders' consumer group: every relay
	// instance reads the topic under this one offsets row.
	RelayConsumerGroup = "relay"

	// Exchange, Queue and DeadLetterQueue are the broker topology of the
	// target file.
	Exchange        = "orders.events"
	Queue           = "inventory.order-events"
	DeadLetterQueue = "inventory.order-events.dead"
)

// RoutingKeys are the event types; each is a Watermill topic on the broker
// side (the destination topic of the forwarder's envelope), routed by the
// topic exchange with the same routing key.
var RoutingKeys = []string{"order.created", "order.paid", "order.cancelled"}

// Metadata keys of an event's Watermill message.
const (
	MetaAggregateID = "aggregate_id"
	MetaSequence    = "sequence"
)

// Event is the body of every order event; EventID repeats the Watermill
// message UUID so that the body alone names the event.
type Event struct {
	EventID    string    `json:"eventId"`
	EventType  string    `json:"eventType"`
	OrderID    string    `json:"orderId"`
	Sequence   int       `json:"sequence"`
	OccurredAt time.Time `json:"occurredAt"`
	Order      any       `json:"order,omitempty"`
}

// SQLSchema is the library's default PostgreSQL schema adapter; the
// subscriber reads batches of 50 rows.
func SQLSchema() watermillsql.DefaultPostgreSQLSchema {
	return watermillsql.DefaultPostgreSQLSchema{SubscribeBatchSize: 50}
}

// SQLOffsets is the library's default PostgreSQL offsets adapter.
func SQLOffsets() watermillsql.DefaultPostgreSQLOffsetsAdapter {
	return watermillsql.DefaultPostgreSQLOffsetsAdapter{}
}

// AMQPConfig is the library's durable topic configuration for the events
// exchange and the inventory queue (NewDurableTopicConfig: persistent
// messages, durable queue, routing key = topic), with a durable exchange,
// publisher confirms (ConfirmDelivery, which the library's docs say
// increases reliability) and a reconnect backoff capped at reconnectMax.
func AMQPConfig(url string, reconnectMax time.Duration) amqp.Config {
	c := amqp.NewDurableTopicConfig(url, Exchange, Queue)
	c.Exchange.Durable = true
	c.Publish.ConfirmDelivery = true
	c.Connection.Reconnect = &amqp.ReconnectConfig{
		BackoffInitialInterval:     100 * time.Millisecond,
		BackoffRandomizationFactor: 0.5,
		BackoffMultiplier:          1.5,
		BackoffMaxInterval:         reconnectMax,
	}
	return c
}

// DeadLetterConfig is the library's durable queue configuration (default
// exchange, routing key = queue name) for the dead-letter queue.
func DeadLetterConfig(url string, reconnectMax time.Duration) amqp.Config {
	c := amqp.NewDurableQueueConfig(url)
	c.Publish.ConfirmDelivery = true
	c.Connection.Reconnect = AMQPConfig(url, reconnectMax).Connection.Reconnect
	return c
}

// OpenDB opens a database/sql pool through pgx and checks it reaches the
// database.
func OpenDB(ctx context.Context, url string) (*sql.DB, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db.SetMaxOpenConns(10)
	db.SetConnMaxIdleTime(30 * time.Second)
	if _, err := db.ExecContext(ctx, "SELECT 1"); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("reach database: %w", err)
	}
	return db, nil
}

// Logger is Watermill's standard logger on stderr, prefixed with the
// instance.
func Logger(instance string) watermill.LoggerAdapter {
	return watermill.NewStdLoggerWithOut(os.Stderr, false, false).With(watermill.LogFields{"instance": instance})
}

// SignalContext is ended by SIGTERM or SIGINT.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}

// ServeHealth serves GET /healthz on addr (200 when ready says so) until
// ctx ends; mux, if given, serves everything else.
func ServeHealth(ctx context.Context, addr string, mux *http.ServeMux, ready func(context.Context) error) error {
	if mux == nil {
		mux = http.NewServeMux()
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		cctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := ready(cctx); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("http server: %v", err)
		}
	}()
	return nil
}

// Connect calls connect until it succeeds or ctx ends, waiting from 100 ms
// up to max between attempts: the library's constructors (a database
// ping, amqp.NewPublisher, amqp.NewSubscriber) give up at the first failed
// dial, and a process started while its broker or database is out of
// reach must wait for it rather than exit.
func Connect[T any](ctx context.Context, what string, max time.Duration, connect func() (T, error)) (T, error) {
	wait := 100 * time.Millisecond
	for {
		v, err := connect()
		if err == nil {
			return v, nil
		}
		log.Printf("%s: %v (trying again in %s)", what, err, wait)
		select {
		case <-ctx.Done():
			var zero T
			return zero, fmt.Errorf("%s: %w (gave up: %v)", what, err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, max)
	}
}
