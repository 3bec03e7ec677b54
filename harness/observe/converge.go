package observe

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
)

// Progress samples the pipeline once: the outbox rows not yet settled,
// the events a consumer has taken in and not applied (inbox_pending) and
// the effects, through the contract's queries, and the target queue's
// depth. events is how many events the workload was answered for: where
// the target shows no backlog of its relay, that many effects are
// expected (history.Progress.Expected).
func (w *Watch) Progress(ctx context.Context, events int) (history.Progress, error) {
	p := history.Progress{Queue: w.run.Target.Topology.Queue}
	unsettled, shown, err := w.unsettled(ctx)
	if err != nil {
		return p, err
	}
	p.Unsettled = unsettled
	if !shown {
		p.Expected = events
	}
	if q := w.run.Target.Contract.InboxPending; q != nil {
		if p.InboxPending, err = countRows(ctx, w.run.DB, *q, "inbox_pending", ""); err != nil {
			return p, err
		}
	}
	if p.Effects, p.Effected, err = w.countEffects(ctx); err != nil {
		return p, err
	}
	if p.SlotBehind, err = w.slotBehind(ctx); err != nil {
		return p, err
	}
	info, err := w.Queue(ctx, w.run.Target.Topology.Queue)
	if err != nil {
		return p, err
	}
	p.Ready, p.Unacked = info.Ready, info.Unacked
	return p, nil
}

// slotBehind counts, for a log relay, the committed outbox rows whose
// insert's WAL position (the audit trail's) is at or past its slot's
// confirmed position: 0 for other relays, without an audit trail, and
// where the outbox's database holds no one logical slot that confirmed
// anything yet (the checks at the end say why).
func (w *Watch) slotBehind(ctx context.Context) (int, error) {
	if w.run.Target.Relay.Model != history.ModelLog || !w.audit {
		return 0, nil
	}
	pool, ok := w.run.DB[w.run.Target.Observe.Outbox.Database]
	if !ok {
		return 0, nil
	}
	slot, ok, err := infra.RelaySlot(ctx, pool)
	if err != nil || !ok {
		return 0, err
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM faultline_audit WHERE op = 'INSERT' AND lsn >= $1::pg_lsn`, slot.Confirmed).Scan(&n); err != nil {
		return 0, fmt.Errorf("outbox rows past the relay's slot: %w", err)
	}
	return n, nil
}

// Effects counts the effects through the contract's effects query.
func (w *Watch) Effects(ctx context.Context) (int, error) {
	n, _, err := w.countEffects(ctx)
	return n, err
}

// countEffects counts the contract's effect rows and the distinct events among
// them (its event_id column, which the contract requires).
func (w *Watch) countEffects(ctx context.Context) (rows, events int, err error) {
	q := w.run.Target.Contract.Effects
	pool, err := poolFor(w.run.DB, q, "effects")
	if err != nil {
		return 0, 0, err
	}
	err = infra.ReadOnly(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id::text) FROM (`+q.SQL+`) AS effects`).Scan(&rows, &events); err != nil {
			return queryError("effects", q, err)
		}
		return nil
	})
	return rows, events, err
}
