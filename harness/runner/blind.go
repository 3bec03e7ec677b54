package runner

import (
	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
)

// forTarget is the schedule as this target can show it: each crash point
// the target does not map opened from outside where faultline can see the
// window (fault.OpenFromOutside), and each piece of evidence the target's
// logs cannot show read from a black-box source instead (check.Resolve).
func forTarget(t *target.Target, env *fault.Env, instances []instance, faults []fault.Fault, evidence []check.Evidence) ([]fault.Fault, []check.Evidence) {
	faults, outside := fault.OpenFromOutside(env, faults, linkOf(env.Roles, instances))
	logs := logRoles(env.Roles, instances)
	return faults, check.Resolve(evidence, func(s history.Source) bool { return offers(t, logs, s) }, outside)
}

// linkOf reports whether the instance the link reference ref
// ("producer.amqp") names has that link: its command or environment asks
// for the URL.
func linkOf(roles *fault.Roles, instances []instance) func(ref string) bool {
	return func(ref string) bool {
		name, err := roles.Link(ref)
		if err != nil {
			return false
		}
		for _, in := range instances {
			for _, to := range []string{"pg", "amqp"} {
				if name == in.name+"."+to && in.proc.UsesLink(to) {
					return true
				}
			}
		}
		return false
	}
}

// offers reports whether the target t, whose roles logs write event logs,
// can give what evidence needs: the event logs of a role, the contract's
// outbox query, a dead-letter queue, the tables and the exchange faultline
// watches from outside.
func offers(t *target.Target, logs map[string]bool, need history.Source) bool {
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
