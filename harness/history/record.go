// Package history is the record of what a run observed: the target's
// tables at the end, the processes' event logs, the audit trail, the tap,
// the broker's counters, the clients' samples and the traffic's shape.
// Observers write it, and the checks judge only it (harness/check); it
// imports nothing of the harness but the protocol's vocabulary.
package history

import (
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// Fact is one committed business fact: an aggregate's event, and its
// eventId where the target's tables keep it.
type Fact struct {
	AggregateID string
	Sequence    int64
	EventID     string
}

// OutboxRow is one outbox row at the end of the run.
type OutboxRow struct {
	EventID     string
	AggregateID string
	Sequence    int64
	Status      string
	Published   bool
	Attempts    int
	LastError   string
}

// Effect is one effect row, in the order the consumer applied them.
type Effect struct {
	ID          int64
	EventID     string
	AggregateID string
	Sequence    int64
	EventType   string
}

// Record is everything a run observed: what the checks judge. A section
// the run did not observe is nil; one it observed and found empty is
// empty, never nil.
type Record struct {
	Facts   []Fact
	Effects []Effect
	// Outbox are the rows the contract's outbox query gave at the end;
	// nil: the contract has none.
	Outbox []OutboxRow
	// HeldBack is how many events wait for a predecessor; nil: the
	// contract does not say how to count them.
	HeldBack *int
	Queue    QueueInfo
	// DeadLetter is the topology's dead-letter queue at the end; nil: the
	// topology names none.
	DeadLetter *DeadLetterQueue
	Log        []eventlog.Entry // merged, in time order
	ByEvent    map[string][]eventlog.Entry
	// Poisoned counts the malformed messages faultline published into the
	// exchange and the broker confirmed (the poison faults' record).
	Poisoned int
	// LogRoles are the roles whose event logs were read.
	LogRoles map[string]bool
	// Audit is the outbox's audit trail; nil: it was not installed.
	Audit *AuditTrail
	// Tap counts the routings of each eventId; nil: the tap was not bound.
	Tap map[string]int
	// Queued counts the messages of each eventId still in the target's
	// queue at the end, ready or unacked; nil: the queue was not read.
	Queued map[string]int
	// Unbound are the spans in which the target's queue had no binding
	// (faultline's unbind faults; a zero End: never restored).
	Unbound []Interval
	// Routed are, per eventId, the times faultline received the broker's
	// copy of each publish of it into the target's exchange (the
	// firehose: SourceRouted), routed or not: what was published while
	// the target's queue was unbound is there too. nil: not watched.
	Routed map[string][]time.Time
	// OutageUnopened says why an outage judged by the relays' retries
	// ended before it showed their shape ("" if none did): the premise
	// of none-gave-up (the outage shorter than the retry budget's backoff)
	// is then not known to hold.
	OutageUnopened string
	// Instances maps the role references scenarios use ("relay-1",
	// "consumer") to the run's instance names, which its logs carry.
	Instances map[Ref]string
	// NoOutboxStatus: the outbox query returns no status column, so the
	// status oracles (stuck-row, Failed, still-in-outbox) do not apply.
	NoOutboxStatus bool
	// Model is the relay's model ("" not said).
	Model string
	// Pending are the committed events the relay had not settled at the
	// end; nil: the contract has no pending query.
	Pending []string
	// InboxPending are the events the consumer had taken in and not
	// applied at the end (nil: the contract has no inbox_pending query): a consumer that stores first and applies
	// later still has them to apply.
	InboxPending []string
	// Slot is a log relay's replication slot at the end; nil: the
	// outbox's database had not exactly one logical slot, or it had
	// confirmed nothing.
	Slot *LogSlot
	// Position is the trail of an offset relay's position table; nil: it
	// was not watched.
	Position *PositionTrail

	// Acknowledged counts the requests the producer answered ok (a create
	// or a step, each a fact): a database that lost committed facts (a
	// failover) shows fewer facts.
	Acknowledged int64
	// AcknowledgedByID is Acknowledged per aggregate: the id the producer
	// gave in its create answer (workload.create.id) and how many of that
	// aggregate's requests it answered ok; nil when the create gives no
	// id, and only the count is known.
	AcknowledgedByID map[string]int64
	// RequestsFailed counts the requests the producer failed (a 5xx, or
	// no answer) and the workload sent again: the client's side of a
	// fault the producer could not hide.
	RequestsFailed int64
	// Traffic is what the run saw of its traffic profile's shape.
	Traffic Traffic
	// EffectsCommitted are the eventIds whose effect write faultline saw
	// commit (its trigger on observe.effects notifies at COMMIT), whether
	// or not the effect is there at the end: a failover that lost the
	// commit after it was made shows one here and not in Effects
	// (nil: the effects table was not watched by its eventId column).
	EffectsCommitted map[string]bool

	// Recovery is how the run came back after its last fault healed (the
	// convergence samples of the target's tables tell when every fact had
	// taken effect); nil: not measured.
	Recovery *Recovery
}

// SourceRouted asks for Routed: when each event was published into the
// target's exchange.
const SourceRouted Source = "the times each event was published into the target's exchange (the broker's firehose)"

// DeadLetterQueue is what the dead-letter queue held at the end.
type DeadLetterQueue struct {
	Queue QueueInfo
	// ByEvent counts its messages of each eventId (read by MessageId,
	// each message put back).
	ByEvent map[string]int
}

// LogSlot is a log relay's replication slot as the run last read it.
type LogSlot struct {
	// Confirmed is its confirmed position, as bytes from 0/0: what the
	// relay has told the server it is done with.
	Confirmed int64
}

// Interval is a span of the run; a zero End lasts to the end of the run.
type Interval struct {
	Start, End time.Time
}

// Instance is the run's name of the instance a role reference ("relay-1",
// "consumer") names, as its event log lines carry it.
func (o *Record) Instance(ref Ref) string {
	if name, ok := o.Instances[ref]; ok {
		return name
	}
	return string(ref)
}

// HasLog reports whether the processes of role write an event log.
func (o *Record) HasLog(role string) bool { return o.LogRoles[role] }

// Count returns how many log entries have the event name.
func (o *Record) Count(event string) int {
	n := 0
	for _, e := range o.Log {
		if e.Event == event {
			n++
		}
	}
	return n
}

// Timeline renders the merged log lines of the given events.
func (o *Record) Timeline(ids ...string) []string {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var out []string
	for _, e := range o.Log {
		if e.EventID == "" || !want[e.EventID] {
			continue
		}
		out = append(out, FormatEntry(e))
	}
	return out
}

// FormatEntry is one timeline line.
func FormatEntry(e eventlog.Entry) string {
	s := fmt.Sprintf("%s %-10s %-16s %s", e.Time.Format("15:04:05.000"), e.Process, e.Event, e.EventID)
	if e.ClaimID != "" {
		s += " claim=" + e.ClaimID
	}
	if e.Redelivered {
		s += " redelivered"
	}
	if e.Point != "" {
		s += fmt.Sprintf(" point=%s hit=%d action=%s", e.Point, e.Hit, e.Action)
	}
	if e.Error != "" {
		s += " error=" + e.Error
	}
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}
