package runner

import (
	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/observe"
	"github.com/faultline-dev/faultline/harness/target"
)

// forTarget is the schedule as this target can show it: each crash point
// the target does not map opened from outside where faultline can see the
// window (fault.OpenFromOutside), and each piece of evidence the target's
// logs cannot show read from a black-box source instead (check.Resolve).
func forTarget(t *target.Target, env *fault.Env, instances []instance, logs map[string]bool, faults []fault.Fault, evidence []check.Evidence) ([]fault.Fault, []check.Evidence) {
	faults, outside := fault.OpenFromOutside(env, faults, linkOf(env.Roles, instances))
	return faults, check.Resolve(evidence, func(s history.Source) bool { return observe.Offers(t, logs, s) }, outside)
}

// linkOf reports whether the instance the link reference ref
// ("producer.amqp") names has that link: its command or environment asks
// for the URL.
func linkOf(roles *fault.Roles, instances []instance) func(ref history.Link) bool {
	return func(ref history.Link) bool {
		name, err := roles.Link(ref)
		if err != nil {
			return false
		}
		for _, in := range instances {
			for _, to := range []string{history.ToDB, history.ToBroker} {
				if name == in.name+"."+to && in.proc.UsesLink(to) {
					return true
				}
			}
		}
		return false
	}
}
