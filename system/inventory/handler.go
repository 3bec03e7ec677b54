package inventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/crashpoint"
)

// txTimeout bounds one transaction attempt. It does not follow the process
// context: on SIGTERM the transaction in flight finishes, then the consumer
// stops.
const txTimeout = 30 * time.Second

// errAbandoned: the batch was given up before it committed (shutdown, or the
// AMQP channel died while the database was unavailable). Its deliveries are
// not acked, so the broker redelivers them.
var errAbandoned = errors.New("batch abandoned before commit; its deliveries will be redelivered")

// handler processes batches of deliveries; one goroutine calls handle.
type handler struct {
	pool     *pgxpool.Pool
	steps    steps
	log      *eventlog.Log
	points   *crashpoint.Set
	retryMax time.Duration
	dbUp     *atomic.Bool // health of PostgreSQL as the handler last saw it
}

// handle runs one batch through the steps. lost is closed when the AMQP
// channel the deliveries came on has closed.
func (h *handler) handle(ctx context.Context, lost <-chan struct{}, ds []amqp.Delivery) error {
	batch := make([]*item, len(ds))
	for i := range ds {
		batch[i] = &item{d: ds[i]}
	}
	h.steps.receive(ctx, batch)
	h.points.Hit(crashpoint.InventoryAfterReceive)

	var valid, poison []*item
	for _, it := range batch {
		if it.poison != nil {
			poison = append(poison, it)
		} else {
			valid = append(valid, it)
		}
	}
	h.steps.deadLetter(poison)
	if len(valid) == 0 {
		return nil
	}
	committed, err := h.commit(ctx, lost, valid)
	if err != nil || len(committed) == 0 {
		return err
	}
	h.logResults(committed)
	h.points.Hit(crashpoint.InventoryAfterCommit)
	h.steps.ack(ctx, committed)
	return nil
}

// commit runs the batch's transaction until it commits, retrying transient
// failures with backoff. If the data of one event makes the transaction fail
// for good, each item is retried in a transaction of its own and the one that
// still fails is dead-lettered, so it cannot block the queue. It returns the
// items that committed.
func (h *handler) commit(ctx context.Context, lost <-chan struct{}, items []*item) ([]*item, error) {
	err := h.commitRetrying(ctx, lost, items)
	if err == nil || errors.Is(err, errAbandoned) {
		return items, err
	}
	if len(items) == 1 {
		items[0].poison = err
		h.steps.deadLetter(items)
		return nil, nil
	}
	h.log.Errorf("batch of %d rejected by the database (%v); retrying each delivery alone", len(items), err)
	var ok, bad []*item
	for _, it := range items {
		switch err := h.commitRetrying(ctx, lost, []*item{it}); {
		case errors.Is(err, errAbandoned):
			// What committed so far stays committed and unacked: redelivered
			// and absorbed by the inbox.
			return nil, err
		case err != nil:
			it.poison = err
			bad = append(bad, it)
		default:
			ok = append(ok, it)
		}
	}
	h.steps.deadLetter(bad)
	return ok, nil
}

// commitRetrying retries transient failures; it returns nil once committed, a
// permanent error, or errAbandoned.
func (h *handler) commitRetrying(ctx context.Context, lost <-chan struct{}, items []*item) error {
	bo := newBackoff(50*time.Millisecond, h.retryMax)
	for attempt := 1; ; attempt++ {
		err := h.transact(ctx, items)
		if err == nil {
			if h.dbUp.CompareAndSwap(false, true) {
				h.log.Log(eventlog.Entry{Event: eventlog.Connected, Detail: "postgres"})
			}
			return nil
		}
		if permanent(err) {
			return err
		}
		if connectionError(err) && h.dbUp.CompareAndSwap(true, false) {
			h.log.Log(eventlog.Entry{Event: eventlog.Disconnected, Detail: "postgres", Error: err.Error()})
		} else if attempt&(attempt-1) == 0 { // attempts 1, 2, 4, 8, ...: a long outage does not flood the log
			h.log.Log(eventlog.Entry{Event: eventlog.ErrorOccurred, Attempt: attempt,
				Error: fmt.Sprintf("transaction of %d deliveries: %v (not acked; retrying)", len(items), err)})
		}
		t := time.NewTimer(bo.next())
		select {
		case <-ctx.Done():
			t.Stop()
			return errAbandoned
		case <-lost:
			t.Stop()
			return errAbandoned
		case <-t.C:
		}
	}
}

// transact is one attempt: BEGIN, record inbox, apply effects, crash point
// inventory.before-commit (where an effect was applied), COMMIT (the
// commit step). A failed COMMIT is an
// error like any other: commitRetrying runs the transaction again or gives
// the batch up, and nothing is acked.
func (h *handler) transact(ctx context.Context, items []*item) (err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), txTimeout)
	defer cancel()
	for _, it := range items {
		it.reset()
	}
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(ctx)
		}
	}()
	if err := h.steps.recordInbox(ctx, tx, items); err != nil {
		return err
	}
	fresh := make([]*item, 0, len(items))
	for _, it := range items {
		if it.fresh {
			fresh = append(fresh, it)
		}
	}
	if err := h.steps.applyEffects(ctx, tx, fresh); err != nil {
		return err
	}
	// The window is an effect applied and not committed: a transaction of
	// duplicates alone (a batch redelivered after its acks were lost)
	// applies none, and does not count as a hit.
	if len(fresh) > 0 {
		h.points.Hit(crashpoint.InventoryBeforeCommit)
	}
	return h.steps.commit(ctx, tx, items)
}

// logResults writes what the committed transaction did, in one write.
func (h *handler) logResults(items []*item) {
	var entries []eventlog.Entry
	for _, it := range items {
		ev := it.ev
		switch it.outcome {
		case outcomeDuplicate:
			entries = append(entries, eventlog.Entry{Event: eventlog.Duplicate, EventID: ev.EventID,
				AggregateID: ev.AggregateID, Sequence: ev.Sequence, Redelivered: it.d.Redelivered, Detail: "inbox row exists"})
		case outcomeHeldBack:
			entries = append(entries, eventlog.Entry{Event: eventlog.HeldBack, EventID: ev.EventID,
				AggregateID: ev.AggregateID, Sequence: ev.Sequence, Detail: it.note})
		case outcomeApplied:
			for _, r := range it.reserved {
				entries = append(entries, eventlog.Entry{Event: eventlog.Reserved, EventID: r.ev.EventID,
					AggregateID: r.ev.AggregateID, Sequence: r.ev.Sequence, Detail: r.note})
			}
		}
	}
	h.log.Batch(entries)
}

// deadLetter rejects items without requeue: the queue's dead-letter exchange
// routes them to the dead-letter queue.
func (s correctSteps) deadLetter(items []*item) { s.nackPoison(items, false) }

// nackPoison rejects each poison item without requeue; with multiple, each
// nack takes every earlier unacked delivery of the channel with it (the
// dead-letter-multiple variant).
func (s correctSteps) nackPoison(items []*item, multiple bool) {
	if len(items) == 0 {
		return
	}
	entries := make([]eventlog.Entry, 0, len(items))
	for _, it := range items {
		id := it.ev.EventID
		if id == "" {
			id = it.d.MessageId
		}
		e := eventlog.Entry{Event: eventlog.DeadLettered, EventID: id, Error: it.poison.Error()}
		if it.d.MessageId != "" {
			e.Detail = "messageId=" + strconv.Quote(it.d.MessageId)
		}
		if err := it.d.Nack(multiple, false); err != nil {
			e = eventlog.Entry{Event: eventlog.ErrorOccurred, EventID: id,
				Error: fmt.Sprintf("dead-letter (%v): nack: %v (the broker will redeliver)", it.poison, err)}
		}
		entries = append(entries, e)
	}
	s.log.Batch(entries)
}
