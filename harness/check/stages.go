package check

import (
	"fmt"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// placer places each committed event that has no effect at the stage of
// the pipeline where the run's end state shows it stopped. It reads the
// outbox, the target's queue at the end, the tap queue, the event logs, the
// audit trail and the spans the queue was unbound, each indexed once.
//
// The rules, first match wins (the furthest an event can still get from
// where it is):
//
//   - still-in-inbox: the contract's inbox_pending query lists it at the
//     end: the consumer took it in and stored it, and still has it to
//     apply (a consumer that applies its inbox later, by a poller). The
//     target says it still has it, so it is not lost.
//   - still-queued: a message of it is in the target's queue at the end
//     (read after the processes stopped, so unacked ones are back). Without
//     that read, a queue the broker says is not empty places it unknown.
//   - skipped, moved past: its outbox row is still Pending, and a row after
//     it in the outbox query's order (the contract orders it as the relay
//     reads it: occurred_at, or the id) was published. The run is checked
//     after the convergence wait, with the relays up (a process down makes
//     the run indeterminate), so a relay that reads by position has moved
//     past a row it will never publish: the commit-order window.
//   - still-in-outbox: its outbox row is Processing, or Pending with no
//     published row after it: a relay may still publish it. Or, on a log
//     relay, its insert is at or past the slot's confirmed position at the
//     end (the audit trail keeps each insert's WAL position, and its
//     commit comes later): the slot has not streamed it.
//   - dead-lettered: a message of it is in the dead-letter queue at the
//     end (read there, by its MessageId): the consumer rejected it, or the
//     queue's delivery limit sent it there. It is lost all the same (it
//     never took effect), but the place says where to look.
//   - consumed-without-effect: it reached the consumer's queue and left it:
//     the consumer's event log says it was delivered or, without one, it
//     was routed to the tap queue (bound with the queue's routing keys and
//     unbound before it, bound again after it, so what reached the tap
//     reached the queue), or a relay logged its positive confirm, no return
//     came and the queue was never unbound (the broker routed it, and the
//     queue was bound all along). With none of these it is unknown.
//   - dropped-by-delivery-limit: it reached a queue that drops a message
//     past its x-delivery-limit (no dead-letter exchange) and left it
//     without effect: the consumer logged it delivered as many times as
//     the limit, or logs its acks and never acked it (a delivery it held
//     when it died is returned, counted and redelivered without its
//     consumer ever logging it).
//   - routed-nowhere: it never reached the queue, and the broker returned
//     it as unroutable (a relay logged the return), or it was published
//     while the queue was unbound: a relay's published line, its
//     claim-to-Published span in the audit trail, or its publish as the
//     broker's firehose copied it (Routed), inside an unbound span; or it
//     was published and the tap, bound whenever the target's queue is,
//     never saw it. With the queue unbound at some time and none of
//     these, it is unknown.
//   - skipped: it never reached the queue, was not published while the
//     queue was unbound, and the outbox has no pending row for it (settled,
//     or none at all), or a log relay's slot confirmed a position past its
//     insert: the relay moved past it without the broker ever taking it.
//     Without an outbox query or a slot position it is unknown (it may be
//     pending).
//
// never-committed is not placed here: an event without a committed fact is
// never expected to take effect, and the workload keeps no eventIds of its
// own to miss.
type placer struct {
	o          *history.Record
	outbox     map[string]string // eventId → outbox status
	pending    map[string]bool   // beyond an offset relay's position (the pending query)
	inbox      map[string]bool   // taken in, not applied yet (the inbox_pending query)
	passed     map[string]bool   // Pending, with a Published row after it
	delivered  map[string]bool   // a consumer logged its delivery
	deliveries map[string]int    // how many times a consumer logged its delivery
	returned   map[string]bool   // a relay logged its return
	confirmed  map[string]bool   // a relay logged a positive confirm
	acked      map[string]bool   // a consumer logged its ack
	published  map[string][]time.Time
	// marked: per eventId, the spans from a claim to the Published write
	// after it, from the audit trail (read only if the queue was unbound).
	marked map[string][]history.Interval
	// A log relay's slot against each outbox insert (the audit trail's
	// insert position): ahead, the slot has not streamed it yet; behind,
	// its confirmed position passed it.
	slotAhead, slotPassed map[string]bool
}

func newPlacer(o *history.Record) *placer {
	p := &placer{o: o, outbox: make(map[string]string, len(o.Outbox)), delivered: map[string]bool{}, deliveries: map[string]int{}, returned: map[string]bool{},
		confirmed: map[string]bool{}, acked: map[string]bool{},
		published: map[string][]time.Time{}, marked: map[string][]history.Interval{}}
	for _, r := range o.Outbox {
		p.outbox[r.EventID] = r.Status
	}
	p.passed = movedPast(o.Outbox)
	p.pending = make(map[string]bool, len(o.Pending))
	for _, id := range o.Pending {
		p.pending[id] = true
	}
	p.inbox = make(map[string]bool, len(o.InboxPending))
	for _, id := range o.InboxPending {
		p.inbox[id] = true
	}
	for _, e := range o.Log {
		switch e.Event {
		case eventlog.Delivered:
			p.delivered[e.EventID] = true
			p.deliveries[e.EventID]++
		case eventlog.Returned:
			p.returned[e.EventID] = true
		case eventlog.Confirmed:
			p.confirmed[e.EventID] = true
		case eventlog.Acked:
			p.acked[e.EventID] = true
		case eventlog.Published:
			p.published[e.EventID] = append(p.published[e.EventID], e.Time)
		}
	}
	p.slotAhead, p.slotPassed = map[string]bool{}, map[string]bool{}
	behind, passed := SlotPlaced(o)
	for _, id := range behind {
		p.slotAhead[id] = true
	}
	for _, id := range passed {
		p.slotPassed[id] = true
	}
	if len(o.Unbound) > 0 && o.Audit != nil {
		claimed := map[string]time.Time{}
		for _, a := range o.Audit.Writes() {
			switch {
			case a.NewStatus == "Processing":
				claimed[a.EventID] = a.At
			case a.NewStatus == "Published" && a.OldStatus != "Published":
				from, ok := claimed[a.EventID]
				if !ok {
					from = a.At
				}
				p.marked[a.EventID] = append(p.marked[a.EventID], history.Interval{Start: from, End: a.At})
			}
		}
	}
	return p
}

// place is the stage of one committed event without effect.
func (p *placer) place(id string) result.Stage {
	o := p.o
	switch {
	case id == "":
		return result.StageUnknown // no eventId to trace it by
	case p.inbox[id]:
		return result.StageInInbox
	case o.Queued != nil && o.Queued[id] > 0:
		return result.StageQueued
	case o.Queued == nil && o.Queue.Messages+o.Queue.Unacked > 0:
		return result.StageUnknown
	case o.DeadLetter != nil && o.DeadLetter.ByEvent[id] > 0:
		return result.StageDeadLettered
	}
	if p.passed[id] {
		return result.StageSkipped
	}
	if status := p.outbox[id]; status == "Pending" || status == "Processing" || p.pending[id] || p.slotAhead[id] {
		return result.StageInOutbox
	}
	reached, known := p.reachedQueue(id)
	switch {
	case reached && o.Queue.DeliveryLimit > 0 && o.Queue.DeadLetterExchange == "" &&
		(p.deliveries[id] >= o.Queue.DeliveryLimit || len(p.acked) > 0 && !p.acked[id]):
		return result.StageDroppedAtLimit
	case reached:
		return result.StageConsumedNoEffect
	case !known:
		return result.StageUnknown
	case p.returned[id]:
		return result.StageRoutedNowhere
	}
	if len(o.Unbound) > 0 {
		unbound, known := p.publishedWhileUnbound(id)
		switch {
		case unbound:
			return result.StageRoutedNowhere
		case !known:
			return result.StageUnknown
		}
	}
	if !outboxSettles(o) && !p.slotPassed[id] {
		// No status, no pending query, no slot position past it: whether
		// a relay still has it to publish is not shown.
		return result.StageUnknown
	}
	// Its row settled (by its status, or the relay's position passed it),
	// or there is none: no relay will publish it.
	return result.StageSkipped
}

// movedPast are the Pending rows that a published row follows in the
// outbox query's order.
func movedPast(rows []history.OutboxRow) map[string]bool {
	out := map[string]bool{}
	later := false // a published row comes after the one at hand
	for i := len(rows) - 1; i >= 0; i-- {
		r := rows[i]
		if r.Status == "Pending" && later {
			out[r.EventID] = true
		}
		if r.Published || r.Status == "Published" {
			later = true
		}
	}
	return out
}

// reachedQueue says whether the event got into the target's queue, and
// whether the run shows it either way.
func (p *placer) reachedQueue(id string) (reached, known bool) {
	if p.o.HasLog("consumer") {
		if p.delivered[id] {
			return true, true
		}
		known = true
	}
	if p.o.Tap != nil {
		if p.o.Tap[id] > 0 {
			return true, true
		}
		known = true
	}
	if p.confirmed[id] && !p.returned[id] && len(p.o.Unbound) == 0 {
		return true, true
	}
	return false, known
}

// publishedWhileUnbound says whether the event was published while the
// queue was unbound, and whether the run shows it either way.
func (p *placer) publishedWhileUnbound(id string) (unbound, known bool) {
	if p.o.HasLog("relay") {
		for _, t := range p.published[id] {
			if p.unboundAt(t, t) {
				return true, true
			}
		}
		known = true
	}
	if p.o.Audit != nil {
		for _, iv := range p.marked[id] {
			if p.unboundAt(iv.Start, iv.End) {
				return true, true
			}
		}
		known = true
	}
	if p.o.Routed != nil {
		for _, at := range p.o.Routed[id] {
			// Copied a moment after the broker took it: inside an
			// unbound span, or, unseen by the tap, published while the
			// tap had no binding, which it has whenever the queue has one.
			if p.unboundAt(at, at) || p.o.Tap != nil && p.o.Tap[id] == 0 {
				return true, true
			}
		}
		known = true
	}
	return false, known
}

func (p *placer) unboundAt(from, to time.Time) bool {
	for _, iv := range p.o.Unbound {
		if overlaps(iv, from, to) {
			return true
		}
	}
	return false
}

// placed are the committed events without effect, by stage, each stage's
// eventIds in the order given.
type placed map[result.Stage][]string

// placeAll places every missing event (ids: its eventId, "" if none is
// known; labels: aggregate#sequence, which stands in for an eventId the
// run does not know).
func placeAll(o *history.Record, ids, labels []string) placed {
	if len(ids) == 0 {
		return nil
	}
	p := newPlacer(o)
	out := placed{}
	for i, id := range ids {
		st := p.place(id)
		if id == "" {
			id = labels[i]
		}
		out[st] = append(out[st], id)
	}
	return out
}

// split parts the stages into those that mean the run did not converge and
// those that mean the events are lost.
func (pl placed) split() (lost, unconverged placed) {
	for st, ids := range pl {
		if st.Unconverged() {
			if unconverged == nil {
				unconverged = placed{}
			}
			unconverged[st] = ids
		} else {
			if lost == nil {
				lost = placed{}
			}
			lost[st] = ids
		}
	}
	return lost, unconverged
}

// ids are every eventId placed, in pipeline order of their stages.
func (pl placed) ids() []string {
	var out []string
	for _, st := range result.Stages() {
		out = append(out, pl[st]...)
	}
	return out
}

// summary is "3 skipped, 2 routed-nowhere", in pipeline order.
func (pl placed) summary() string {
	var parts []string
	for _, st := range result.Stages() {
		if n := len(pl[st]); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	return strings.Join(parts, ", ")
}
