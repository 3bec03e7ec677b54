package infra

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// logicalArgs are the settings every PostgreSQL server of a provider runs
// with, so that a relay tailing the write-ahead log (relay: {model: log})
// can create a logical replication slot: wal_level=logical, and slots and
// WAL senders for as many runs at once as a suite starts (a log relay
// holds one slot and one sender; a standby streams with another). A hot
// standby needs at least its primary's max_wal_senders, so both run with
// these.
func logicalArgs() []string {
	return []string{"-c", "wal_level=logical", "-c", "max_replication_slots=64", "-c", "max_wal_senders=64"}
}

// dropDatabase drops database name (its open sessions ended: WITH
// (FORCE), PostgreSQL 13 or later) over a connection to adminURL, and
// first the replication slots on it (dropSlots).
func dropDatabase(ctx context.Context, adminURL, name string) error {
	if err := validIdentifier(name); err != nil {
		return fmt.Errorf("drop database: %w", err)
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := dropSlots(ctx, conn, name); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// slotDrainWait bounds how long dropping a database's slots waits for the
// WAL senders holding them to end once terminated.
const slotDrainWait = 10 * time.Second

// dropSlots drops every replication slot on database, ending first the
// WAL sender that holds an active one: a logical slot belongs to one
// database, and DROP DATABASE refuses while the database has one. The
// slots on a run's database are the run's own.
func dropSlots(ctx context.Context, conn *pgx.Conn, database string) error {
	ctx, cancel := context.WithTimeout(ctx, slotDrainWait)
	defer cancel()
	return poll(ctx, func(ctx context.Context) error {
		rows, err := conn.Query(ctx, `SELECT slot_name::text, active_pid FROM pg_replication_slots WHERE database = $1`, database)
		if err != nil {
			return fmt.Errorf("list the replication slots on %s: %w", database, err)
		}
		type slot struct {
			name string
			pid  *int32
		}
		slots, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (slot, error) {
			var s slot
			return s, r.Scan(&s.name, &s.pid)
		})
		if err != nil {
			return fmt.Errorf("list the replication slots on %s: %w", database, err)
		}
		var left []string
		for _, s := range slots {
			if s.pid != nil {
				_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, *s.pid)
			} else if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, s.name); err == nil {
				continue
			}
			left = append(left, s.name)
		}
		if len(left) > 0 {
			return fmt.Errorf("replication slots %s still on %s", strings.Join(left, ", "), database)
		}
		return nil
	})
}
