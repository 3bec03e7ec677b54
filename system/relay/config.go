package relay

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/protocol/control"
	"github.com/faultline-dev/faultline/system/broker"
	"github.com/faultline-dev/faultline/system/topology"
	"github.com/faultline-dev/faultline/system/variant"
)

// Config is a relay's configuration.
type Config struct {
	DBURL          string
	AMQPURL        string
	AMQPURLs       string        // the cluster's nodes, comma-separated, preferred first; replaces AMQPURL when set
	Heartbeat      time.Duration // AMQP heartbeat: a connection silent for three of them is lost
	Instance       string
	Lease          time.Duration
	BatchSize      int
	InFlight       int // batches published and awaiting their confirms at once
	PollInterval   time.Duration
	RetryBudget    int
	BackoffBase    time.Duration
	BackoffMax     time.Duration
	ConfirmTimeout time.Duration
	Renew          bool
	RenewInterval  time.Duration
	Exchange       string
	EventLog       string
	ControlAddr    string
	ReconnectMax   time.Duration
	Variant        string // a deliberately broken variant (package variant); empty: correct

	nodes []string // the broker addresses in order (AMQPURLs, else AMQPURL), filled by Validate
}

// Flags defines the configuration's flags on fs.
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.DBURL, "db-url", "postgres://postgres@127.0.0.1:5432/orders?sslmode=disable", "PostgreSQL URL of the orders database (the outbox)")
	fs.StringVar(&c.AMQPURL, "amqp-url", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ URL (one node; see --amqp-urls)")
	fs.StringVar(&c.AMQPURLs, "amqp-urls", "", "RabbitMQ URLs of a cluster's nodes, comma-separated, the preferred first; replaces --amqp-url: the relay connects to the first that answers and, when its connection is lost, to the next")
	fs.DurationVar(&c.Heartbeat, "amqp-heartbeat", relayHeartbeat, "AMQP heartbeat: a connection that reads nothing for three of them is lost (a frozen node)")
	fs.StringVar(&c.Instance, "instance", "relay-1", "instance name: the first half of every claim id (instance:uuid)")
	fs.DurationVar(&c.Lease, "lease", 30*time.Second, "how long a claim holds its rows (must cover claim → publish → confirm → mark)")
	fs.IntVar(&c.BatchSize, "batch-size", 500, "rows claimed, published and confirmed together (larger batches spread the claim's and the mark's per-statement cost; a crash leaves up to --in-flight batches to the lease)")
	fs.IntVar(&c.InFlight, "in-flight", 2, "batches published and awaiting their confirms at once (the oldest is finished when this many are out)")
	fs.DurationVar(&c.PollInterval, "poll-interval", 200*time.Millisecond, "wait before claiming again when nothing was due")
	fs.IntVar(&c.RetryBudget, "retry-budget", 8, "failed attempts (return, nack, send failure) before a row becomes Failed")
	fs.DurationVar(&c.BackoffBase, "backoff-base", 500*time.Millisecond, "first retry delay; doubles per attempt, with jitter")
	fs.DurationVar(&c.BackoffMax, "backoff-max", 30*time.Second, "largest retry delay")
	fs.DurationVar(&c.ConfirmTimeout, "confirm-timeout", 10*time.Second, "how long to wait for a batch's confirms before its outcome is unknown")
	fs.BoolVar(&c.Renew, "renew", false, "renew the lease of rows still in flight (heartbeat conditional on the claim id)")
	fs.DurationVar(&c.RenewInterval, "renew-interval", 0, "heartbeat period with --renew (default lease/3)")
	fs.StringVar(&c.Exchange, "exchange", topology.Exchange, "exchange to publish to")
	fs.StringVar(&c.EventLog, "event-log", "", "path of the JSON-lines event log (empty: stderr)")
	fs.StringVar(&c.ControlAddr, "control-addr", "127.0.0.1:0", "loopback address of the control server (health, crash points)")
	fs.DurationVar(&c.ReconnectMax, "reconnect-max", 2*time.Second, "largest wait between reconnect attempts")
	variant.Register(fs, &c.Variant)
}

// Validate checks values flags cannot, and fills derived defaults.
func (c *Config) Validate() error {
	var errs []error
	if c.DBURL == "" {
		errs = append(errs, errors.New("--db-url is required"))
	}
	if nodes, err := broker.URLs(c.AMQPURLs, c.AMQPURL); err != nil {
		errs = append(errs, fmt.Errorf("%w: want amqp://user:pass@host:port/vhost", err))
	} else {
		c.nodes = nodes
	}
	if c.Instance == "" {
		errs = append(errs, errors.New("--instance must not be empty"))
	}
	positive := map[string]time.Duration{"--lease": c.Lease, "--poll-interval": c.PollInterval, "--backoff-base": c.BackoffBase, "--backoff-max": c.BackoffMax, "--confirm-timeout": c.ConfirmTimeout, "--reconnect-max": c.ReconnectMax, "--amqp-heartbeat": c.Heartbeat}
	for name, d := range positive {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	if c.BatchSize < 1 || c.BatchSize > 10000 {
		errs = append(errs, fmt.Errorf("--batch-size must be 1..10000, got %d", c.BatchSize))
	}
	if c.InFlight < 1 || c.InFlight > 16 {
		errs = append(errs, fmt.Errorf("--in-flight must be 1..16, got %d", c.InFlight))
	}
	if c.RetryBudget < 1 {
		errs = append(errs, fmt.Errorf("--retry-budget must be at least 1, got %d", c.RetryBudget))
	}
	if c.BackoffMax < c.BackoffBase {
		errs = append(errs, fmt.Errorf("--backoff-max %s is below --backoff-base %s", c.BackoffMax, c.BackoffBase))
	}
	if c.RenewInterval < 0 {
		errs = append(errs, fmt.Errorf("--renew-interval must not be negative, got %s", c.RenewInterval))
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = c.Lease / 3
	}
	if c.Renew && c.RenewInterval >= c.Lease {
		errs = append(errs, fmt.Errorf("--renew-interval %s must be shorter than --lease %s", c.RenewInterval, c.Lease))
	}
	if err := control.RequireLoopback(c.ControlAddr); err != nil {
		errs = append(errs, err)
	}
	if _, err := variant.Parse(c.Variant); err != nil {
		errs = append(errs, fmt.Errorf("--variant: %w", err))
	}
	return errors.Join(errs...)
}

// relayHeartbeat is the relay's AMQP heartbeat: amqp091-go's default. A
// relay frozen past its lease (5 s in faultline's scenarios) must thaw on a
// live connection, or the stale writes a broken guard lets through never
// show; a dead node's connection drops at once whatever the heartbeat.
const relayHeartbeat = 10 * time.Second
