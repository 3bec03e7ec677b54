package inventory

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// batchDuplicatesApplied is the batch-duplicates-applied variant: the
// inbox still keeps an eventId seen in an earlier batch out, but every
// delivery of an eventId whose inbox row this batch inserted is taken as
// new, so two copies of one event in one batch (a republish behind its
// original while the consumer lagged) both take effect.
type batchDuplicatesApplied struct{ correctSteps }

func (s batchDuplicatesApplied) recordInbox(ctx context.Context, tx pgx.Tx, items []*item) error {
	if err := s.correctSteps.recordInbox(ctx, tx, items); err != nil {
		return err
	}
	inserted := map[string]bool{}
	for _, it := range items {
		if it.fresh {
			inserted[it.ev.EventID] = true
		}
	}
	for _, it := range items {
		if inserted[it.ev.EventID] {
			it.fresh, it.outcome = true, outcomeNone
		}
	}
	return nil
}
