// Package inventory is the inventory service of the reference pipeline: it
// consumes order events from RabbitMQ and reserves stock, effectively once.
//
// Deliveries are handled in batches (the first delivery plus whatever is
// already buffered, up to Config.TxBatch). For a batch:
//
//	receive      parse, validate and log every delivery as `delivered`
//	             crash point inventory.after-receive
//	dead-letter  poison (unparsable, no eventId, unstorable): nack without
//	             requeue, so the queue's dead-letter exchange takes it
//	BEGIN
//	record inbox INSERT INTO inbox_messages ... ON CONFLICT DO NOTHING per
//	             delivery; 0 rows = a duplicate, which gets no effect
//	apply        for the fresh deliveries, in per-aggregate order: reserve,
//	effects      or park an event ahead of its aggregate's version (and
//	             apply parked successors once their predecessor is applied)
//	             crash point inventory.before-commit
//	COMMIT       (retried with backoff while the database fails; never acked
//	             before this point)
//	             log `reserved` / `duplicate` / `held-back`
//	             crash point inventory.after-commit
//	ack          ack every delivery, log `acked`
//
// # Variants
//
// The stages that carry a guard are the methods of the steps interface, and
// correctSteps implements them. A deliberately broken variant is one small
// file: a type embedding correctSteps that overrides one method:
//
//	ack-before-commit      receive acks every valid delivery right after the
//	                       correct receive (so before the after-receive crash
//	                       point); ack does nothing
//	no-inbox               recordInbox marks every item fresh, writes nothing
//	inbox-own-transaction  recordInbox inserts and commits the inbox rows in a
//	                       transaction of their own, before the effect's
//	commit-error-ignored   commit swallows a failed COMMIT, so the batch is
//	                       logged and acked as if it had committed
//	poison-acked           deadLetter acks the poison instead of rejecting
//	                       it: gone, the dead-letter queue never sees it
//
// Two variants change the queue rather than a step (queueVariants):
//
//	classic-queue          the queue is declared classic (one node), not quorum
//	limit-without-dlx      the queue has x-delivery-limit 2 and no dead-letter exchange
//
// Run picks the steps of Config.Variant (see variant.go); a variant of
// another process leaves the consumer correct.
//
// # The inbox retention boundary
//
// The inbox is the only duplicate guard: inventory_reservations has no unique
// key on event_id, and an event behind its aggregate's version whose inbox
// row is new is applied (logged `reserved` with a note) rather than dropped.
// So once the cleanup has deleted an eventId's inbox row (older than
// --inbox-retention), a replay of that eventId takes effect a second time.
// That is the article's retention boundary, kept visible on purpose.
package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/protocol/control"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/broker"
	"github.com/faultline-dev/faultline/system/dbutil"
	"github.com/faultline-dev/faultline/system/schema"
	"github.com/faultline-dev/faultline/system/service"
	"github.com/faultline-dev/faultline/system/topology"
	"github.com/faultline-dev/faultline/system/variant"
)

// Process is the crash point catalogue's name for this service.
const Process = "inventory"

const amqpDialTimeout = 5 * time.Second

// Run consumes until ctx ends, then finishes the transaction in flight and
// returns nil. It survives PostgreSQL and RabbitMQ going away and coming
// back. It returns an error for a bad configuration or a failed start
// (event log, crash point arming, control server), and a *BrokerLostError
// when Config.ExitOnBrokerLoss is set and the broker stayed unreachable
// that long.
func Run(ctx context.Context, cfg Config) error {
	newSteps, err := stepsFor(cfg.Variant)
	if err != nil {
		return err
	}
	return run(ctx, cfg, newSteps)
}

// consumer is one running inventory service.
type consumer struct {
	cfg     Config
	log     *eventlog.Log
	store   *store
	handler *handler
	broker  *brokerWatch // which workers consume: --exit-on-broker-loss
	nodes   []string     // the broker addresses, each worker dials them in turn
	queue   topology.QueueOptions
}

func run(ctx context.Context, cfg Config, newSteps func(*store, *eventlog.Log) steps) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// One connection per worker's transaction, and the rest for the cleanup.
	base, err := service.Open(ctx, Process, cfg.Instance, cfg.EventLog, cfg.DBURL, cfg.MaxDBConns+int32(cfg.Workers)-1)
	if err != nil {
		return err
	}
	defer base.Close()
	log, points, pool := base.Log, base.Points, base.DB
	st := &store{pool: pool, consumer: cfg.ConsumerName}
	c := &consumer{cfg: cfg, log: log, store: st, nodes: cfg.nodes(), queue: queueOptionsFor(cfg), handler: &handler{pool: pool, steps: newSteps(st, log), log: log,
		points: points, retryMax: cfg.ReconnectMax, dbUp: new(atomic.Bool)}}

	// The control server stops with ctx; wait for nothing else of it.
	if _, err := control.Serve(ctx, cfg.ControlAddr, log, points, pool.Ping,
		map[string]http.Handler{"POST /inbox/cleanup": http.HandlerFunc(c.serveCleanup)}); err != nil {
		return err
	}
	v, _ := variant.Parse(cfg.Variant) // checked by Validate
	log.Log(eventlog.Entry{Event: eventlog.Started, Detail: fmt.Sprintf("inventory consumer=%s prefetch=%d tx-batch=%d workers=%d retention=%s %s",
		cfg.ConsumerName, cfg.Prefetch, cfg.TxBatch, cfg.Workers, cfg.InboxRetention, v.Detail(variant.Inventory))})

	if err := dbutil.Retry(ctx, cfg.ReconnectMax, func(ctx context.Context) error { return schema.ApplyInventory(ctx, pool) },
		func(err error) { log.Errorf("schema: %v (retrying)", err) }); err != nil {
		return nil // stopped before the database came
	}
	c.handler.dbUp.Store(true)
	log.Log(eventlog.Entry{Event: eventlog.Connected, Detail: "postgres"})

	// Under --exit-on-broker-loss a watcher ends the workers once the
	// broker has been lost that long: they stop as on SIGTERM (no batch is
	// in flight, as no session is), and Run returns why. Its clock starts
	// here, with the database there: at the workers' first dial.
	c.broker = newBrokerWatch(time.Now())
	work, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	var wg sync.WaitGroup
	if cfg.ExitOnBrokerLoss > 0 {
		wg.Go(func() {
			if err := watchBroker(work, c.broker, cfg.ExitOnBrokerLoss); err != nil {
				log.Errorf("%v", err)
				giveUp(err)
			}
		})
	}
	if cfg.CleanupInterval > 0 {
		wg.Go(func() { c.cleanupLoop(work) })
	}
	for range cfg.Workers {
		wg.Go(func() { c.consumeLoop(work) })
	}
	wg.Wait()
	var lost *BrokerLostError
	if ctx.Err() == nil && errors.As(context.Cause(work), &lost) {
		return lost
	}
	return nil
}

// consumeLoop connects, consumes until the connection fails, and connects
// again, with capped exponential backoff and jitter, until ctx ends. Each
// connection goes to the node after the last one's (the first that answers
// of a full round): a lost node is left for the next. The broker redelivers
// what the lost connection had taken and not acked.
func (c *consumer) consumeLoop(ctx context.Context) {
	bo := newBackoff(100*time.Millisecond, c.cfg.ReconnectMax)
	ring := broker.NewRing(c.nodes)
	for attempt := 1; ctx.Err() == nil; attempt++ {
		connected, err := c.session(ctx, ring)
		if ctx.Err() != nil {
			return
		}
		if connected {
			bo.reset()
			attempt = 0
			c.log.Log(eventlog.Entry{Event: eventlog.Disconnected, Detail: "amqp", Error: err.Error()})
		} else if attempt&(attempt-1) == 0 { // attempts 1, 2, 4, 8, ...
			c.log.Log(eventlog.Entry{Event: eventlog.ErrorOccurred, Attempt: attempt, Detail: "amqp", Error: err.Error()})
		}
		t := time.NewTimer(bo.next())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// session is one AMQP connection: dial, declare, consume batches until the
// channel or ctx ends. connected reports whether consuming had started.
func (c *consumer) session(ctx context.Context, ring *broker.Ring) (connected bool, err error) {
	conn, node, err := broker.DialFirst(ctx, ring, c.dial)
	if err != nil {
		return false, err
	}
	// Closing returns the unacked deliveries to the queue; bounded, as the
	// link may be dead.
	defer conn.CloseDeadline(time.Now().Add(amqpDialTimeout)) //nolint:errcheck
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Qos(c.cfg.Prefetch, 0, false); err != nil {
		return false, fmt.Errorf("qos %d: %w", c.cfg.Prefetch, err)
	}
	if err := topology.DeclareConsumer(ch, c.queue); err != nil {
		return false, err
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	lost := make(chan struct{})
	go func() {
		<-closed // also closed when the channel or connection is closed cleanly
		close(lost)
	}()
	tag := c.cfg.Instance + "-" + uuid.NewString()[:8]
	unbuffered, err := ch.ConsumeWithContext(ctx, topology.Queue, tag, false, false, false, false, nil)
	if err != nil {
		return false, fmt.Errorf("consume %s: %w", topology.Queue, err)
	}
	// The client hands deliveries over an unbuffered channel, one at a time,
	// so "what is already buffered" would be invisible to a non-blocking
	// receive. Move them into a buffer that can hold every unacked delivery.
	deliveries := make(chan amqp.Delivery, c.cfg.Prefetch)
	go func() {
		defer close(deliveries)
		for d := range unbuffered {
			deliveries <- d
		}
	}()
	c.log.Log(eventlog.Entry{Event: eventlog.Connected, Detail: fmt.Sprintf("amqp consumer=%s node=%d/%d", tag, node+1, len(c.nodes))})
	c.broker.up()
	defer func() { c.broker.down(time.Now()) }()

	for {
		var first amqp.Delivery
		var ok bool
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case first, ok = <-deliveries:
		}
		if !ok {
			return true, channelClosedError(closed)
		}
		if ctx.Err() != nil {
			return true, ctx.Err() // stopping: not acked, so it is redelivered
		}
		batch := []amqp.Delivery{first}
	fill:
		for len(batch) < c.cfg.TxBatch {
			select {
			case d, ok := <-deliveries:
				if !ok {
					break fill
				}
				batch = append(batch, d)
			default:
				break fill
			}
		}
		if err := c.handler.handle(ctx, lost, batch); err != nil {
			if ctx.Err() != nil {
				return true, ctx.Err()
			}
			return true, err
		}
	}
}

// dial connects to the RabbitMQ node at url; the TCP connect and the AMQP
// handshake are bounded by amqpDialTimeout and by ctx.
func (c *consumer) dial(ctx context.Context, url string) (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(c.cfg.Instance)
	conn, err := amqp.DialConfig(url, amqp.Config{
		Heartbeat:  c.cfg.Heartbeat,
		Properties: props,
		Dial: func(network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, amqpDialTimeout)
			defer cancel()
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// Cleared by the client once the handshake completes.
			if err := conn.SetDeadline(time.Now().Add(amqpDialTimeout)); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("dial amqp: %w", err)
	}
	return conn, nil
}

func channelClosedError(closed <-chan *amqp.Error) error {
	select {
	case e, ok := <-closed:
		if ok && e != nil {
			return fmt.Errorf("channel closed: %w", e)
		}
	case <-time.After(100 * time.Millisecond):
	}
	return errors.New("channel closed")
}

// cleanupLoop deletes inbox rows older than the retention, every interval.
func (c *consumer) cleanupLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.CleanupInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := c.cleanup(ctx, retentionFor(c.cfg)); err != nil && ctx.Err() == nil {
			c.log.Errorf("%v", err)
		}
	}
}

func (c *consumer) cleanup(ctx context.Context, olderThan time.Duration) (int64, error) {
	n, err := c.store.cleanupInbox(ctx, olderThan)
	if err != nil {
		return 0, err
	}
	c.log.Log(eventlog.Entry{Event: eventlog.InboxCleaned, Detail: strconv.FormatInt(n, 10)})
	return n, nil
}

// serveCleanup is POST /inbox/cleanup[?older-than=DURATION]: one cleanup now,
// with the retention or the given age. It answers {"deleted": n}.
func (c *consumer) serveCleanup(w http.ResponseWriter, r *http.Request) {
	olderThan := retentionFor(c.cfg)
	if s := r.URL.Query().Get("older-than"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			http.Error(w, fmt.Sprintf("older-than=%q: want a duration >= 0 such as 0s, 90m or 168h", s), http.StatusBadRequest)
			return
		}
		olderThan = d
	}
	n, err := c.cleanup(r.Context(), olderThan)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int64{"deleted": n})
}
