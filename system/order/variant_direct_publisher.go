package order

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/broker"
	"github.com/faultline-dev/faultline/system/message"
	"github.com/faultline-dev/faultline/system/topology"
)

// directPublisher publishes events straight to RabbitMQ, as the two
// variants without an outbox do: exchange orders.events, routing key = the
// event type, persistent, MessageId = eventId, and it waits for the
// publisher confirm. The correct service never uses it.
//
// Requests share one confirm-mode channel: the publish call itself is
// serialised (one publisher per channel), the confirms are awaited
// concurrently. After a failure the next publish dials again, the node
// after the lost one first.
type directPublisher struct {
	log            *eventlog.Log
	confirmTimeout time.Duration
	heartbeat      time.Duration

	mu    sync.Mutex
	nodes *broker.Ring
	conn  *amqp.Connection
	ch    *amqp.Channel
}

func newDirectPublisher(nodes []string, heartbeat time.Duration, log *eventlog.Log) *directPublisher {
	return &directPublisher{nodes: broker.NewRing(nodes), heartbeat: heartbeat, log: log, confirmTimeout: 10 * time.Second}
}

// publish sends ev and waits for its confirm. It logs `published` once the
// message is sent and `confirmed` on a positive confirm; any other outcome
// is an error.
func (p *directPublisher) publish(ctx context.Context, ev message.Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	dc, ch, err := p.send(ctx, ev, body)
	if err != nil {
		return fmt.Errorf("publish event %s: %w", ev.EventID, err)
	}
	p.log.Log(eventlog.Entry{Event: eventlog.Published, EventID: ev.EventID, AggregateID: ev.AggregateID, Sequence: ev.Sequence, Detail: ev.EventType})
	waitCtx, cancel := context.WithTimeout(ctx, p.confirmTimeout)
	defer cancel()
	ok, err := dc.WaitContext(waitCtx)
	switch {
	case err != nil:
		p.log.Log(eventlog.Entry{Event: eventlog.Unknown, EventID: ev.EventID, Detail: "no confirm: " + err.Error()})
		return fmt.Errorf("event %s: no confirm within %s: %w", ev.EventID, p.confirmTimeout, err)
	case !ok && ch.IsClosed():
		// amqp091-go resolves pending confirms as nacks when the channel closes.
		p.log.Log(eventlog.Entry{Event: eventlog.Unknown, EventID: ev.EventID, Detail: "channel closed before the confirm"})
		return fmt.Errorf("event %s: channel closed before the confirm", ev.EventID)
	case !ok:
		p.log.Log(eventlog.Entry{Event: eventlog.Nacked, EventID: ev.EventID})
		return fmt.Errorf("event %s: nacked by the broker", ev.EventID)
	}
	p.log.Log(eventlog.Entry{Event: eventlog.Confirmed, EventID: ev.EventID})
	return nil
}

// send publishes on the shared channel, connecting first if needed.
func (p *directPublisher) send(ctx context.Context, ev message.Event, body []byte) (*amqp.DeferredConfirmation, *amqp.Channel, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil || p.ch.IsClosed() || p.conn.IsClosed() {
		p.closeLocked()
		if err := p.connectLocked(ctx); err != nil {
			return nil, nil, err
		}
	}
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, topology.Exchange, ev.EventType, false, false, amqp.Publishing{
		MessageId:    ev.EventID,
		Type:         ev.EventType,
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		Timestamp:    time.Now(),
		Body:         body,
	})
	if err != nil {
		p.closeLocked() // start again from a fresh connection
		return nil, nil, err
	}
	return dc, p.ch, nil
}

func (p *directPublisher) connectLocked(ctx context.Context) error {
	conn, node, err := broker.DialFirst(ctx, p.nodes, func(_ context.Context, url string) (*amqp.Connection, error) {
		return amqp.DialConfig(url, amqp.Config{
			Heartbeat:  p.heartbeat,
			Dial:       amqp.DefaultDial(5 * time.Second),
			Properties: amqp.Table{"connection_name": "faultline order (direct publish)"},
		})
	})
	if err != nil {
		return fmt.Errorf("dial amqp: %w", err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err == nil {
		err = topology.DeclareExchange(ch)
	}
	if err != nil {
		_ = conn.CloseDeadline(time.Now().Add(time.Second))
		return fmt.Errorf("amqp channel: %w", err)
	}
	p.conn, p.ch = conn, ch
	p.log.Log(eventlog.Entry{Event: eventlog.Connected, Detail: fmt.Sprintf("amqp node=%d/%d", node+1, p.nodes.Len())})
	return nil
}

func (p *directPublisher) closeLocked() {
	if p.conn != nil {
		_ = p.conn.CloseDeadline(time.Now().Add(time.Second))
	}
	p.conn, p.ch = nil, nil
}

// close ends the connection.
func (p *directPublisher) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
}
