// Package pipeline holds what the three programs of the example share: the
// event's body, the broker topology, and the small process plumbing
// (signals, health, reconnect backoff).
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The broker topology of the target file: a durable topic exchange routed
// by event type, the consumer's quorum queue, and a dead-letter queue
// behind a fanout exchange for messages the consumer rejects.
const (
	Exchange           = "orders.events"
	Queue              = "inventory.order-events"
	DeadLetterExchange = "inventory.dead-letter"
	DeadLetterQueue    = "inventory.order-events.dead"
)

// RoutingKeys are the event types.
var RoutingKeys = []string{"order.created", "order.paid", "order.cancelled"}

// Event is the body of every order event, as the order service writes it
// into the outbox's payload column and the relay publishes it.
type Event struct {
	EventID    string    `json:"eventId"`
	EventType  string    `json:"eventType"`
	OrderID    string    `json:"orderId"`
	Sequence   int       `json:"sequence"`
	OccurredAt time.Time `json:"occurredAt"`
	Order      any       `json:"order,omitempty"`
}

// DeclareTopology declares the exchange, the queues and their bindings;
// every declaration is idempotent, so each program declares them at start.
func DeclareTopology(ch *amqp.Channel) error {
	if err := ch.ExchangeDeclare(Exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", Exchange, err)
	}
	if err := ch.ExchangeDeclare(DeadLetterExchange, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", DeadLetterExchange, err)
	}
	if _, err := ch.QueueDeclare(DeadLetterQueue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		return fmt.Errorf("declare queue %s: %w", DeadLetterQueue, err)
	}
	if err := ch.QueueBind(DeadLetterQueue, "", DeadLetterExchange, false, nil); err != nil {
		return fmt.Errorf("bind %s: %w", DeadLetterQueue, err)
	}
	if _, err := ch.QueueDeclare(Queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": DeadLetterExchange}); err != nil {
		return fmt.Errorf("declare queue %s: %w", Queue, err)
	}
	for _, key := range RoutingKeys {
		if err := ch.QueueBind(Queue, key, Exchange, false, nil); err != nil {
			return fmt.Errorf("bind %s to %s: %w", Queue, key, err)
		}
	}
	return nil
}

// SignalContext is cancelled on SIGTERM or SIGINT.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
}

// ServeHealth serves mux (with GET /healthz answering 200 while ready
// says so) on addr until ctx ends.
func ServeHealth(ctx context.Context, addr string, mux *http.ServeMux, ready func(context.Context) error) error {
	if mux == nil {
		mux = http.NewServeMux()
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r.Context()); err != nil {
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
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("http: %v", err)
		}
	}()
	return nil
}

// Backoff doubles from 100 ms up to max: the waits between reconnections.
type Backoff struct {
	Max  time.Duration
	next time.Duration
}

// Wait sleeps the next wait, or until ctx ends.
func (b *Backoff) Wait(ctx context.Context) error {
	b.next = min(max(2*b.next, 100*time.Millisecond), b.Max)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.next):
		return nil
	}
}

// Reset starts the waits over after a session that worked.
func (b *Backoff) Reset() { b.next = 0 }
