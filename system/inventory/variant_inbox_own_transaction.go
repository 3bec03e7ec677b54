package inventory

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// inboxOwnTransaction is the inbox-own-transaction variant: the inbox rows
// are inserted and committed in a transaction of their own, through the
// pool, before the effect's transaction. A crash before the effect commits
// (inventory.before-commit) leaves the eventId in the inbox without its
// effect: the redelivery is taken for a duplicate and the effect is lost.
type inboxOwnTransaction struct{ correctSteps }

func (s inboxOwnTransaction) recordInbox(ctx context.Context, _ pgx.Tx, items []*item) error {
	tx, err := s.st.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin inbox transaction: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	if err := s.correctSteps.recordInbox(ctx, tx, items); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit inbox transaction: %w", err)
	}
	return nil
}
