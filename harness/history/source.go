package history

import "github.com/faultline-dev/faultline/protocol"

// Source is something a run observes of the target: what evidence reads,
// what a fault is timed by, what an oracle rests on. Its value says it to
// a reader ("evidence X needs an event log from the relays").
type Source string

// The sources a run may observe.
const (
	SourceProducerLog Source = "an event log from the producer"
	SourceRelayLog    Source = "an event log from the relays"
	SourceConsumerLog Source = "an event log from the consumer"
	SourceOutbox      Source = "an outbox query in the contract"
	SourceDLQ         Source = "a dead-letter queue in the topology"
	SourceAudit       Source = "an outbox table faultline can watch (observe.outbox)"
	SourceTap         Source = "the tap queue on the target's exchange"
	SourceAuditStatus Source = "an outbox status column faultline can watch (observe.outbox.status)"
	SourceCommits     Source = "tables faultline can watch for commits (observe)"
	// SourceCommitsSeen asks for the commits watched where they can be,
	// and is met without them (the checks that read them say so).
	SourceCommitsSeen Source = "the commits faultline saw, where it can watch them (observe)"
	// SourcePublishes asks for the target's publishes read as they are
	// routed (the tap, read while the run goes on).
	SourcePublishes Source = "the target's publishes as they are routed (the tap, read live)"
)

// LogSource is the event log of role.
func LogSource(role string) Source {
	switch role {
	case protocol.Producer:
		return SourceProducerLog
	case protocol.Relay:
		return SourceRelayLog
	default:
		return SourceConsumerLog
	}
}

// Observed reports whether the record holds what s names; a source the
// record does not keep a section for (the commits) counts as observed.
func (o *Record) Observed(s Source) bool {
	switch s {
	case SourceProducerLog:
		return o.HasLog(protocol.Producer)
	case SourceRelayLog:
		return o.HasLog(protocol.Relay)
	case SourceConsumerLog:
		return o.HasLog(protocol.Consumer)
	case SourceOutbox:
		return o.Outbox != nil
	case SourceDLQ:
		return o.DeadLetter != nil
	case SourceAudit:
		return o.Audit != nil
	case SourceAuditStatus:
		return o.Audit != nil && !o.Audit.NoStatus
	case SourceTap:
		return o.Tap != nil
	}
	return true
}
