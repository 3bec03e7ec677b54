package fault

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/target"
)

// effectWriters selects, from pg_stat_activity, the sessions of one
// process (application_name $1, as faultline names the process's
// connections) that are in a transaction which has run an INSERT, UPDATE
// or DELETE on the watched effects table (regclass $2): the statement took
// the table's RowExclusiveLock, held to the transaction's end. Failing such
// a transaction can lose an effect; one that only read, locked rows or
// wrote elsewhere — a batch of redeliveries whose effects exist, in a
// consumer that skips them — cannot. The lock is taken by the statement,
// not by a changed row: a consumer whose effect write is an INSERT … ON
// CONFLICT DO NOTHING for duplicates still shows it, and is judged as
// before this condition.
const effectWriters = `FROM pg_stat_activity a WHERE a.application_name = $1 AND a.datname = current_database()
	AND a.backend_xid IS NOT NULL AND a.state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')
	AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.relation = to_regclass($2) AND l.mode = 'RowExclusiveLock' AND l.granted)`

// effectsTable is the watched effects table (observe.effects): the pool
// of its database and its name as to_regclass reads it. ok is false,
// with why, where this run cannot look at it (no such database, no such
// table).
func effectsTable(ctx context.Context, env *Env) (pool *pgxpool.Pool, regclass string, ok bool, why string, err error) {
	effects := env.Observe.Effects
	pool, found := env.DB[effects.Database]
	if !found || effects.Name == "" {
		return nil, "", false, fmt.Sprintf("no database %q in this run", effects.Database), nil
	}
	regclass = pgx.Identifier(target.Ident(effects.Name)).Sanitize()
	var exists *string
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1)::text`, regclass).Scan(&exists); err != nil {
		return nil, "", false, "", fmt.Errorf("look up table %s: %w", effects.Name, err)
	}
	if exists == nil {
		return nil, "", false, fmt.Sprintf("table %s does not exist in database %s (give observe.effects in the target file)", effects.Name, effects.Database), nil
	}
	return pool, regclass, true, "", nil
}
