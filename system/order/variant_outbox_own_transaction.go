package order

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/system/message"
)

// outboxOwnTransaction is the outbox-own-transaction variant: the event is
// an outbox row, but written and committed in a transaction of its own,
// inside the order's still open one. A crash before the order's commit
// (order.before-commit) leaves the row committed without its order: the
// relay publishes an event whose fact never existed, a phantom.
type outboxOwnTransaction struct{ db *pgxpool.Pool }

func (v outboxOwnTransaction) inTx(ctx context.Context, _ pgx.Tx, ev message.Event, now time.Time) error {
	if err := pgx.BeginFunc(ctx, v.db, func(own pgx.Tx) error { return insertOutbox(ctx, own, ev, now) }); err != nil {
		return fmt.Errorf("outbox row in its own transaction: %w", err)
	}
	return nil
}

func (outboxOwnTransaction) committed(context.Context, message.Event) error { return nil }
