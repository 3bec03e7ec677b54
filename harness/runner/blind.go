package runner

import (
	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/protocol"
)

// forTarget is the run as this target can show it: each crash point the
// target does not map opened from outside where faultline can see the
// window (fault.OpenFromOutside), and each piece of evidence the target's
// logs cannot show read from a black-box source instead (check.Resolve).
func (r *run) forTarget(env *fault.Env, faults []fault.Fault) []fault.Fault {
	faults, outside := fault.OpenFromOutside(env, faults, r.hasLink)
	r.plan.Scenario.Evidence = check.Resolve(r.plan.Scenario.Evidence, r.gives, outside)
	return faults
}

// hasLink reports whether the run gives the process of the link reference
// ref ("producer.amqp") that link: its command or environment asks for
// the URL.
func (r *run) hasLink(ref string) bool {
	name, err := r.roles.Link(ref)
	if err != nil {
		return false
	}
	for _, in := range r.instances {
		for _, to := range []string{"pg", "amqp"} {
			if name == in.name+"."+to && in.proc.UsesLink(to) {
				return true
			}
		}
	}
	return false
}

// gives reports whether the target can give what evidence needs: the event
// logs of a role, the contract's outbox query, a dead-letter queue, the
// tables and the exchange faultline watches from outside.
func (r *run) gives(need history.Source) bool {
	t := r.sh.Target
	logs := r.logRoles()
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
