package runner

import (
	"errors"
	"fmt"
	"strings"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/observe"
	"github.com/faultline-dev/faultline/harness/target"
)

// ErrNotOffered wraps why a scenario's window does not exist on a target
// (its relay's model has no such moment): the scenario is not offered
// there, and its result says why.
var ErrNotOffered = errors.New("not offered")

// onRelay is the scenario as it runs on t's relay model.
func (s Scenario) onRelay(t *target.Target) (Scenario, string, error) {
	if s.Relay == nil {
		return s, "", nil
	}
	out, how, err := s.Relay(s, t)
	if err != nil {
		return s, "", fmt.Errorf("%w on a relay whose model is %s: %w", ErrNotOffered, t.RelayModel(), err)
	}
	out.Relay = nil
	return out, how, nil
}

// JoinLines joins the lines that are not empty with "; ": what a
// scenario's On says of how it runs.
func JoinLines(lines ...string) string {
	var out []string
	for _, l := range lines {
		if l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

// checkPosition (check-target) says whether an offset relay wrote its
// position table while the fact went through (wentThrough): a file that
// names another table would time every window at the relay's mark by a
// write that never comes.
func (r *run) checkPosition(watch *observe.Watch, commits *history.Commits, wentThrough bool, add func(string, int, string, ...any), held *[]string) {
	rel := r.sh.Target.Relay
	if rel.Model != history.ModelOffset || rel.Position == nil || !watch.PositionWatched() || !wentThrough {
		return
	}
	if seen := commits.Seen(history.TablePosition); seen.Commits > 0 {
		*held = append(*held, fmt.Sprintf("relay.position: the relay marked its position in %s (%d committed writes)", rel.Position.Name, seen.Commits))
		return
	}
	add("relay.position", rel.Position.Line, "no write to %s committed while a fact went through: name the table the relay keeps its position in", rel.Position.Name)
}
