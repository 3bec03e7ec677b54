// Command inventory is the consumer: for each delivery it writes the inbox
// row and, only if the event is new, its effect (a stock reservation) in
// one transaction, and acks after the commit. A message that is not an
// event is rejected without requeue: it is dead-lettered. It consumes
// through one broker node of --amqp-urls at a time and, when it loses that
// node, reconnects to the next.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/examples/cdc-outbox/internal/pipeline"
)

func main() {
	instance := flag.String("instance", "inventory", "this instance's name")
	dbURL := flag.String("db-url", "", "PostgreSQL URL of the inventory database")
	amqpURLs := flag.String("amqp-urls", "", "RabbitMQ URLs of the cluster's nodes, comma-separated, the preferred first: the consumer connects to the first that answers and, when its connection is lost, to the next")
	amqpURL := flag.String("amqp-url", "", "one RabbitMQ URL (a one-node --amqp-urls)")
	heartbeat := flag.Duration("amqp-heartbeat", 10*time.Second, "AMQP heartbeat: a node that sends nothing for 1.5 heartbeats is left for the next")
	control := flag.String("control-addr", "127.0.0.1:0", "address of /healthz")
	prefetch := flag.Int("prefetch", 32, "unacked deliveries at most")
	reconnectMax := flag.Duration("reconnect-max", 5*time.Second, "longest wait between reconnections")
	flag.Parse()
	if *dbURL == "" {
		log.Fatal("inventory: --db-url is required")
	}
	urls, err := pipeline.BrokerURLs(*amqpURLs, *amqpURL)
	if err != nil {
		log.Fatalf("inventory: %v", err)
	}
	nodes := pipeline.NewNodes(urls)
	ctx, stop := pipeline.SignalContext()
	defer stop()
	db, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		log.Fatalf("inventory: database: %v", err)
	}
	defer db.Close()
	var consuming atomic.Bool
	if err := pipeline.ServeHealth(ctx, *control, nil, func(context.Context) error {
		if !consuming.Load() {
			return errors.New("not consuming")
		}
		return nil
	}); err != nil {
		log.Fatalf("inventory: %v", err)
	}
	log.Printf("inventory %s: started, broker nodes: %d", *instance, nodes.Len())
	backoff := pipeline.Backoff{Max: *reconnectMax}
	for ctx.Err() == nil {
		err := consume(ctx, db, nodes, pipeline.DialConfig(*heartbeat), *prefetch, &consuming)
		if consuming.Swap(false) {
			backoff.Reset() // that session worked: start the waits over
		}
		if ctx.Err() != nil {
			break
		}
		log.Printf("inventory %s: %v; reconnecting", *instance, err)
		if backoff.Wait(ctx) != nil {
			break
		}
	}
}

// consume runs one broker session, on the next node that answers, until
// it fails. A delivery whose transaction fails ends the session unacked:
// the broker redelivers it. So does a lost node: the queue hands what was
// unacked on the lost connection to the next consumer, whichever node it
// is connected to, and the inbox absorbs what had already committed.
func consume(ctx context.Context, db *pgxpool.Pool, nodes *pipeline.Nodes, config amqp.Config, prefetch int, consuming *atomic.Bool) error {
	conn, node, err := nodes.Dial(ctx, config)
	if err != nil {
		return fmt.Errorf("dial broker: %w", err)
	}
	defer conn.Close()
	log.Printf("connected to broker node %d/%d", node+1, nodes.Len())
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	if err := pipeline.DeclareTopology(ch); err != nil {
		return err
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return fmt.Errorf("qos: %w", err)
	}
	deliveries, err := ch.ConsumeWithContext(ctx, pipeline.Queue, "", false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	consuming.Store(true)
	for d := range deliveries {
		var e pipeline.Event
		if err := json.Unmarshal(d.Body, &e); err != nil || !validUUID(e.EventID) || e.OrderID == "" || e.EventType == "" {
			log.Printf("reject malformed message %q: not an event", d.MessageId)
			if err := d.Nack(false, false); err != nil {
				return fmt.Errorf("reject: %w", err)
			}
			continue
		}
		if err := apply(ctx, db, e); err != nil {
			return fmt.Errorf("apply %s: %w", e.EventID, err)
		}
		if err := d.Ack(false); err != nil {
			return fmt.Errorf("ack %s: %w", e.EventID, err)
		}
	}
	return errors.New("delivery channel closed")
}

// apply writes the inbox row and, for an event not seen before, its
// effect, in one transaction.
func apply(ctx context.Context, db *pgxpool.Pool, e pipeline.Event) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO inbox (event_id, event_type) VALUES ($1, $2) ON CONFLICT (event_id) DO NOTHING`, e.EventID, e.EventType)
		if err != nil {
			return fmt.Errorf("inbox: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil // applied before: a duplicate
		}
		if _, err := tx.Exec(ctx, `INSERT INTO stock_reservations (event_id, order_id, sequence, event_type) VALUES ($1, $2, $3, $4)`,
			e.EventID, e.OrderID, e.Sequence, e.EventType); err != nil {
			return fmt.Errorf("reservation: %w", err)
		}
		return nil
	})
}

// validUUID reports whether s is a UUID in its text form: an event id the
// inbox can hold.
func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}
