package infra

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// LogSlot is a logical replication slot as pg_replication_slots shows it:
// its confirmed position as text and as bytes from 0/0 (both empty or zero
// while it is being made, or before it confirmed anything), and whether a
// walsender streams it.
type LogSlot struct {
	Name           string
	Confirmed      string
	ConfirmedBytes int64
	Active         bool
}

// LogSlots are the logical slots in pool's database. A run's outbox
// database is its own, so the one slot there is its log relay's.
func LogSlots(ctx context.Context, pool *pgxpool.Pool) ([]LogSlot, error) {
	rows, err := pool.Query(ctx, `SELECT slot_name::text, coalesce(confirmed_flush_lsn::text, ''), coalesce((confirmed_flush_lsn - '0/0'::pg_lsn)::bigint, 0), active
		FROM pg_replication_slots WHERE database = current_database() AND slot_type = 'logical' ORDER BY slot_name`)
	if err != nil {
		return nil, fmt.Errorf("logical slots: %w", err)
	}
	slots, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (LogSlot, error) {
		var s LogSlot
		return s, row.Scan(&s.Name, &s.Confirmed, &s.ConfirmedBytes, &s.Active)
	})
	if err != nil {
		return nil, fmt.Errorf("logical slots: %w", err)
	}
	return slots, nil
}

// RelaySlot is the log relay's slot: the one logical slot in pool's
// database, once it has confirmed a position. ok is false where there is
// none, several, or one that has confirmed nothing yet.
func RelaySlot(ctx context.Context, pool *pgxpool.Pool) (slot LogSlot, ok bool, err error) {
	slots, err := LogSlots(ctx, pool)
	if err != nil || len(slots) != 1 || slots[0].Confirmed == "" {
		return LogSlot{}, false, err
	}
	return slots[0], true, nil
}
