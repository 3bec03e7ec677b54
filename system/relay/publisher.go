package relay

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/system/topology"
)

// publisher owns one AMQP connection and one confirm-mode channel. One
// publisher per channel: the relay publishes from a single goroutine.
type publisher struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
	closed  chan *amqp.Error
	// returned holds returns drained for publishes not yet finished, by
	// the publish they came back from.
	returned map[publishKey]amqp.Return
}

// claimHeader carries the claim id on every message. A basic.return brings
// the message's headers back, so a return is matched to the publish it
// came from: one eventId can be in flight twice on one channel (its lease
// ran out and this relay claimed it again before the first publish was
// confirmed), and by MessageId alone both publishes would share one return.
const claimHeader = "claim-id"

// publishKey names one publish: a claim publishes an eventId once.
type publishKey struct{ claimID, eventID string }

// dialPublisher connects, puts the channel in confirm mode and declares the
// exchange. The return buffer holds every message that can be in flight
// (inFlight of them), so the client's reader never blocks on it (which
// would deadlock the connection).
func dialPublisher(ctx context.Context, url string, inFlight int, heartbeat time.Duration) (*publisher, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{
		Heartbeat:  heartbeat,
		Dial:       amqp.DefaultDial(5 * time.Second),
		Properties: amqp.Table{"connection_name": "faultline relay"},
	})
	if err != nil {
		return nil, fmt.Errorf("dial amqp: %w", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		conn.Close()
		return nil, fmt.Errorf("confirm mode: %w", err)
	}
	if err := topology.DeclareExchange(ch); err != nil {
		conn.Close()
		return nil, err
	}
	p := &publisher{
		conn:     conn,
		ch:       ch,
		returns:  ch.NotifyReturn(make(chan amqp.Return, 2*inFlight+16)),
		returned: map[publishKey]amqp.Return{},
		closed:   ch.NotifyClose(make(chan *amqp.Error, 1)),
	}
	return p, ctx.Err()
}

// isClosed reports whether the channel or connection has gone.
func (p *publisher) isClosed() bool {
	return p.ch.IsClosed() || p.conn.IsClosed()
}

// publish sends one persistent message of claimID and returns its
// deferred confirm.
func (p *publisher) publish(ctx context.Context, exchange, key string, mandatory bool, claimID string, r Row) (*amqp.DeferredConfirmation, error) {
	return p.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, mandatory, false, amqp.Publishing{
		Headers:      amqp.Table{claimHeader: claimID},
		MessageId:    r.EventID,
		Type:         r.EventType,
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		Timestamp:    time.Now(),
		Body:         r.Payload,
	})
}

// takeReturns drains the basic.returns the client has handed over and
// returns, by eventId, those of claimID's publishes, and every return it
// drained, in order, for the log. RabbitMQ sends a mandatory message's
// return before its confirm and the client hands frames over in order, so
// once a publish's confirm has been seen, its return (if any) is already
// in the buffer. A return of a later batch drained here (the same
// eventId's too) is kept for it unless dropLater (the
// own-batch-returns-only variant): its batch finds nothing when it
// settles, and the row goes out Published.
func (p *publisher) takeReturns(claimID string, flights []inFlight, dropLater bool) (own map[string]amqp.Return, drained []amqp.Return) {
	for done := false; !done; {
		select {
		case r, ok := <-p.returns:
			if !ok {
				done = true
				break
			}
			drained = append(drained, r)
			p.returned[publishKey{returnClaim(r), r.MessageId}] = r
		default:
			done = true
		}
	}
	own = map[string]amqp.Return{}
	for _, f := range flights {
		k := publishKey{claimID, f.row.EventID}
		if r, ok := p.returned[k]; ok {
			own[f.row.EventID] = r
			delete(p.returned, k)
		}
	}
	if dropLater {
		clear(p.returned)
	}
	return own, drained
}

// returnClaim is the claim id a returned message was published under.
func returnClaim(r amqp.Return) string {
	claim, _ := r.Headers[claimHeader].(string)
	return claim
}

// close ends the connection without waiting long for the broker's
// close-ok: the link may be the thing that is broken.
func (p *publisher) close() {
	if p == nil {
		return
	}
	_ = p.conn.CloseDeadline(time.Now().Add(time.Second))
}
