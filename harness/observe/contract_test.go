package observe

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeDB records how transactions are begun and ended.
type fakeDB struct {
	opts []pgx.TxOptions
	tx   *fakeTx
}

func (db *fakeDB) BeginTx(_ context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	db.opts = append(db.opts, opts)
	db.tx = &fakeTx{}
	return db.tx, nil
}

// fakeTx is a pgx.Tx whose only used methods are Commit and Rollback.
type fakeTx struct {
	pgx.Tx
	rolledBack, committed bool
	rollbackCtxErr        error
}

func (tx *fakeTx) Rollback(ctx context.Context) error {
	tx.rolledBack, tx.rollbackCtxErr = true, ctx.Err()
	return nil
}

func (tx *fakeTx) Commit(context.Context) error {
	tx.committed = true
	return nil
}

// Every contract query runs read-only and is rolled back, whatever the
// query does; a write PostgreSQL refuses says why, with the query's name.
func TestReadOnly(t *testing.T) {
	refused := &pgconn.PgError{Code: "25006", Message: "cannot execute DELETE in a read-only transaction"}
	q := target.Query{Database: "orders", SQL: "WITH d AS (DELETE FROM orders RETURNING 1) SELECT 1", Line: 12}
	tests := []struct {
		name    string
		read    error // what the query gives
		wantErr []string
	}{
		{"a read", nil, nil},
		{"a refused write", queryError("facts", q, refused), []string{"contract facts (line 12, database orders)", "cannot execute DELETE in a read-only transaction", "SQLSTATE 25006", "contract queries run in a read-only transaction"}},
		{"another error", queryError("facts", q, errors.New("relation \"nope\" does not exist")), []string{"contract facts (line 12, database orders)", "nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			db := &fakeDB{}
			err := infra.ReadOnly(ctx, db, func(tx pgx.Tx) error {
				require.Same(t, db.tx, tx, "the query runs in the read-only transaction")
				return tt.read
			})
			cancel()
			require.Len(t, db.opts, 1)
			assert.Equal(t, pgx.ReadOnly, db.opts[0].AccessMode)
			assert.True(t, db.tx.rolledBack, "rolled back")
			assert.NoError(t, db.tx.rollbackCtxErr, "rolled back on a live context")
			assert.False(t, db.tx.committed)
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.Contains(t, err.Error(), want)
			}
			assert.ErrorIs(t, err, tt.read, "the query's own error is kept")
		})
	}
}

// asString gives a contract column's value as text: a uuid column (16
// bytes from pgx) in the form a ::text cast gives, so that its ids match
// the producer's answers.
func TestAsString(t *testing.T) {
	u := [16]byte{0x6f, 0xa3, 0xdb, 0x1c, 0x40, 0xd6, 0x62, 0x6d, 0x8e, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{nil, ""},
		{"A-1", "A-1"},
		{[]byte("x"), "x"},
		{int64(12345678901230), "12345678901230"},
		{u, "6fa3db1c-40d6-626d-8e01-23456789abcd"},
	} {
		assert.Equal(t, tc.want, asString(tc.v))
	}
}
