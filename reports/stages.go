package reports

import (
	"fmt"
	"slices"
	"strings"

	"github.com/faultline-dev/faultline/harness/result"
)

// idsShown is how many eventIds a list shows before the rest is collapsed:
// about a screenful of ids set inline. results.json keeps every one.
const idsShown = 30

// stageCounts says how many events stopped at each stage, in pipeline
// order ("consumed-without-effect 2, routed-nowhere 1"); stages the
// pipeline order does not know come last, by name. "" when there are none.
func stageCounts(stages map[result.Stage][]string) string {
	var parts []string
	for _, st := range orderedStages(stages) {
		parts = append(parts, fmt.Sprintf("%s %d", st, len(stages[st])))
	}
	return strings.Join(parts, ", ")
}

// orderedStages are the stages that hold events, in pipeline order, then
// any others by name.
func orderedStages(stages map[result.Stage][]string) []result.Stage {
	var out []result.Stage
	known := map[result.Stage]bool{}
	for _, st := range result.Stages() {
		known[st] = true
		if len(stages[st]) > 0 {
			out = append(out, st)
		}
	}
	var other []result.Stage
	for st, ids := range stages {
		if !known[st] && len(ids) > 0 {
			other = append(other, st)
		}
	}
	slices.Sort(other)
	return append(out, other...)
}

// idList is a list of eventIds as a page shows it: the first idsShown,
// and the rest collapsed behind a count.
type idList struct {
	Shown, More []string
}

func splitIDs(ids []string) idList {
	if len(ids) <= idsShown {
		return idList{Shown: ids}
	}
	return idList{Shown: ids[:idsShown], More: ids[idsShown:]}
}

// stageView is one stage of a violation with every eventId that stopped
// there.
type stageView struct {
	Stage string
	Count int
	IDs   idList
	// Unconverged: the run had not finished with these events when it was
	// checked (still in the outbox or the queue).
	Unconverged bool
}

func stageViews(v result.Violation) []stageView {
	var out []stageView
	for _, st := range orderedStages(v.Stages) {
		ids := v.Stages[st]
		out = append(out, stageView{Stage: string(st), Count: len(ids), IDs: splitIDs(ids), Unconverged: st.Unconverged()})
	}
	return out
}

// violationCount is how many events broke the invariant (see
// result.Scenario.ViolationCount).
func violationCount(s result.Scenario, v result.Violation) int { return s.ViolationCount(v) }

// violationSummary is one violation in a line: its kind, how many events
// and where they stopped ("lost 3 (consumed-without-effect 2, skipped 1)").
func violationSummary(s result.Scenario, v result.Violation) string {
	out := fmt.Sprintf("%s %d", v.Kind, violationCount(s, v))
	if sc := stageCounts(v.Stages); sc != "" {
		out += " (" + sc + ")"
	}
	return out
}
