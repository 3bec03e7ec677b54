package result

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A variant run is caught by the violation its missing guard causes (any
// violation when none is named); a run that failed otherwise — its window
// never opened, an error — caught nothing.
func TestCaught(t *testing.T) {
	stale := Invariant{Name: "fencing", Violations: []Violation{{Kind: "stale-write"}}}
	expected := Invariant{Name: "no-duplicate", Expected: true, Violations: []Violation{{Kind: "duplicate-effect"}}}
	tests := []struct {
		name string
		run  Scenario
		kind string
		want bool
	}{
		{"the expected kind", Scenario{Verdict: Fail, Invariants: []Invariant{stale}}, "stale-write", true},
		{"another kind", Scenario{Verdict: Fail, Invariants: []Invariant{stale}}, "lost", false},
		{"any violation, none named", Scenario{Verdict: Fail, Invariants: []Invariant{stale}}, "", true},
		{"a window that never opened, none named", Scenario{Verdict: Fail, Reason: "fault never happened: pause relay-1 relay.before-renew"}, "", false},
		{"only a violation the scenario exists to show", Scenario{Verdict: Fail, Invariants: []Invariant{expected}}, "", false},
		{"a pass", Scenario{Verdict: Pass}, "", false},
		{"not run", Scenario{Verdict: NotRun}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.run.Caught(tc.kind))
		})
	}
}
