package observe

import (
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
)

// Offers reports whether the target t, whose roles logs write event logs,
// can give what evidence needs: the event logs of a role, the contract's
// outbox query, a dead-letter queue, the tables and the exchange faultline
// watches from outside.
func Offers(t *target.Target, logs map[string]bool, need history.Source) bool {
	switch need {
	case history.SourceProducerLog:
		return logs[protocol.Producer]
	case history.SourceRelayLog:
		return logs[protocol.Relay]
	case history.SourceConsumerLog:
		return logs[protocol.Consumer]
	case history.SourceOutbox:
		return t.Contract.Outbox != nil
	case history.SourceDLQ:
		return t.Topology.DeadLetterQueue != ""
	case history.SourceAudit:
		return t.Observe.Outbox.Name != ""
	case history.SourceAuditStatus:
		return t.Observe.Outbox.Name != "" && t.Observe.Outbox.Status != ""
	case history.SourceTap:
		return t.Topology.Exchange != ""
	case history.SourceCommits:
		return t.Observe.Outbox.Name != "" || t.Observe.Facts.Name != "" || t.Observe.Effects.Name != ""
	}
	return true
}
