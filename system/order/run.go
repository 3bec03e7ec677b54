package order

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/protocol/control"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/dbutil"
	"github.com/faultline-dev/faultline/system/schema"
	"github.com/faultline-dev/faultline/system/service"
	"github.com/faultline-dev/faultline/system/variant"
)

// Config is the order service's configuration.
type Config struct {
	DBURL    string
	Listen   string
	Instance string
	EventLog string
	AMQPURL  string // only for the variants without an outbox, which publish themselves
	Variant  string // a deliberately broken variant (package variant); empty: correct
}

// Flags defines the configuration's flags on fs.
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.DBURL, "db-url", "postgres://postgres@127.0.0.1:5432/orders?sslmode=disable", "PostgreSQL URL of the orders database")
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "loopback address of the HTTP API (port 0 picks one; the bound address is logged as `control`)")
	fs.StringVar(&c.Instance, "instance", "order", "instance name in the event log")
	fs.StringVar(&c.EventLog, "event-log", "", "path of the JSON-lines event log (empty: stderr)")
	fs.StringVar(&c.AMQPURL, "amqp-url", "", "RabbitMQ URL; used (and required) only by the variants without an outbox: "+variant.CommitThenPublish+", "+variant.PublishThenCommit)
	variant.Register(fs, &c.Variant)
}

// Validate checks values flags cannot.
func (c *Config) Validate() error {
	if c.DBURL == "" {
		return errors.New("--db-url is required")
	}
	if c.Instance == "" {
		return errors.New("--instance must not be empty")
	}
	v, err := variant.Lookup(c.Variant)
	if err != nil {
		return fmt.Errorf("--variant: %w", err)
	}
	if c.AMQPURL != "" {
		if _, err := amqp.ParseURI(c.AMQPURL); err != nil {
			return fmt.Errorf("--amqp-url: not an AMQP URL: %v", err)
		}
	} else if v.Breaks(variant.Order) {
		return fmt.Errorf("--amqp-url is required with --variant %s: it publishes without an outbox", v.Name)
	}
	return control.RequireLoopback(c.Listen)
}

// Run serves the API until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	base, err := service.Open(ctx, "order", cfg.Instance, cfg.EventLog, cfg.DBURL, 8)
	if err != nil {
		return err
	}
	defer base.Close()
	log, points, db := base.Log, base.Points, base.DB
	if err := dbutil.Retry(ctx, 2*time.Second, func(ctx context.Context) error { return schema.ApplyOrders(ctx, db) },
		func(err error) { log.Errorf("schema: %v (retrying)", err) }); err != nil {
		return err
	}
	svc := New(db, log, points)
	defer svc.useVariant(cfg.Variant, cfg.AMQPURL, log)()
	v, _ := variant.Lookup(cfg.Variant) // checked by Validate
	mux := http.NewServeMux()
	control.Mount(mux, points, db.Ping)
	svc.Register(mux)

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Log(eventlog.Entry{Event: eventlog.Started, Detail: "order service " + v.Detail(variant.Order)})
	log.Log(eventlog.Entry{Event: eventlog.Control, Detail: ln.Addr().String()})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}
