package order

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// commitErrorAnswered is the commit-error-answered variant: a COMMIT that
// fails (the connection cut with it in flight, so its outcome is unknown)
// is taken for done, and the order is answered 201. If the transaction did
// not commit, the client holds the id of an order that does not exist.
// (The correct commit returns the error: the client is answered 503 and
// tries again.)
func commitErrorAnswered(log *eventlog.Log) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		if err := commitTx(ctx, tx); err != nil {
			log.Log(eventlog.Entry{Event: eventlog.ErrorOccurred, Error: fmt.Sprintf("%v (ignored: answered as created)", err)})
		}
		return nil
	}
}
