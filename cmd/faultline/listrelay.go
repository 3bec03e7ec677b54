package main

import (
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/target"
)

// relayOn says how a scenario opens on the target's relay model: as
// written, re-timed (and by what), or not offered and why.
func relayOn(s runner.Scenario, t *target.Target) string {
	if s.Relay == nil {
		return "-"
	}
	_, how, err := s.Relay(s, t)
	switch {
	case err != nil:
		return "NOT OFFERED: " + err.Error()
	case how != "":
		return how
	}
	return "as written"
}

// asOnRelay is the scenario as it opens on the target's relay (itself
// where it is not re-timed, or not offered).
func asOnRelay(s runner.Scenario, t *target.Target) runner.Scenario {
	if s.Relay == nil {
		return s
	}
	if on, _, err := s.Relay(s, t); err == nil {
		return on
	}
	return s
}
