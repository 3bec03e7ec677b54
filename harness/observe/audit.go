package observe

import (
	"context"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/target"
)

func init() {
	outboxWatched := func(t *target.Target, _ map[string]bool) bool { return t.Observe.Outbox.Name != "" }
	addSource(source{name: history.SourceAudit, when: Live, offered: outboxWatched, record: (*Watch).recordAudit})
	addSource(source{name: history.SourceAuditStatus, when: Derived,
		offered: func(t *target.Target, logs map[string]bool) bool {
			return outboxWatched(t, logs) && t.Observe.Outbox.Status != ""
		}})
}

// recordAudit reads the whole audit trail, where its trigger was
// installed.
func (w *Watch) recordAudit(ctx context.Context, o *history.Record) error {
	if !w.audit {
		return nil
	}
	rows, err := w.Audit(ctx, 0)
	if err != nil {
		return err
	}
	o.Audit = &history.AuditTrail{Rows: rows, Lease: w.leased, NoStatus: w.run.Target.Observe.Outbox.Status == ""}
	return nil
}

// Audit reads the outbox's audit trail, in the order the writes were
// made: the rows with an id above after (0: all of it).
func (w *Watch) Audit(ctx context.Context, after int64) ([]history.AuditRow, error) {
	outbox := w.run.Target.Observe.Outbox
	pool := w.run.DB[outbox.Database]
	rows, err := pool.Query(ctx, `SELECT id, at, began, writer, op, coalesce(event_id, ''), coalesce(old_status, ''), coalesce(new_status, ''), coalesce(old_claim, ''), coalesce(new_claim, ''), new_due, new_lease, (lsn - '0/0'::pg_lsn)::bigint FROM faultline_audit WHERE id > $1 ORDER BY id`, after)
	if err != nil {
		return nil, fmt.Errorf("audit trail: %w", err)
	}
	defer rows.Close()
	var out []history.AuditRow
	for rows.Next() {
		var a history.AuditRow
		var due, lease *time.Time
		if err := rows.Scan(&a.ID, &a.At, &a.Began, &a.Writer, &a.Op, &a.EventID, &a.OldStatus, &a.NewStatus, &a.OldClaim, &a.NewClaim, &due, &lease, &a.LSN); err != nil {
			return nil, fmt.Errorf("audit trail: %w", err)
		}
		if due != nil {
			a.Due = *due
		}
		if lease != nil {
			a.Lease = *lease
		}
		a.OldStatus, a.NewStatus = outbox.ArticleStatus(a.OldStatus), outbox.ArticleStatus(a.NewStatus)
		out = append(out, a)
	}
	return out, rows.Err()
}
