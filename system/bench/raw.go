package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/system/topology"
)

// rawWindow is the raw publisher's confirm window: at most this many
// publishes await their confirm at once.
const rawWindow = 256

// publishRaw is the ceiling: one connection, one confirm-mode channel,
// every event published persistent to the pipeline's exchange (so it lands
// in the same quorum queue the relay feeds) with up to rawWindow confirms
// outstanding. It returns the time from the first publish to the last
// confirm. No database, no claims, no marks: what the broker can take.
func publishRaw(ctx context.Context, url string, events []event) (time.Duration, error) {
	conn, ch, err := confirmChannel(url, "raw publisher")
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	window := make([]*amqp.DeferredConfirmation, rawWindow)
	wait := func(dc *amqp.DeferredConfirmation) error {
		if dc == nil {
			return nil
		}
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return fmt.Errorf("raw publisher: confirm: %w", err)
		}
		if !ok {
			return errors.New("raw publisher: nacked by the broker")
		}
		return nil
	}
	start := time.Now()
	for i, e := range events {
		slot := i % rawWindow
		if err := wait(window[slot]); err != nil {
			return 0, err
		}
		window[slot], err = ch.PublishWithDeferredConfirmWithContext(ctx, topology.Exchange, e.Type, false, false, amqp.Publishing{
			MessageId: e.ID, Type: e.Type, ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: e.Payload,
		})
		if err != nil {
			return 0, fmt.Errorf("raw publisher: publish: %w", err)
		}
	}
	for i := range window {
		if err := wait(window[(len(events)+i)%rawWindow]); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// confirmChannel connects as name and opens a channel in confirm mode.
func confirmChannel(url, name string) (*amqp.Connection, *amqp.Channel, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second), Properties: amqp.Table{"connection_name": "faultline bench " + name}})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: dial: %w", name, err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("%s: confirm channel: %w", name, err)
	}
	return conn, ch, nil
}
