package order

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/faultline-dev/faultline/protocol/control"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/broker"
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
	// AMQPURLs are a cluster's nodes, comma-separated, preferred first
	// (replaces AMQPURL when set); Heartbeat is the AMQP heartbeat. Both
	// only for the variants without an outbox; Heartbeat 0 is
	// broker.Heartbeat.
	AMQPURLs  string
	Heartbeat time.Duration
	Variant   string // a deliberately broken variant (package variant); empty: correct
}

// Flags defines the configuration's flags on fs.
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.DBURL, "db-url", "postgres://postgres@127.0.0.1:5432/orders?sslmode=disable", "PostgreSQL URL of the orders database")
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "loopback address of the HTTP API (port 0 picks one; the bound address is logged as `control`)")
	fs.StringVar(&c.Instance, "instance", "order", "instance name in the event log")
	fs.StringVar(&c.EventLog, "event-log", "", "path of the JSON-lines event log (empty: stderr)")
	fs.StringVar(&c.AMQPURL, "amqp-url", "", "RabbitMQ URL; used (and required) only by the variants without an outbox: "+variant.CommitThenPublish+", "+variant.PublishThenCommit)
	fs.StringVar(&c.AMQPURLs, "amqp-urls", "", "RabbitMQ URLs of a cluster's nodes, comma-separated, the preferred first; replaces --amqp-url (used only as --amqp-url is): the service connects to the first that answers and, when its connection is lost, to the next")
	fs.DurationVar(&c.Heartbeat, "amqp-heartbeat", broker.Heartbeat, "AMQP heartbeat: a connection that reads nothing for three of them is lost (a frozen node)")
	variant.Register(fs, &c.Variant)
}

// nodes is the broker addresses in order: --amqp-urls, else --amqp-url;
// none when neither is given.
func (c *Config) nodes() ([]string, error) {
	if c.AMQPURLs == "" && c.AMQPURL == "" {
		return nil, nil
	}
	return broker.URLs(c.AMQPURLs, c.AMQPURL)
}

// Validate checks values flags cannot.
func (c *Config) Validate() error {
	if c.DBURL == "" {
		return errors.New("--db-url is required")
	}
	if c.Instance == "" {
		return errors.New("--instance must not be empty")
	}
	set, err := variant.Parse(c.Variant)
	if err != nil {
		return fmt.Errorf("--variant: %w", err)
	}
	v, err := set.One(variant.Order)
	if err != nil {
		return fmt.Errorf("--variant: %w", err)
	}
	nodes, err := c.nodes()
	if err != nil {
		return err
	}
	if len(nodes) == 0 && v.Breaks(variant.Order) {
		return fmt.Errorf("--amqp-url is required with --variant %s (or --amqp-urls): it publishes without an outbox", v.Name)
	}
	if c.Heartbeat < 0 {
		return fmt.Errorf("--amqp-heartbeat must not be negative, got %s", c.Heartbeat)
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
	set, _ := variant.Parse(cfg.Variant) // checked by Validate
	own, _ := set.One(variant.Order)
	svc := New(db, log, points)
	nodes, _ := cfg.nodes() // checked by Validate
	heartbeat := cfg.Heartbeat
	if heartbeat == 0 {
		heartbeat = broker.Heartbeat
	}
	defer svc.useVariant(own.Name, nodes, heartbeat, log)()
	mux := http.NewServeMux()
	control.Mount(mux, points, db.Ping)
	svc.Register(mux)

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Log(eventlog.Entry{Event: eventlog.Started, Detail: "order service " + set.Detail(variant.Order)})
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
