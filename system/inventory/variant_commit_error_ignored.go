package inventory

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// commitErrorIgnored is the commit-error-ignored variant: a COMMIT that
// fails (the connection cut with it in flight, so its outcome is unknown)
// is taken for done. The handler logs the batch's results and acks it; if
// the transaction did not commit, the broker has forgotten a message
// nothing applied, and the effect is lost. (The correct commit returns the
// error: the transaction runs again, or the batch is given up unacked.)
type commitErrorIgnored struct{ correctSteps }

func (s commitErrorIgnored) commit(ctx context.Context, tx pgx.Tx, items []*item) error {
	if err := s.correctSteps.commit(ctx, tx, items); err != nil {
		s.log.Log(eventlog.Entry{Event: eventlog.ErrorOccurred,
			Error: fmt.Sprintf("transaction of %d deliveries: %v (ignored: acked as done)", len(items), err)})
	}
	return nil
}
