package order

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/faultline-dev/faultline/system/message"
)

// publishThenCommit is the publish-then-commit variant: no outbox. Inside
// the order's open transaction the service publishes the event itself and
// waits for its confirm, then commits. A crash between the two
// (order.before-commit) rolls the order back after its event was delivered:
// a phantom event.
type publishThenCommit struct{ pub *directPublisher }

func (v publishThenCommit) inTx(ctx context.Context, _ pgx.Tx, ev message.Event, _ time.Time) error {
	return v.pub.publish(ctx, ev)
}

func (publishThenCommit) committed(context.Context, message.Event) error { return nil }
