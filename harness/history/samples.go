package history

import (
	"fmt"
	"time"
)

// ClientSample is how many clients the target had connected at one
// moment, as the broker and the database server count them, faultline's
// own connections left out.
type ClientSample struct {
	At       time.Time
	Broker   int            // AMQP connections in the run's vhost
	Sessions map[string]int // client sessions per target database
	// Expected is how many effects the orders answered so far make (one
	// per event); Effects how many the effects query counted (-1: not
	// read). Together they give the pipeline's own lag (MeasureLag).
	Expected int
	Effects  int
}

// Recovery is how the run came back after its faults: when the last one
// healed, when every committed fact had taken effect (zero: never, within
// the convergence wait), and the bound the run allows in between, with
// how it was drawn.
type Recovery struct {
	Healed time.Time
	// LoadEnded is when the workload's last order was answered: no fact
	// can take effect before it was committed, so the clock of a run
	// whose faults healed mid-load starts here.
	LoadEnded time.Time
	CaughtUp  time.Time
	Bound     time.Duration
	BoundIs   string // e.g. "the faults' 12s + lease 2s + a reconnection 10s"
}

// Traffic is what a run saw of its traffic's shape (workload.Spec's
// profile): the backlog a held role was released to, and the requests the
// clients had in flight at once.
type Traffic struct {
	Profile string
	// Held is the role the profile held back while its work piled up
	// (protocol.Relay, protocol.Consumer; "" for none), Want the backlog it waited for,
	// and Backlog the work seen waiting when the role was released (facts
	// acknowledged while every relay was frozen; messages waiting in the
	// consumer's queue, ready or delivered to it and unacked), 0 when it
	// never was.
	Held          string
	Want, Backlog int
	// ConsumersAtFreeze and ConsumersAtThaw are, where the consumer was
	// held, how many consumers its queue had once it was frozen and just
	// before the thaw (a passive declare; nil: not counted). Fewer at the
	// thaw: the broker dropped a frozen consumer's connection meanwhile,
	// and released it reconnects, what it held coming back redelivered.
	ConsumersAtFreeze, ConsumersAtThaw *int
	// ReadyAtThaw and UnackedAtThaw are, where the consumer was held, the
	// messages ready in its queue (a passive declare) and those delivered
	// to its consumers and unacked (the management API's count, which
	// lags but holds still while the consumer is frozen) just before the
	// thaw; nil: not counted.
	ReadyAtThaw, UnackedAtThaw *int
	// Batch is the relay's batch as the target file says it (relay.batch),
	// 0 where it does not.
	Batch int
	// MaxInFlight is the most requests the clients had open at once.
	MaxInFlight int64
	// Carried is the events a second the pipeline took to effect in a
	// sustained profile's probe, Sent the events a second the clients had
	// answered after it (0 elsewhere).
	Carried, Sent float64
}

// Progress is what convergence is judged by: one sample of the pipeline.
type Progress struct {
	// Unsettled are the outbox events the relay has not settled: rows
	// Pending or Processing where the outbox query has a status, and the
	// pending query's events (0 with neither).
	Unsettled int
	// InboxPending are the events the consumer has taken in and not
	// applied yet (the contract's inbox_pending query; 0 without it).
	InboxPending int
	// Expected is how many effects the events the workload was answered
	// for call for (one each), where the target shows no backlog of its
	// relay (no status in its outbox, no pending query): with nothing else
	// to tell a relay still catching up from one done, the pipeline is not
	// settled with fewer events that have an effect (Effected: one event
	// with two effects is still one). 0 where the backlog is shown.
	Expected int
	Effects  int // effect rows
	Effected int // distinct events among the effect rows
	// SlotBehind are the committed outbox rows a log relay's slot has not
	// confirmed past (its relay has not told the server it is done with
	// them): 0 for other relays, and where the slot or the audit trail is
	// not there to read.
	SlotBehind int
	Ready      int
	Unacked    int
	Queue      string // the target's queue, which Ready and Unacked count
}

func (p Progress) String() string {
	inbox := ""
	if p.InboxPending > 0 {
		inbox = fmt.Sprintf(", %d events in the inbox not applied", p.InboxPending)
	}
	if p.SlotBehind > 0 {
		inbox += fmt.Sprintf(", %d outbox rows not yet confirmed past by the relay's slot", p.SlotBehind)
	}
	expected := ""
	if p.Expected > 0 {
		expected = fmt.Sprintf(" (%d events) of the %d the answered events call for", p.Effected, p.Expected)
	}
	return fmt.Sprintf("%d outbox events unsettled, %d messages ready and %d unacked in %s%s, %d effects%s",
		p.Unsettled, p.Ready, p.Unacked, p.Queue, inbox, p.Effects, expected)
}

// PositionTrail is what faultline saw of an offset relay's position table:
// its committed writes, up to Until (when it stopped watching).
type PositionTrail struct {
	Writes      int
	Last, Until time.Time
}

func (p PositionTrail) String() string {
	if p.Writes == 0 {
		return "the position was never written"
	}
	return fmt.Sprintf("the position was written %d times, last %s before the end", p.Writes, p.Until.Sub(p.Last).Round(100*time.Millisecond))
}
