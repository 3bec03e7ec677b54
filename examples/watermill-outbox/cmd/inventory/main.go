// Command inventory is the inventory consumer: watermill-amqp's subscriber
// (one subscription per routing key on the inventory queue) and a Watermill
// router whose handler records the event in the inbox and reserves stock in
// one transaction, idempotent by the message UUID. The router acks the
// delivery when the handler returns nil and nacks (requeue) when it returns
// an error; a malformed message goes to the dead-letter queue through the
// poison-queue middleware.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/faultline-dev/faultline/examples/watermill-outbox/internal/pipeline"
)

// errMalformed marks a message no retry can process: the poison-queue
// middleware moves it to the dead-letter queue and the router acks it.
var errMalformed = errors.New("malformed event")

func main() {
	instance := flag.String("instance", "inventory", "this instance's name")
	dbURL := flag.String("db-url", "", "PostgreSQL URL of the inventory database")
	amqpURL := flag.String("amqp-url", "", "AMQP URL of the broker")
	controlAddr := flag.String("control-addr", "127.0.0.1:8082", "address of /healthz")
	reconnectMax := flag.Duration("reconnect-max", time.Second, "longest wait between AMQP reconnects")
	flag.Parse()
	if err := run(*instance, *dbURL, *amqpURL, *controlAddr, *reconnectMax); err != nil {
		log.Fatalf("inventory: %v", err)
	}
}

func run(instance, dbURL, amqpURL, controlAddr string, reconnectMax time.Duration) error {
	ctx, stop := pipeline.SignalContext()
	defer stop()
	if dbURL == "" || amqpURL == "" {
		return errors.New("--db-url and --amqp-url are required")
	}
	logger := pipeline.Logger(instance)
	db, err := pipeline.Connect(ctx, "database", reconnectMax, func() (*sql.DB, error) { return pipeline.OpenDB(ctx, dbURL) })
	if err != nil {
		return err
	}
	defer db.Close()

	subscriber, err := pipeline.Connect(ctx, "amqp subscriber", reconnectMax, func() (*amqp.Subscriber, error) {
		return amqp.NewSubscriber(pipeline.AMQPConfig(amqpURL, reconnectMax), logger)
	})
	if err != nil {
		return fmt.Errorf("amqp subscriber: %w", err)
	}
	// The dead-letter queue: declared here (the library's queue topology),
	// published to through the default exchange.
	dlqSubscriber, err := pipeline.Connect(ctx, "amqp dead-letter subscriber", reconnectMax, func() (*amqp.Subscriber, error) {
		return amqp.NewSubscriber(pipeline.DeadLetterConfig(amqpURL, reconnectMax), logger)
	})
	if err != nil {
		return fmt.Errorf("amqp dead-letter subscriber: %w", err)
	}
	defer dlqSubscriber.Close()
	if _, err := pipeline.Connect(ctx, "declare "+pipeline.DeadLetterQueue, reconnectMax, func() (struct{}, error) {
		return struct{}{}, dlqSubscriber.SubscribeInitialize(pipeline.DeadLetterQueue)
	}); err != nil {
		return err
	}
	dlqPublisher, err := pipeline.Connect(ctx, "amqp dead-letter publisher", reconnectMax, func() (*amqp.Publisher, error) {
		return amqp.NewPublisher(pipeline.DeadLetterConfig(amqpURL, reconnectMax), logger)
	})
	if err != nil {
		return fmt.Errorf("amqp dead-letter publisher: %w", err)
	}
	defer dlqPublisher.Close()

	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 2 * time.Second}, logger)
	if err != nil {
		return fmt.Errorf("router: %w", err)
	}
	poison, err := middleware.PoisonQueueWithFilter(dlqPublisher, pipeline.DeadLetterQueue, func(err error) bool {
		return errors.Is(err, errMalformed)
	})
	if err != nil {
		return fmt.Errorf("poison queue middleware: %w", err)
	}
	// Outermost first: a malformed message is not retried and goes to the
	// dead-letter queue; any other error is retried in process, then
	// nacked (requeued).
	router.AddMiddleware(
		poison,
		middleware.Retry{
			MaxRetries: 3, InitialInterval: 100 * time.Millisecond, Multiplier: 2, Logger: logger,
			ShouldRetry: func(p middleware.RetryParams) bool { return !errors.Is(p.Err, errMalformed) },
		}.Middleware,
		middleware.Recoverer,
	)
	h := handler{db: db, logger: logger}
	for _, key := range pipeline.RoutingKeys {
		router.AddConsumerHandler("inventory-"+key, key, subscriber, h.handle)
	}
	ready := func(ctx context.Context) error {
		if !router.IsRunning() {
			return errors.New("router not running yet")
		}
		if !subscriber.IsConnected() {
			return errors.New("not connected to the broker")
		}
		return db.PingContext(ctx)
	}
	if err := pipeline.ServeHealth(ctx, controlAddr, nil, ready); err != nil {
		return err
	}
	log.Printf("inventory %s: consuming %s", instance, pipeline.Queue)
	runErr := router.Run(ctx)
	_ = router.Close()
	_ = subscriber.Close()
	if runErr != nil && ctx.Err() == nil {
		return fmt.Errorf("router: %w", runErr)
	}
	return nil
}

type handler struct {
	db     *sql.DB
	logger watermill.LoggerAdapter
}

// handle applies one event: its inbox row and its reservation commit
// together, or neither; an event whose inbox row exists is a duplicate and
// changes nothing. Returning nil lets the router ack the delivery.
func (h handler) handle(msg *message.Message) error {
	var ev pipeline.Event
	if err := json.Unmarshal(msg.Payload, &ev); err != nil {
		return fmt.Errorf("%w: body: %v", errMalformed, err)
	}
	if msg.UUID == "" || ev.OrderID == "" || ev.Sequence < 1 || !slices.Contains(pipeline.RoutingKeys, ev.EventType) {
		return fmt.Errorf("%w: uuid %q, order %q, sequence %d, type %q", errMalformed, msg.UUID, ev.OrderID, ev.Sequence, ev.EventType)
	}
	ctx, cancel := context.WithTimeout(msg.Context(), 10*time.Second)
	defer cancel()
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `INSERT INTO inbox (event_id, event_type) VALUES ($1, $2) ON CONFLICT (event_id) DO NOTHING`, msg.UUID, ev.EventType)
	if err != nil {
		return fmt.Errorf("inbox: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("inbox: %w", err)
	} else if n == 0 {
		return nil // a duplicate: already applied
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO stock_reservations (event_id, order_id, sequence, event_type) VALUES ($1, $2, $3, $4)`,
		msg.UUID, ev.OrderID, ev.Sequence, ev.EventType); err != nil {
		return fmt.Errorf("reservation: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
