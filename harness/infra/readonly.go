package infra

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TxBeginner is what ReadOnly needs of a database: a *pgxpool.Pool, a
// *pgx.Conn.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// sqlReadOnlyTransaction is PostgreSQL's error code for a write refused
// in a READ ONLY transaction.
const sqlReadOnlyTransaction = "25006"

// ReadOnly runs read in a READ ONLY transaction on db and rolls it back.
// Every contract query faultline runs from a target file (facts, effects,
// outbox, held_back, inbox, payload) runs this way: the file is input from
// outside, and a write in one of them (a DELETE inside a CTE, a DROP TABLE)
// must be refused by PostgreSQL rather than change the run's tables under
// the checker. The one contract statement that writes by design,
// inbox_expire, does not come through here. A refused write comes back
// with a sentence saying why; read's own error names the query.
func ReadOnly(ctx context.Context, db TxBeginner, read func(tx pgx.Tx) error) error {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin a read-only transaction: %w", err)
	}
	// Nothing is kept: a read-only transaction has nothing to commit, and
	// the rollback must run even when ctx is done.
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // see above
	if err := read(tx); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == sqlReadOnlyTransaction {
			return fmt.Errorf("%w (contract queries run in a read-only transaction: they may read the tables, not change them)", err)
		}
		return err
	}
	return nil
}
