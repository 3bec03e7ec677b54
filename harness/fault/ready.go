package fault

import (
	"context"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/poll"
)

// readyPoll is how often a fault reads a queue's ready count.
const readyPoll = 10 * time.Millisecond

// waitReady reads the ready count of queue on ch every readyPoll, within,
// until until says so, and returns the last count read. It asks by a
// passive declare: the broker's count as it stands, where the management
// API's lags by its statistics interval.
func waitReady(ctx context.Context, ch *amqp.Channel, queue string, within time.Duration, until func(ready int) bool) (int, error) {
	ready := 0
	err := poll.Until(ctx, within, readyPoll, func() (bool, error) {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if err != nil {
			return false, err
		}
		ready = q.Messages
		return until(ready), nil
	})
	return ready, err
}
