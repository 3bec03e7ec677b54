package observe

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/target"
)

func init() {
	addSource(source{name: history.SourceOutbox, when: AtEnd,
		offered: func(t *target.Target, _ map[string]bool) bool { return t.Contract.Outbox != nil }})
}

// ReadContract reads the target's tables through the contract's queries
// (facts, effects, and the outbox, pending, inbox_pending and held_back
// where it has them) into o,
// each in a read-only transaction on the run's databases (db: the target's
// database name → a pool on the run's copy).
// model is the relay's (history.ModelClaim, ...): a claim relay's outbox
// query must give each row's status; another's may.
func ReadContract(ctx context.Context, db map[string]*pgxpool.Pool, c target.Contract, model string, o *history.Record) error {
	var err error
	if o.Facts, err = readFacts(ctx, db, c.Facts); err != nil {
		return err
	}
	if o.Effects, err = readEffects(ctx, db, c.Effects); err != nil {
		return err
	}
	if q := c.Outbox; q != nil {
		withStatus, err := outboxHasStatus(ctx, db, model, *q)
		if err != nil {
			return err
		}
		o.NoOutboxStatus = !withStatus
		if o.Outbox, err = readOutbox(ctx, db, model, *q, withStatus); err != nil {
			return err
		}
		if o.Outbox == nil {
			o.Outbox = []history.OutboxRow{}
		}
	}
	if q := c.Pending; q != nil {
		if o.Pending, err = readEventIDs(ctx, db, *q, "pending"); err != nil {
			return err
		}
		if o.Pending == nil {
			o.Pending = []string{}
		}
	}
	if q := c.InboxPending; q != nil {
		if o.InboxPending, err = readEventIDs(ctx, db, *q, "inbox_pending"); err != nil {
			return err
		}
		if o.InboxPending == nil {
			o.InboxPending = []string{}
		}
	}
	if q := c.HeldBack; q != nil {
		pool, err := poolFor(db, *q, "held_back")
		if err != nil {
			return err
		}
		err = infra.ReadOnly(ctx, pool, func(tx pgx.Tx) error {
			var n int
			if err := tx.QueryRow(ctx, q.SQL).Scan(&n); err != nil {
				return queryError("held_back", *q, err)
			}
			o.HeldBack = &n
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func poolFor(db map[string]*pgxpool.Pool, q target.Query, what string) (*pgxpool.Pool, error) {
	p, ok := db[q.Database]
	if !ok {
		return nil, fmt.Errorf("contract %s: no database %q in this run", what, q.Database)
	}
	return p, nil
}

func queryError(what string, q target.Query, err error) error {
	where := "default"
	if !q.Default {
		where = fmt.Sprintf("line %d", q.Line)
	}
	return fmt.Errorf("contract %s (%s, database %s): %w", what, where, q.Database, err)
}

// columns maps the named columns of a query's answer to their positions;
// required ones must be there.
func columns(rows pgx.Rows, what string, required, optional []string) (map[string]int, error) {
	idx := map[string]int{}
	var got []string
	for i, f := range rows.FieldDescriptions() {
		idx[f.Name] = i
		got = append(got, f.Name)
	}
	for _, c := range required {
		if _, ok := idx[c]; !ok {
			wanted := strings.Join(required, ", ")
			if len(optional) > 0 {
				wanted += ", optional " + strings.Join(optional, ", ")
			}
			return nil, fmt.Errorf("contract %s: the query returns no column %q (it returns %s; wanted %s)",
				what, c, strings.Join(got, ", "), wanted)
		}
	}
	return idx, nil
}

// scanAll reads every row of q, in a read-only transaction, as text-ish
// values by column.
func scanAll(ctx context.Context, pool *pgxpool.Pool, q target.Query, what string, required, optional []string, each func(get func(col string) any) error, args ...any) error {
	return infra.ReadOnly(ctx, pool, func(tx pgx.Tx) error {
		return scanRows(ctx, tx, q, what, required, optional, each, args...)
	})
}

func scanRows(ctx context.Context, tx pgx.Tx, q target.Query, what string, required, optional []string, each func(get func(col string) any) error, args ...any) error {
	rows, err := tx.Query(ctx, q.SQL, args...)
	if err != nil {
		return queryError(what, q, err)
	}
	defer rows.Close()
	idx, err := columns(rows, what, required, optional)
	if err != nil {
		// A query PostgreSQL refused (a write in a read-only transaction)
		// has no columns either: its own error says more.
		rows.Close()
		if qerr := rows.Err(); qerr != nil {
			return queryError(what, q, qerr)
		}
		return err
	}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return queryError(what, q, err)
		}
		get := func(col string) any {
			i, ok := idx[col]
			if !ok {
				return nil
			}
			return vals[i]
		}
		if err := each(get); err != nil {
			return fmt.Errorf("contract %s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return queryError(what, q, err)
	}
	return nil
}

func asString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	case [16]byte:
		// A uuid column (pgx gives its 16 bytes): its text form, as a
		// ::text cast and the producer's answers give it.
		return pgtype.UUID{Bytes: x, Valid: true}.String()
	default:
		return fmt.Sprint(x)
	}
}

func asInt(v any, def int64) (int64, error) {
	switch x := v.(type) {
	case nil:
		return def, nil
	case int64:
		return x, nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int:
		return int64(x), nil
	default:
		return 0, fmt.Errorf("want an integer, got %T %v", v, v)
	}
}

func asBool(v any) bool {
	b, _ := v.(bool)
	return b
}

func readFacts(ctx context.Context, db map[string]*pgxpool.Pool, q target.Query) ([]history.Fact, error) {
	pool, err := poolFor(db, q, "facts")
	if err != nil {
		return nil, err
	}
	var out []history.Fact
	err = scanAll(ctx, pool, q, "facts", []string{"aggregate_id"}, []string{"sequence", "event_id"}, func(get func(string) any) error {
		seq, err := asInt(get("sequence"), 1)
		if err != nil {
			return fmt.Errorf("column sequence: %w", err)
		}
		out = append(out, history.Fact{AggregateID: asString(get("aggregate_id")), Sequence: seq, EventID: asString(get("event_id"))})
		return nil
	})
	return out, err
}

func readEffects(ctx context.Context, db map[string]*pgxpool.Pool, q target.Query) ([]history.Effect, error) {
	pool, err := poolFor(db, q, "effects")
	if err != nil {
		return nil, err
	}
	var out []history.Effect
	err = scanAll(ctx, pool, q, "effects", []string{"event_id", "aggregate_id"}, []string{"sequence", "event_type"}, func(get func(string) any) error {
		seq, err := asInt(get("sequence"), 1)
		if err != nil {
			return fmt.Errorf("column sequence: %w", err)
		}
		out = append(out, history.Effect{ID: int64(len(out) + 1), EventID: asString(get("event_id")), AggregateID: asString(get("aggregate_id")), Sequence: seq, EventType: asString(get("event_type"))})
		return nil
	})
	return out, err
}

// readOutbox reads the contract's outbox query; withStatus: its rows carry
// the article's status (required of a claim relay's).
func readOutbox(ctx context.Context, db map[string]*pgxpool.Pool, model string, q target.Query, withStatus bool) ([]history.OutboxRow, error) {
	pool, err := poolFor(db, q, "outbox")
	if err != nil {
		return nil, err
	}
	out := []history.OutboxRow{}
	statuses := target.ArticleStatuses()
	required, optional := []string{"event_id", "aggregate_id"}, []string{"sequence", "published", "attempts", "last_error"}
	if withStatus {
		required = append(required, "status")
	} else {
		optional = append(optional, "status")
	}
	what := "outbox"
	if model == history.ModelClaim {
		what = "outbox (a claim relay's: its rows' status is required)"
	}
	err = scanAll(ctx, pool, q, what, required, optional, func(get func(string) any) error {
		seq, err := asInt(get("sequence"), 1)
		if err != nil {
			return fmt.Errorf("column sequence: %w", err)
		}
		attempts, err := asInt(get("attempts"), 0)
		if err != nil {
			return fmt.Errorf("column attempts: %w", err)
		}
		r := history.OutboxRow{EventID: asString(get("event_id")), AggregateID: asString(get("aggregate_id")), Sequence: seq,
			Status: asString(get("status")), Attempts: int(attempts), LastError: asString(get("last_error"))}
		if v := get("published"); v != nil {
			r.Published = asBool(v)
		} else {
			r.Published = r.Status == "Published"
		}
		if withStatus && !slices.Contains(statuses, r.Status) {
			return fmt.Errorf("row %s: status %q: want one of %s (map yours with CASE in the query)", r.EventID, r.Status, strings.Join(statuses, ", "))
		}
		out = append(out, r)
		return nil
	})
	return out, err
}
