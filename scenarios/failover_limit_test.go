package scenarios

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/result"
)

// A lost event is the failover's documented limit only where faultline saw
// its effect commit on the old primary: the promotion lost that commit. A
// lost event whose effect never committed is the consumer's own doing
// (it acked before its commit), and a run whose failover lost no WAL has
// no limit to excuse anything.
func TestFailoverLimitExcusesOnlyEffectsSeenCommitted(t *testing.T) {
	lost := func(ids ...string) []result.Invariant {
		return []result.Invariant{{Name: check.NoLost, Violations: []result.Violation{{Kind: "lost", EventIDs: ids[:1],
			Stages: map[result.Stage][]string{"consumed-without-effect": ids}}}}}
	}
	hit := []result.Fault{{Kind: fault.KindFailover, Hit: true}}
	for _, tc := range []struct {
		name     string
		faults   []result.Fault
		seen     map[string]bool
		invs     []result.Invariant
		expected bool
		detail   string
	}{
		{name: "every lost effect seen committed", faults: hit, seen: map[string]bool{"e1": true, "e2": true, "e3": true}, invs: lost("e1", "e2"), expected: true, detail: "2 effects seen committed are gone"},
		{name: "one lost effect never committed", faults: hit, seen: map[string]bool{"e1": true}, invs: lost("e1", "e2")},
		{name: "commits not watched", faults: hit, invs: lost("e1"), detail: "could not see the effects commit"},
		{name: "no WAL lost", faults: []result.Fault{{Kind: fault.KindFailover}}, seen: map[string]bool{"e1": true}, invs: lost("e1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &check.Observation{EffectsCommitted: tc.seen, HasEffectsCommitted: tc.seen != nil}
			ev := expectFailoverLimit(o, tc.faults, tc.invs)
			assert.Equal(t, tc.expected, tc.invs[0].Expected)
			if tc.expected {
				assert.Contains(t, ev.Detail, tc.detail)
				assert.True(t, ev.Seen)
			} else if tc.detail != "" {
				assert.Contains(t, tc.invs[0].Detail, tc.detail, "why the failover does not excuse it")
			}
		})
	}
}
