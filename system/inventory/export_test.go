package inventory

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// failingEffect is the correct pipeline except that the effect of one eventId
// fails the way PostgreSQL fails on a value it refuses (a data exception).
// It also shows how a variant plugs in: embed correctSteps, override one step.
type failingEffect struct {
	correctSteps
	eventID string
}

func (s failingEffect) applyEffects(ctx context.Context, tx pgx.Tx, items []*item) error {
	for _, it := range items {
		if it.ev.EventID == s.eventID {
			return fmt.Errorf("reserve %s: %w", it.ev.EventID, &pgconn.PgError{Code: "22003", Message: "numeric field overflow"})
		}
	}
	return s.correctSteps.applyEffects(ctx, tx, items)
}

// RunFailingEffect runs the consumer with failingEffect for eventID.
func RunFailingEffect(ctx context.Context, cfg Config, eventID string) error {
	return run(ctx, cfg, func(st *store, log *eventlog.Log) steps {
		return failingEffect{correctSteps: correctSteps{st: st, log: log}, eventID: eventID}
	})
}
