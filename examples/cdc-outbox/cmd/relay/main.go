// Command relay streams the outbox's inserts from the write-ahead log
// (logical replication, the pgoutput plugin, through
// github.com/jackc/pglogrepl) and publishes each event to the broker with
// mandatory and publisher confirms. Its position is its replication slot's:
// it confirms a transaction's end to the server only once every event of
// that transaction, and of every transaction before it, was confirmed by
// the broker and not returned. A restart streams again from that position,
// so what was not confirmed comes again; the inbox absorbs the duplicates.
// So does a session on another broker node: each session dials the nodes
// of --amqp-urls in turn, from the one after the node the session before
// was on.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/examples/cdc-outbox/internal/pipeline"
)

// Variants, each missing one guard (FAULTLINE_VARIANT): the example's
// broken relays, for faultline to catch.
const (
	// confirmOnReceive moves the position to a change's end when the change
	// is received, before its publish is confirmed (pglogrepl's demo does).
	confirmOnReceive = "confirm-on-receive"
	// keepaliveAdvance moves the position to the server's WAL end on every
	// keepalive, with publishes unconfirmed.
	keepaliveAdvance = "keepalive-advance"
	// noMandatory publishes without mandatory: an unroutable message is
	// confirmed all the same, and the position moves past it.
	noMandatory = "no-mandatory"
	// staleStatus reports to the server the position the stream started
	// from, not the one the broker's confirms moved it to: the slot never
	// moves on, the server keeps all its WAL, and every restart streams
	// everything again.
	staleStatus = "stale-status"
	// resumeFromReceived starts each new stream of the process from the
	// end of the last transaction it handed to its publisher, not from the
	// slot's confirmed position: a stream cut with publishes unconfirmed
	// skips them (the server decodes nothing before the start asked for).
	resumeFromReceived = "resume-from-received"
)

const outboxTable = "outbox"

type config struct {
	instance, dbURL, slot, publication, variant                 string
	statusInterval, reconnectMax, confirmTimeout, amqpHeartbeat time.Duration
	// handedUpTo is the end of the last transaction handed to a
	// publisher, by any session of the process: where resume-from-received
	// starts its next stream.
	handedUpTo *atomic.Uint64
}

func main() {
	var c config
	flag.StringVar(&c.instance, "instance", "relay", "this instance's name")
	flag.StringVar(&c.dbURL, "db-url", "", "PostgreSQL URL of the orders database")
	amqpURLs := flag.String("amqp-urls", "", "RabbitMQ URLs of the cluster's nodes, comma-separated, the preferred first: the relay connects to the first that answers and, when its session ends, to the next")
	amqpURL := flag.String("amqp-url", "", "one RabbitMQ URL (a one-node --amqp-urls)")
	flag.DurationVar(&c.amqpHeartbeat, "amqp-heartbeat", 10*time.Second, "AMQP heartbeat: a node that sends nothing for 1.5 heartbeats is left for the next")
	control := flag.String("control-addr", "127.0.0.1:0", "address of /healthz")
	flag.StringVar(&c.slot, "slot", "outbox_relay", "logical replication slot (pgoutput), created if missing")
	flag.StringVar(&c.publication, "publication", "outbox_pub", "publication of the outbox table, created if missing")
	flag.DurationVar(&c.statusInterval, "status-interval", 10*time.Second, "how often the position is confirmed to the server")
	flag.DurationVar(&c.reconnectMax, "reconnect-max", 5*time.Second, "longest wait between reconnections")
	flag.DurationVar(&c.confirmTimeout, "confirm-timeout", 10*time.Second, "how long the broker's confirms are waited for before the outcome counts as unknown and the session starts over")
	flag.Parse()
	c.variant = os.Getenv("FAULTLINE_VARIANT")
	c.handedUpTo = new(atomic.Uint64)
	if c.dbURL == "" {
		log.Fatal("relay: --db-url is required")
	}
	urls, err := pipeline.BrokerURLs(*amqpURLs, *amqpURL)
	if err != nil {
		log.Fatalf("relay: %v", err)
	}
	nodes := pipeline.NewNodes(urls)
	ctx, stop := pipeline.SignalContext()
	defer stop()
	var streaming atomic.Bool
	if err := pipeline.ServeHealth(ctx, *control, nil, func(context.Context) error {
		if !streaming.Load() {
			return errors.New("not streaming")
		}
		return nil
	}); err != nil {
		log.Fatalf("relay: %v", err)
	}
	log.Printf("relay %s: started, slot %s, publication %s, broker nodes: %d, variant %q", c.instance, c.slot, c.publication, nodes.Len(), c.variant)
	switch c.variant {
	case "", "correct", confirmOnReceive, keepaliveAdvance, noMandatory, staleStatus, resumeFromReceived:
	default:
		// faultline passes "correct" on the correct pipeline; anything else
		// unknown is most likely a misspelt variant, which would silently
		// test the correct relay.
		log.Printf("relay %s: unknown variant %q: running the correct relay", c.instance, c.variant)
	}
	backoff := pipeline.Backoff{Max: c.reconnectMax}
	for ctx.Err() == nil {
		err := session(ctx, c, nodes, &streaming)
		if streaming.Swap(false) {
			backoff.Reset() // that session worked: start the waits over
		}
		if ctx.Err() != nil {
			break
		}
		log.Printf("relay %s: %v; reconnecting", c.instance, err)
		if backoff.Wait(ctx) != nil {
			break
		}
	}
}

// txn is one committed transaction's events, handed from the stream to
// the publisher.
type txn struct {
	end    pglogrepl.LSN
	events []event
}

type event struct{ id, routingKey, body string }

// position is the relay's confirmed position, and how many transactions
// were handed to the publisher and not yet confirmed by the broker.
type position struct {
	mu        sync.Mutex
	confirmed pglogrepl.LSN
	inflight  int
}

func (p *position) advance(to pglogrepl.LSN) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.confirmed = max(p.confirmed, to)
}

func (p *position) get() pglogrepl.LSN {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.confirmed
}

// session streams and publishes until the database or the broker fails.
// Its broker connection goes to the next node of nodes that answers: after
// a session on one node, the next session starts at the node after it.
// Whichever node it is, the session starts from the slot's confirmed
// position, which never passed a change the broker did not confirm.
func session(ctx context.Context, c config, nodes *pipeline.Nodes, streaming *atomic.Bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := prepare(ctx, c); err != nil {
		return err
	}
	conn, err := connectReplication(ctx, c.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := pglogrepl.CreateReplicationSlot(ctx, conn, c.slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{}); err != nil && !isDuplicate(err) {
		return fmt.Errorf("create slot %s: %w", c.slot, err)
	}
	// The socket under the broker connection, so that a publish or a
	// confirm that hangs (a broker gone without closing the connection)
	// can be cut short: closing it fails everything waiting on it.
	// The dial bounds the connect and the AMQP handshake (a handshake into
	// a link that drops everything would wait forever); heartbeats notice
	// a node that went silent (frozen) while the relay had nothing to
	// publish.
	var socket net.Conn
	config := pipeline.DialConfig(c.amqpHeartbeat)
	dial := config.Dial
	config.Dial = func(network, addr string) (net.Conn, error) {
		conn, err := dial(network, addr)
		socket = conn
		return conn, err
	}
	broker, node, err := nodes.Dial(ctx, config)
	if err != nil {
		return fmt.Errorf("dial broker: %w", err)
	}
	defer broker.Close()
	log.Printf("relay %s: connected to broker node %d/%d", c.instance, node+1, nodes.Len())
	// A connection lost while the relay has nothing to publish ends the
	// session at once, not at the next publish.
	lost := broker.NotifyClose(make(chan *amqp.Error, 1))
	ch, err := broker.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	if err := pipeline.DeclareTopology(ch); err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("confirm mode: %w", err)
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, 1024))
	// LSN 0: the server starts from the slot's confirmed position.
	from := pglogrepl.LSN(0)
	if c.variant == resumeFromReceived {
		from = pglogrepl.LSN(c.handedUpTo.Load())
	}
	if err := pglogrepl.StartReplication(ctx, conn, c.slot, from, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", fmt.Sprintf("publication_names '%s'", c.publication)},
	}); err != nil {
		return fmt.Errorf("start replication on %s: %w", c.slot, err)
	}
	streaming.Store(true)

	pos := &position{}
	handed := make(chan txn, 256)
	failed := make(chan error, 1)
	go func() {
		failed <- publish(ctx, c, ch, returns, lost, handed, pos, func() { _ = socket.Close() })
		cancel()
	}()
	err = stream(ctx, c, conn, handed, pos)
	// Whichever side failed first, the other is ended and waited for: no
	// publisher of this session outlives it.
	cancel()
	if perr := <-failed; perr != nil && !errors.Is(perr, context.Canceled) {
		return perr
	}
	return err
}

// prepare creates the publication of the outbox table if it is missing.
func prepare(ctx context.Context, c config) error {
	db, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		return fmt.Errorf("connect to the database: %w", err)
	}
	defer db.Close(context.Background())
	_, err = db.Exec(ctx, fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s", pgx.Identifier{c.publication}.Sanitize(), outboxTable))
	if err != nil && !isDuplicate(err) {
		return fmt.Errorf("create publication %s: %w", c.publication, err)
	}
	return nil
}

func connectReplication(ctx context.Context, dbURL string) (*pgconn.PgConn, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, errors.New("--db-url is not a URL")
	}
	q := u.Query()
	q.Set("replication", "database")
	u.RawQuery = q.Encode()
	conn, err := pgconn.Connect(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("replication connection: %w", err)
	}
	return conn, nil
}

func isDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42710" // duplicate_object
}

// stream reads the replication stream: it collects each transaction's
// outbox inserts and hands the transaction to the publisher at its commit,
// and confirms the position to the server every status interval and when
// asked.
//
// The periodic status asks the server for a reply (a keepalive), so the
// server is heard from at least once an interval: a database link that
// carries nothing back for silenceLimit is taken for lost (nothing else
// would notice it: the relay only writes to a link that drops everything).
// An answer to the server's own keepalive asks for none, or the two would
// ping-pong.
func stream(ctx context.Context, c config, conn *pgconn.PgConn, handed chan<- txn, pos *position) error {
	relations := map[uint32]*pglogrepl.RelationMessage{}
	var current *txn
	silenceLimit := max(5*c.statusInterval, 10*time.Second)
	lastHeard := time.Now()
	nextStatus := time.Now().Add(c.statusInterval)
	started := pos.get()
	sendStatus := func(requestReply bool) error {
		// Written, flushed and applied are all the confirmed position:
		// the server keeps the slot's WAL from there, and streams again
		// from there after a restart.
		p := pos.get()
		if c.variant == staleStatus {
			p = started
		}
		if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
			WALWritePosition: p, WALFlushPosition: p, WALApplyPosition: p, ReplyRequested: requestReply,
		}); err != nil {
			return fmt.Errorf("send status: %w", err)
		}
		nextStatus = time.Now().Add(c.statusInterval)
		return nil
	}
	// hand gives a committed transaction to the publisher; while the
	// publisher is behind (a long unroutable spell), the status is still
	// sent on time, or the server would end the stream (wal_sender_timeout).
	hand := func(t txn) error {
		for {
			wait := time.NewTimer(time.Until(nextStatus))
			select {
			case handed <- t:
				wait.Stop()
				return nil
			case <-ctx.Done():
				wait.Stop()
				return ctx.Err()
			case <-wait.C:
				if err := sendStatus(true); err != nil {
					return err
				}
			}
		}
	}
	for {
		if time.Now().After(nextStatus) {
			if err := sendStatus(true); err != nil {
				return err
			}
		}
		rctx, cancel := context.WithDeadline(ctx, nextStatus)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if pgconn.Timeout(err) && ctx.Err() == nil {
				if silent := time.Since(lastHeard); silent > silenceLimit {
					return fmt.Errorf("nothing from the server in %s: connection taken for lost", silent.Round(time.Second))
				}
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		lastHeard = time.Now()
		data, ok := msg.(*pgproto3.CopyData)
		if !ok {
			if e, isErr := msg.(*pgproto3.ErrorResponse); isErr {
				return fmt.Errorf("replication stream: %s", e.Message)
			}
			continue
		}
		switch data.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data.Data[1:])
			if err != nil {
				return fmt.Errorf("keepalive: %w", err)
			}
			pos.mu.Lock()
			// Nothing received is unconfirmed: the server's position can be
			// confirmed, so the slot does not hold WAL while the outbox is
			// quiet. keepalive-advance does it with publishes unconfirmed.
			if (pos.inflight == 0 && current == nil) || c.variant == keepaliveAdvance {
				pos.confirmed = max(pos.confirmed, ka.ServerWALEnd)
			}
			pos.mu.Unlock()
			if ka.ReplyRequested || c.variant == keepaliveAdvance {
				if err := sendStatus(false); err != nil {
					return err
				}
			}
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(data.Data[1:])
			if err != nil {
				return fmt.Errorf("xlog data: %w", err)
			}
			if c.variant == confirmOnReceive {
				pos.advance(xld.WALStart + pglogrepl.LSN(len(xld.WALData)))
			}
			m, err := pglogrepl.Parse(xld.WALData)
			if err != nil {
				return fmt.Errorf("decode change: %w", err)
			}
			switch m := m.(type) {
			case *pglogrepl.RelationMessage:
				relations[m.RelationID] = m
			case *pglogrepl.BeginMessage:
				current = &txn{}
			case *pglogrepl.InsertMessage:
				rel, ok := relations[m.RelationID]
				if !ok || current == nil {
					return fmt.Errorf("insert into unknown relation %d", m.RelationID)
				}
				if rel.RelationName != outboxTable {
					continue
				}
				e, err := eventOf(rel, m.Tuple)
				if err != nil {
					return err
				}
				current.events = append(current.events, e)
			case *pglogrepl.CommitMessage:
				if current == nil {
					continue
				}
				current.end = m.TransactionEndLSN
				pos.mu.Lock()
				pos.inflight++
				pos.mu.Unlock()
				c.handedUpTo.Store(uint64(current.end))
				if err := hand(*current); err != nil {
					return err
				}
				current = nil
			}
		}
	}
}

// eventOf reads an outbox row's event from its inserted tuple.
func eventOf(rel *pglogrepl.RelationMessage, tuple *pglogrepl.TupleData) (event, error) {
	var e event
	if tuple == nil {
		return e, errors.New("outbox insert without a tuple")
	}
	for i, col := range tuple.Columns {
		if i >= len(rel.Columns) || col.DataType != pglogrepl.TupleDataTypeText {
			continue
		}
		switch rel.Columns[i].Name {
		case "event_id":
			e.id = string(col.Data)
		case "event_type":
			e.routingKey = string(col.Data)
		case "payload":
			e.body = string(col.Data)
		}
	}
	if e.id == "" || e.routingKey == "" || e.body == "" {
		return e, fmt.Errorf("outbox row without event_id, event_type or payload: %+v", e)
	}
	return e, nil
}

// publish publishes each handed transaction's events, in commit order,
// until every one is confirmed by the broker and not returned, retrying
// those returned or nacked with backoff; then it moves the position to the
// transaction's end.
func publish(ctx context.Context, c config, ch *amqp.Channel, returns <-chan amqp.Return, lost <-chan *amqp.Error, handed <-chan txn, pos *position, cut func()) error {
	for {
		var t txn
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-lost:
			if err == nil {
				return errors.New("broker connection closed")
			}
			return fmt.Errorf("broker connection lost: %w", err)
		case t = <-handed:
		}
		todo := t.events
		wait := 100 * time.Millisecond
		for len(todo) > 0 {
			failed, err := publishOnce(ctx, c, ch, returns, todo, cut)
			if err != nil {
				return err
			}
			todo = failed
			if len(todo) > 0 {
				log.Printf("relay %s: %d events returned or nacked; retrying in %s", c.instance, len(todo), wait)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(wait):
				}
				wait = min(2*wait, 2*time.Second)
			}
		}
		pos.mu.Lock()
		pos.confirmed = max(pos.confirmed, t.end)
		pos.inflight--
		pos.mu.Unlock()
	}
}

// publishOnce publishes events and waits for their confirms; it returns
// those returned (matched by MessageId) or nacked.
func publishOnce(ctx context.Context, c config, ch *amqp.Channel, returns <-chan amqp.Return, events []event, cut func()) ([]event, error) {
	// Publishes and confirms that take longer than the confirm timeout:
	// the outcome is unknown, the connection is cut and the session starts
	// over, the server streaming again from the position, which never
	// passed these events.
	watchdog := time.AfterFunc(c.confirmTimeout, cut)
	defer watchdog.Stop()
	confirms := make([]*amqp.DeferredConfirmation, len(events))
	for i, e := range events {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, pipeline.Exchange, e.routingKey, c.variant != noMandatory, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: e.id, Body: []byte(e.body),
		})
		if err != nil {
			return nil, fmt.Errorf("publish %s: %w", e.id, err)
		}
		confirms[i] = dc
	}
	wctx, cancel := context.WithTimeout(ctx, c.confirmTimeout)
	defer cancel()
	acked := make([]bool, len(events))
	for i, dc := range confirms {
		ok, err := dc.WaitContext(wctx)
		if err != nil {
			return nil, fmt.Errorf("confirm of %s: %w", events[i].id, err)
		}
		acked[i] = ok
	}
	// A return comes before its publish's confirm: every one is queued by
	// now.
	returned := map[string]bool{}
	for done := false; !done; {
		select {
		case r, open := <-returns:
			if !open { // the channel closed: its confirms say nothing
				return nil, errors.New("broker channel closed with publishes unconfirmed")
			}
			returned[r.MessageId] = true
		default:
			done = true
		}
	}
	var failed []event
	for i, e := range events {
		if !acked[i] || returned[e.id] {
			failed = append(failed, e)
		}
	}
	return failed, nil
}
