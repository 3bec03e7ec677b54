package order

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/faultline-dev/faultline/system/message"
)

// commitThenPublish is the commit-then-publish variant: no outbox. The order
// commits on its own, then the service publishes the event itself. A crash
// between the two (order.after-commit) leaves a committed order whose event
// never left: lost.
type commitThenPublish struct{ pub *directPublisher }

func (commitThenPublish) inTx(context.Context, pgx.Tx, message.Event, time.Time) error { return nil }

func (v commitThenPublish) committed(ctx context.Context, ev message.Event) error {
	if err := v.pub.publish(ctx, ev); err != nil {
		return fmt.Errorf("order committed, its event not published: %w", err)
	}
	return nil
}
