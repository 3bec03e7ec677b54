package inventory

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/message"
)

// outcome is what the transaction did with one valid delivery.
type outcome int

const (
	outcomeNone      outcome = iota
	outcomeApplied           // inbox row inserted, effect applied (reservations)
	outcomeDuplicate         // inbox row already there: no effect
	outcomeHeldBack          // inbox row inserted, event parked ahead of its predecessor
)

// item is one delivery of a batch and what became of it.
type item struct {
	d      amqp.Delivery
	ev     message.Event
	poison error // set when the message can never be processed: dead-lettered

	// Set by the transaction; reset before every attempt.
	fresh    bool          // its inbox row was inserted by this transaction
	outcome  outcome       // what the effect step did
	reserved []reservation // reservations made, in order (its own and unparked successors)
	note     string        // detail for the log line of a duplicate or a held-back event
}

// reservation is one reservation row written by the transaction.
type reservation struct {
	ev   message.Event
	note string
}

func (it *item) reset() {
	it.fresh, it.outcome, it.reserved, it.note = false, outcomeNone, nil, ""
}

// steps are the stages a batch goes through. The handler fixes their order:
//
//	receive → crash point after-receive → dead-letter poison →
//	BEGIN → recordInbox → applyEffects (the fresh items) →
//	crash point before-commit → commit (COMMIT) →
//	log results → crash point after-commit → ack
//
// correctSteps is the reference pipeline. A deliberately broken variant is a
// type embedding correctSteps that overrides the one method whose guard it
// removes (see the package documentation).
type steps interface {
	// receive parses and validates every delivery of the batch and logs
	// them as delivered, in one write.
	receive(ctx context.Context, b []*item)
	// recordInbox claims each valid item's eventId in the inbox inside tx
	// and sets item.fresh; the items are in delivery order.
	recordInbox(ctx context.Context, tx pgx.Tx, items []*item) error
	// applyEffects applies the fresh items inside tx; they are in
	// delivery order.
	applyEffects(ctx context.Context, tx pgx.Tx, items []*item) error
	// commit commits tx. An error means the batch is not done: its outcome
	// is unknown (the connection may have been cut with the COMMIT in
	// flight), so it is not acked; the handler runs the transaction again
	// (the inbox absorbs it if the first one did commit) or gives it up
	// unacked for the broker to redeliver.
	commit(ctx context.Context, tx pgx.Tx, items []*item) error
	// ack acknowledges the items after their transaction committed.
	ack(ctx context.Context, items []*item)
	// deadLetter hands the poison items (never processable) to the
	// queue's dead-letter exchange.
	deadLetter(items []*item)
}

// correctSteps keeps every guard: inbox row and effect in one transaction,
// ack only after commit.
type correctSteps struct {
	st  *store
	log *eventlog.Log
}

var _ steps = correctSteps{}

func (s correctSteps) receive(_ context.Context, b []*item) {
	entries := make([]eventlog.Entry, 0, len(b))
	for _, it := range b {
		ev, err := message.Parse(it.d.Body)
		if err == nil {
			err = storable(ev)
		}
		it.ev, it.poison = ev, err
		id := ev.EventID
		if id == "" {
			id = it.d.MessageId
		}
		entries = append(entries, eventlog.Entry{
			Event: eventlog.Delivered, EventID: id, Redelivered: it.d.Redelivered,
			AggregateID: ev.AggregateID, Sequence: ev.Sequence,
		})
	}
	s.log.Batch(entries)
}

func (s correctSteps) recordInbox(ctx context.Context, tx pgx.Tx, items []*item) error {
	return s.st.recordInbox(ctx, tx, items)
}

// applyEffects reserves stock for the fresh items, in delivery order and in
// per-aggregate order: an event ahead of its aggregate's version is parked
// (held back), and applying an event also applies every parked successor
// that is now next, whether parked earlier or earlier in this batch. Three
// round trips whatever the batch size: lock the aggregates and read their
// parked events, plan in memory, write.
func (s correctSteps) applyEffects(ctx context.Context, tx pgx.Tx, items []*item) error {
	if len(items) == 0 {
		return nil
	}
	ids := make([]string, 0, len(items))
	for _, it := range items {
		ids = append(ids, it.ev.AggregateID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	aggs, err := s.st.lockAggregates(ctx, tx, ids)
	if err != nil {
		return err
	}
	var e effects
	var held []*item             // held back by this batch, to be parked
	unparked := map[*item]bool{} // held back by this batch, then applied by it
	for _, it := range items {
		ev, a := it.ev, aggs[it.ev.AggregateID]
		switch {
		case ev.Sequence > a.last+1:
			it.outcome = outcomeHeldBack
			it.note = fmt.Sprintf("waiting for sequence %d", a.last+1)
			if _, taken := a.parked[ev.Sequence]; taken {
				it.note = fmt.Sprintf("sequence %d already parked by another event; %s", ev.Sequence, it.note)
				continue
			}
			a.parked[ev.Sequence] = parked{ev: ev, it: it}
			held = append(held, it)
		case ev.Sequence <= a.last:
			// Behind the aggregate's version, yet its inbox row was new: the
			// inbox no longer remembers it (a replay older than the
			// retention) or it is another event reusing an applied sequence.
			// The inbox is the only duplicate guard, so it is applied,
			// without moving the version; the reservation row makes the
			// breach visible to the checker.
			it.outcome = outcomeApplied
			e.reserve = append(e.reserve, ev)
			it.reserved = append(it.reserved, reservation{ev: ev,
				note: fmt.Sprintf("sequence %d is behind the applied version %d (replay past the inbox)", ev.Sequence, a.last)})
		default:
			it.outcome = outcomeApplied
			e.reserve = append(e.reserve, ev)
			it.reserved = append(it.reserved, reservation{ev: ev})
			a.last, a.changed = ev.Sequence, true
			for {
				next, ok := a.parked[a.last+1]
				if !ok {
					break
				}
				delete(a.parked, a.last+1)
				if next.it != nil {
					unparked[next.it] = true
				} else {
					e.unpark = append(e.unpark, next.ev)
				}
				e.reserve = append(e.reserve, next.ev)
				it.reserved = append(it.reserved, reservation{ev: next.ev, note: "unparked after " + ev.EventID})
				a.last = next.ev.Sequence
			}
		}
	}
	for _, it := range held {
		if !unparked[it] {
			e.park = append(e.park, it)
		}
	}
	for _, id := range ids {
		if a := aggs[id]; a.changed {
			e.versions = append(e.versions, versionSet{aggregateID: id, last: a.last})
		}
	}
	return s.st.write(ctx, tx, &e)
}

// commit is the transaction's COMMIT; its error goes back to the handler,
// which never acks a batch whose commit failed.
func (correctSteps) commit(ctx context.Context, tx pgx.Tx, _ []*item) error {
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// ack acknowledges the items after their commit. When their delivery tags
// are one unbroken run, a single basic.ack with multiple covers them all
// (every earlier delivery of the channel is already settled: batches are
// handled in order, and a batch that fails ends the channel), which spares
// the broker one settlement per message; otherwise each is acked alone.
func (s correctSteps) ack(_ context.Context, items []*item) {
	entries := make([]eventlog.Entry, 0, len(items))
	if last, ok := contiguousTags(items); ok {
		var failed error
		if err := last.Ack(true); err != nil {
			failed = err
		}
		for _, it := range items {
			entries = append(entries, ackEntry(it, failed))
		}
		s.log.Batch(entries)
		return
	}
	for _, it := range items {
		entries = append(entries, ackEntry(it, it.d.Ack(false)))
	}
	s.log.Batch(entries)
}

// ackEntry is the log line of one item's ack.
func ackEntry(it *item, err error) eventlog.Entry {
	if err != nil {
		// The channel is gone: the broker redelivers, the inbox absorbs it.
		return eventlog.Entry{Event: eventlog.ErrorOccurred, EventID: it.ev.EventID, Error: fmt.Sprintf("ack: %v (the broker will redeliver)", err)}
	}
	return eventlog.Entry{Event: eventlog.Acked, EventID: it.ev.EventID}
}

// contiguousTags returns the delivery with the highest tag when the items'
// tags are exactly first..first+len-1 on one channel, with more than one item.
func contiguousTags(items []*item) (amqp.Delivery, bool) {
	if len(items) < 2 {
		return amqp.Delivery{}, false
	}
	lo, hi := items[0], items[0]
	seen := make(map[uint64]bool, len(items))
	for _, it := range items {
		if it.d.Acknowledger != items[0].d.Acknowledger || seen[it.d.DeliveryTag] {
			return amqp.Delivery{}, false
		}
		seen[it.d.DeliveryTag] = true
		if it.d.DeliveryTag < lo.d.DeliveryTag {
			lo = it
		}
		if it.d.DeliveryTag > hi.d.DeliveryTag {
			hi = it
		}
	}
	if hi.d.DeliveryTag-lo.d.DeliveryTag != uint64(len(items)-1) {
		return amqp.Delivery{}, false
	}
	return hi.d, true
}

// storable rejects a parsed event that PostgreSQL would refuse to store, so
// it is dead-lettered instead of failing its batch's transaction forever.
func storable(ev message.Event) error {
	fields := []struct {
		name, v string
		max     int
	}{
		{"eventId", ev.EventID, 64},
		{"eventType", ev.EventType, 128},
		{"orderId", ev.OrderID, 64},
		{"aggregateId", ev.AggregateID, 64},
		{"currency", ev.Currency, 3},
	}
	for _, f := range fields {
		if n := utf8.RuneCountInString(f.v); n > f.max {
			return fmt.Errorf("%w: event %s: %s is %d characters, at most %d", message.ErrPoison, ev.EventID, f.name, n, f.max)
		}
		if strings.ContainsRune(f.v, 0) {
			return fmt.Errorf("%w: event %s: %s contains a NUL character", message.ErrPoison, ev.EventID, f.name)
		}
	}
	if ev.Sequence < 1 {
		return fmt.Errorf("%w: event %s: sequence %d, want >= 1", message.ErrPoison, ev.EventID, ev.Sequence)
	}
	if !fitsNumeric18_2(string(ev.Amount)) {
		return fmt.Errorf("%w: event %s: amount %s does not fit numeric(18,2)", message.ErrPoison, ev.EventID, ev.Amount)
	}
	return nil
}

// fitsNumeric18_2 reports whether a JSON number fits numeric(18,2): fewer
// than 16 digits before the point. (At the very edge float64 rounding may
// let through a value PostgreSQL refuses; the handler then isolates it.)
func fitsNumeric18_2(n string) bool {
	f, err := strconv.ParseFloat(n, 64)
	return err == nil && math.Abs(f) < 1e16
}
