// Package schema holds the two databases' tables and applies them
// idempotently at process start.
package schema

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed orders.sql
var ordersSQL string

//go:embed inventory.sql
var inventorySQL string

// advisoryKey serialises concurrent schema application (two relays starting
// at once would otherwise race on CREATE ... IF NOT EXISTS).
const advisoryKey = 7314_0001

// ApplyOrders creates the orders database's tables if missing.
func ApplyOrders(ctx context.Context, pool *pgxpool.Pool) error {
	return apply(ctx, pool, "orders", ordersSQL)
}

// ApplyInventory creates the inventory database's tables if missing.
func ApplyInventory(ctx context.Context, pool *pgxpool.Pool) error {
	return apply(ctx, pool, "inventory", inventorySQL)
}

// outboxIDSQL gives the outbox the bigserial id that libraries reading the
// outbox by position have. The article's table has none; only the
// reads-by-id variant's relay adds it, under the schema lock (two relays
// start at once), before it reads by it. Rows already there get ids too.
// (No table name in a quoted string: the renamed test target rewrites SQL
// identifiers, never string literals.)
const outboxIDSQL = `
ALTER TABLE outbox_messages ADD COLUMN IF NOT EXISTS id bigserial;
CREATE INDEX IF NOT EXISTS ix_outbox_id ON outbox_messages (id)`

// ApplyOutboxID adds the outbox's bigserial id if missing (reads-by-id).
func ApplyOutboxID(ctx context.Context, pool *pgxpool.Pool) error {
	return apply(ctx, pool, "outbox id", outboxIDSQL)
}

func apply(ctx context.Context, pool *pgxpool.Pool, name, sql string) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("apply %s schema: %w", name, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", advisoryKey); err != nil {
		return fmt.Errorf("apply %s schema: lock: %w", name, err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", advisoryKey) //nolint:errcheck
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("apply %s schema: %w", name, err)
	}
	return nil
}
