// Command relay is the outbox relay: Watermill's forwarder, reading the
// forwarder topic with watermill-sql's subscriber (offset-based: the
// consumer group's position is one row of the offsets table, locked FOR
// UPDATE while a batch is in flight, so instances of one group take turns)
// and publishing each unwrapped event with watermill-amqp's publisher to
// the events exchange, its destination topic as the routing key.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"

	"github.com/faultline-dev/faultline/examples/watermill-outbox/internal/pipeline"
)

func main() {
	instance := flag.String("instance", "relay", "this instance's name")
	dbURL := flag.String("db-url", "", "PostgreSQL URL of the orders database")
	amqpURL := flag.String("amqp-url", "", "AMQP URL of the broker")
	controlAddr := flag.String("control-addr", "127.0.0.1:8081", "address of /healthz")
	pollInterval := flag.Duration("poll-interval", 100*time.Millisecond, "the SQL subscriber's poll interval when the topic is drained")
	ackDeadline := flag.Duration("ack-deadline", 5*time.Second, "the SQL subscriber's ack deadline per message")
	reconnectMax := flag.Duration("reconnect-max", time.Second, "longest wait between AMQP reconnects")
	mandatory := flag.Bool("mandatory", false, "publish with the mandatory flag (watermill-amqp registers no basic.return listener: a returned message is still confirmed)")
	flag.Parse()
	if err := run(*instance, *dbURL, *amqpURL, *controlAddr, *pollInterval, *ackDeadline, *reconnectMax, *mandatory); err != nil {
		log.Fatalf("relay: %v", err)
	}
}

func run(instance, dbURL, amqpURL, controlAddr string, pollInterval, ackDeadline, reconnectMax time.Duration, mandatory bool) error {
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

	subscriber, err := watermillsql.NewSubscriber(watermillsql.BeginnerFromStdSQL(db), watermillsql.SubscriberConfig{
		ConsumerGroup:    pipeline.RelayConsumerGroup,
		SchemaAdapter:    pipeline.SQLSchema(),
		OffsetsAdapter:   pipeline.SQLOffsets(),
		InitializeSchema: true,
		PollInterval:     pollInterval,
		ResendInterval:   pollInterval,
		RetryInterval:    pollInterval,
		AckDeadline:      &ackDeadline,
	}, logger)
	if err != nil {
		return fmt.Errorf("sql subscriber: %w", err)
	}
	amqpConfig := pipeline.AMQPConfig(amqpURL, reconnectMax)
	amqpConfig.Publish.Mandatory = mandatory
	publisher, err := pipeline.Connect(ctx, "amqp publisher", reconnectMax, func() (*amqp.Publisher, error) { return amqp.NewPublisher(amqpConfig, logger) })
	if err != nil {
		return fmt.Errorf("amqp publisher: %w", err)
	}
	fwd, err := forwarder.NewForwarder(subscriber, publisher, logger, forwarder.Config{
		ForwarderTopic: pipeline.OutboxTopic,
		CloseTimeout:   2 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	ready := func(ctx context.Context) error {
		select {
		case <-fwd.Running():
		default:
			return errors.New("forwarder not running yet")
		}
		if !publisher.IsConnected() {
			return errors.New("not connected to the broker")
		}
		return db.PingContext(ctx)
	}
	if err := pipeline.ServeHealth(ctx, controlAddr, nil, ready); err != nil {
		return err
	}
	log.Printf("relay %s: forwarding %s to exchange %s", instance, pipeline.OutboxTopic, pipeline.Exchange)
	runErr := fwd.Run(ctx)
	_ = fwd.Close()
	_ = publisher.Close()
	if runErr != nil && ctx.Err() == nil {
		return fmt.Errorf("forwarder: %w", runErr)
	}
	return nil
}
