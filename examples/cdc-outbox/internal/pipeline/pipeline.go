// Package pipeline holds what the three programs of the example share: the
// event's body, the broker topology, the broker's nodes, and the small
// process plumbing (signals, health, reconnect backoff).
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
	"strings"
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

// BrokerURLs is the broker's node list of a program's flags: urls
// (--amqp-urls: a cluster's nodes, comma-separated, the preferred first)
// when given, else the one url (--amqp-url). Every address must be an AMQP
// URL; an error names an address by its position only, as the URLs carry
// the password.
func BrokerURLs(urls, url string) ([]string, error) {
	if strings.TrimSpace(urls) == "" {
		if url == "" {
			return nil, errors.New("no broker address: give --amqp-urls")
		}
		urls = url
	}
	var out []string
	for i, u := range strings.Split(urls, ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			return nil, fmt.Errorf("broker address %d is empty", i+1)
		}
		if _, err := amqp.ParseURI(u); err != nil {
			return nil, fmt.Errorf("broker address %d is not an AMQP URL: %w", i+1, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// Nodes are a cluster's broker addresses, dialled in turn: the first
// connection goes to the first node that answers, from the first; every
// later one starts at the node after the one last connected, so a node
// killed, cut off or frozen is left for the others, and a full round comes
// back to it. Not safe for concurrent use: each connection loop owns its
// own.
type Nodes struct {
	urls []string
	next int // where the next Dial starts
}

// NewNodes is the node list urls (at least one).
func NewNodes(urls []string) *Nodes {
	return &Nodes{urls: append([]string(nil), urls...)}
}

// Len is the number of nodes.
func (n *Nodes) Len() int { return len(n.urls) }

// Dial connects to the nodes in turn with config, from where the last Dial
// left off, until one answers; it returns the connection and the node's
// position in the list (0 for the first). A node that does not answer is
// logged as the next is tried, by its position (the URLs carry the
// password). After a full round without an answer it returns every node's
// error, and the next Dial starts the round over where this one began.
func (n *Nodes) Dial(ctx context.Context, config amqp.Config) (*amqp.Connection, int, error) {
	var errs []error
	for try := range len(n.urls) {
		i := n.next
		n.next = (i + 1) % len(n.urls)
		conn, err := amqp.DialConfig(n.urls[i], config)
		if err == nil {
			return conn, i, nil
		}
		err = fmt.Errorf("broker node %d/%d: %w", i+1, len(n.urls), err)
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
		if try < len(n.urls)-1 {
			log.Printf("%v; trying node %d/%d", err, n.next+1, len(n.urls))
		}
	}
	return nil, -1, errors.Join(errs...)
}

// DialConfig is the configuration both programs dial the broker with:
// heartbeats every heartbeat (a frozen node answers nothing and closes
// nothing: the client gives the connection up after 1.5 heartbeats without
// a frame), and a connect and handshake bounded by 5 s (a handshake into
// a link that drops everything, or a node that is paused, would otherwise
// wait for 30 s).
func DialConfig(heartbeat time.Duration) amqp.Config {
	return amqp.Config{Heartbeat: heartbeat, Dial: amqp.DefaultDial(5 * time.Second)}
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
