package inventory

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/protocol/control"
	"github.com/faultline-dev/faultline/system/broker"
	"github.com/faultline-dev/faultline/system/variant"
)

// EnvPrefix is the prefix of every flag's environment fallback:
// --db-url can also be given as INVENTORY_DB_URL.
const EnvPrefix = "INVENTORY"

// Config is everything the consumer needs to run. DefaultConfig fills in
// the defaults; RegisterFlags binds it to command-line flags.
type Config struct {
	DBURL           string        // PostgreSQL URL of the inventory database
	AMQPURL         string        // RabbitMQ URL (the vhost is part of it)
	AMQPURLs        string        // the cluster's nodes, comma-separated, preferred first; replaces AMQPURL when set
	Heartbeat       time.Duration // AMQP heartbeat: a connection silent for three of them is lost
	Instance        string        // process name in the event log
	ConsumerName    string        // the inbox key: inbox_messages.consumer_name
	Prefetch        int           // basic.qos prefetch count, > 1
	TxBatch         int           // max deliveries sharing one transaction, >= 1
	Workers         int           // concurrent channels, each with its own batches and transactions, >= 1
	InboxRetention  time.Duration // inbox rows older than this are cleaned up
	CleanupInterval time.Duration // how often the cleanup runs; 0 disables it
	QueueMaxLength  int           // x-max-length of the queue; 0 = none
	EventLog        string        // path of the JSON-lines event log; empty = stderr
	ControlAddr     string        // loopback address of the control HTTP server
	ReconnectMax    time.Duration // cap of the reconnect and retry backoff
	MaxDBConns      int32         // size of the PostgreSQL pool (not a flag)
	Variant         string        // a deliberately broken variant (package variant); empty = correct
	// ExitOnBrokerLoss: once no worker has had a broker session for this
	// long (from the start, or since the last one ended), Run returns a
	// *BrokerLostError, so the process exits non-zero and its supervisor
	// restarts it; 0 (the default) reconnects forever.
	ExitOnBrokerLoss time.Duration
}

// DefaultConfig returns the defaults of every setting.
func DefaultConfig() Config {
	return Config{
		Instance:        "inventory",
		ConsumerName:    "inventory-service",
		Prefetch:        1024,
		TxBatch:         512,
		Workers:         3,
		InboxRetention:  168 * time.Hour,
		CleanupInterval: time.Minute,
		ControlAddr:     "127.0.0.1:0",
		ReconnectMax:    2 * time.Second,
		Heartbeat:       broker.Heartbeat,
		MaxDBConns:      4,
	}
}

// RegisterFlags binds c's fields to flags on fs, with c's current values as
// the defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.DBURL, "db-url", c.DBURL, "PostgreSQL URL of the inventory database (required)")
	fs.StringVar(&c.AMQPURL, "amqp-url", c.AMQPURL, "RabbitMQ URL, e.g. amqp://guest:guest@127.0.0.1:5672/vhost (this or --amqp-urls is required)")
	fs.StringVar(&c.AMQPURLs, "amqp-urls", c.AMQPURLs, "RabbitMQ URLs of a cluster's nodes, comma-separated, the preferred first; replaces --amqp-url: each worker connects to the first that answers and, when its connection is lost, to the next")
	fs.DurationVar(&c.Heartbeat, "amqp-heartbeat", c.Heartbeat, "AMQP heartbeat: a connection that reads nothing for three of them is lost (a frozen node)")
	fs.StringVar(&c.Instance, "instance", c.Instance, "process name written on every event log line")
	fs.StringVar(&c.ConsumerName, "consumer-name", c.ConsumerName, "consumer name: the key of this consumer's inbox rows")
	fs.IntVar(&c.Prefetch, "prefetch", c.Prefetch, "unacknowledged deliveries the broker may send ahead (basic.qos), must be > 1")
	fs.IntVar(&c.TxBatch, "tx-batch", c.TxBatch, "max deliveries sharing one transaction; 1 = one transaction per delivery")
	fs.IntVar(&c.Workers, "workers", c.Workers, "channels consuming at once, each with its own connection, batches and transactions (the aggregate locks and the inbox keep them apart)")
	fs.DurationVar(&c.InboxRetention, "inbox-retention", c.InboxRetention, "inbox rows older than this are deleted by the cleanup; a replay older than this takes effect again")
	fs.DurationVar(&c.CleanupInterval, "cleanup-interval", c.CleanupInterval, "how often the inbox cleanup runs; 0 disables it")
	fs.IntVar(&c.QueueMaxLength, "queue-max-length", c.QueueMaxLength, "x-max-length of the inventory queue (reject-publish); 0 = unbounded")
	fs.StringVar(&c.EventLog, "event-log", c.EventLog, "path of the JSON-lines event log; empty = stderr")
	fs.StringVar(&c.ControlAddr, "control-addr", c.ControlAddr, "loopback host:port of the control HTTP server (/healthz, /crashpoints, /inbox/cleanup); port 0 = any free port")
	fs.DurationVar(&c.ReconnectMax, "reconnect-max", c.ReconnectMax, "max backoff between reconnect attempts and transaction retries")
	fs.DurationVar(&c.ExitOnBrokerLoss, "exit-on-broker-loss", c.ExitOnBrokerLoss, "exit non-zero once the broker has been unreachable this long (since its last session ended; not before its first), for a supervisor to restart the consumer; 0 = reconnect forever")
	variant.Register(fs, &c.Variant)
}

// Validate reports every bad setting at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.DBURL == "" {
		bad("--db-url is required")
	} else if _, err := pgxpool.ParseConfig(c.DBURL); err != nil {
		bad("--db-url: not a PostgreSQL URL: %v", err)
	}
	if _, err := broker.URLs(c.AMQPURLs, c.AMQPURL); err != nil {
		bad("%v", err)
	}
	if c.Heartbeat <= 0 {
		bad("--amqp-heartbeat must be > 0 (got %s)", c.Heartbeat)
	}
	if c.Instance == "" {
		bad("--instance must not be empty")
	}
	if c.ConsumerName == "" || len(c.ConsumerName) > 128 {
		bad("--consumer-name must be 1 to 128 characters")
	}
	if c.Prefetch <= 1 {
		bad("--prefetch must be > 1 (got %d): a consumer with one message in flight cannot batch", c.Prefetch)
	}
	if c.TxBatch < 1 {
		bad("--tx-batch must be >= 1 (got %d)", c.TxBatch)
	}
	if c.Workers < 1 || c.Workers > 64 {
		bad("--workers must be 1..64 (got %d)", c.Workers)
	}
	if c.InboxRetention < 0 {
		bad("--inbox-retention must not be negative (got %s)", c.InboxRetention)
	}
	if c.CleanupInterval < 0 {
		bad("--cleanup-interval must not be negative (got %s); 0 disables the cleanup", c.CleanupInterval)
	}
	if c.QueueMaxLength < 0 {
		bad("--queue-max-length must not be negative (got %d)", c.QueueMaxLength)
	}
	if c.ReconnectMax <= 0 {
		bad("--reconnect-max must be > 0 (got %s)", c.ReconnectMax)
	}
	if c.ExitOnBrokerLoss < 0 {
		bad("--exit-on-broker-loss must not be negative (got %s); 0 reconnects forever", c.ExitOnBrokerLoss)
	}
	if err := control.RequireLoopback(c.ControlAddr); err != nil {
		bad("--control-addr: %v", err)
	}
	if c.MaxDBConns < 2 {
		bad("MaxDBConns must be >= 2 (consumer and cleanup each need one)")
	}
	if set, err := variant.Parse(c.Variant); err != nil {
		bad("--variant: %v", err)
	} else if _, err := set.One(variant.Inventory); err != nil {
		bad("--variant: %v", err)
	}
	return errors.Join(errs...)
}

// nodes is the broker addresses in order: --amqp-urls, else --amqp-url
// (nil for a configuration Validate rejects).
func (c Config) nodes() []string {
	nodes, _ := broker.URLs(c.AMQPURLs, c.AMQPURL)
	return nodes
}
