package reports

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/result"
)

// knownRun is a gate over a black-box target whose one failing run shows
// its known finding and nothing else; cause says where it comes from.
func knownRun(status, cause string) result.Run {
	lost := result.Scenario{Name: "blackbox-unroutable-then-routable", Variant: "correct", Seed: 1, Verdict: result.Fail, Known: status == result.KnownShown,
		Counts: result.Counts{Orders: 120, Lost: 73}, Reason: "invariant broken: every committed event has an effect",
		Invariants: []result.Invariant{{Name: "no-lost-event", Violations: []result.Violation{{Kind: "lost", EventIDs: []string{"01JLOST"},
			Stages: map[result.Stage][]string{result.StageSkipped: make([]string, 73)}}}}}}
	finding := result.KnownFinding{Scenario: lost.Name, Violations: []string{"lost"}, Cause: cause, Status: status}
	verdict := result.Pass
	switch status {
	case result.KnownShown:
		finding.Shown = []result.KnownRun{{Seed: 1, Figures: []result.Figure{{Kind: "lost", Count: 73}}}}
	case result.KnownNotReproduced:
		lost.Verdict, lost.Invariants, lost.Counts.Lost, lost.Reason = result.Pass, nil, 0, ""
		finding.Detail = "known finding not reproduced: blackbox-unroutable-then-routable no longer shows lost (passed with seed 1); if the library fixed it, remove it from the target file"
		verdict = result.Fail
	}
	return result.Run{Schema: result.Schema, Target: "watermill-outbox", Seed: 1, Verdict: verdict, Pass: verdict == result.Pass,
		Scenarios: []result.Scenario{
			{Name: "broker-restart", Variant: "correct", Seed: 1, Verdict: result.Pass, Counts: result.Counts{Orders: 80}},
			lost,
		},
		Variants: []result.Variant{}, TargetVariants: []result.TargetVariant{}, KnownFindings: []result.KnownFinding{finding}}
}

// A gate that passes on its known finding says PASS, lists the finding
// with its figures and its cause (escaped), and its run as a known
// finding, not a failure, in every rendering.
func TestKnownFindingShown(t *testing.T) {
	cause := `watermill-amqp registers no basic.return listener <script>alert("x")</script>`
	dir := reportDir(t)
	require.NoError(t, Write(dir, knownRun(result.KnownShown, cause)))

	html := read(t, filepath.Join(dir, IndexFile))
	assert.Contains(t, html, `<h1`, "a page")
	assert.Regexp(t, `class="verdict pass"[^>]*>PASS<`, html)
	assert.NotContains(t, html, ">FAIL<")
	assert.Contains(t, html, "<h3>Known findings</h3>")
	assert.Regexp(t, `<li class="limit">⚠ <a href="#sc-blackbox-unroutable-then-routable--correct--1"><b>blackbox-unroutable-then-routable</b></a> <span class="tag none">lost</span> shown: <span class="what">seed 1: lost 73</span>`, html)
	assert.Contains(t, html, `cause: watermill-amqp registers no basic.return listener &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`)
	assert.NotContains(t, strings.ToLower(html), "<script")
	assert.Contains(t, html, "1 of 2 runs of the correct pipeline passed, and 1 showed the target&#39;s known finding and nothing else")
	assert.Contains(t, html, `<b class="limit">1 known finding</b>`)
	assert.Contains(t, html, "known finding: lost 73 (skipped 73)", "its window cell")
	assert.NotContains(t, html, "<h3>Failed</h3>")

	md := read(t, filepath.Join(dir, SummaryFile))
	assert.Contains(t, md, "# faultline report: PASS — watermill-outbox\n")
	assert.Contains(t, md, "- correct pipeline: 1/2 passed, 1 showed a known finding\n")
	assert.Contains(t, md, "### Known findings\n")
	assert.Contains(t, md, "- ⚠️ `blackbox-unroutable-then-routable` (lost) shown: seed 1: lost 73  \n  cause: watermill-amqp registers no basic.return listener &lt;script&gt;")
	assert.NotContains(t, md, "Failed:")
	assert.Contains(t, md, "## Failures\n\nNone.")

	junit := read(t, filepath.Join(dir, JUnitFile))
	assert.Contains(t, junit, `failures="0"`)
	assert.Contains(t, junit, "known finding of the target file, shown: lost 73")

	var back result.Run
	require.NoError(t, json.Unmarshal([]byte(read(t, filepath.Join(dir, ResultsFile))), &back))
	require.Len(t, back.KnownFindings, 1)
	assert.Equal(t, result.KnownShown, back.KnownFindings[0].Status)
	assert.True(t, back.Scenarios[1].Known)
	assert.Equal(t, result.Fail, back.Scenarios[1].Verdict, "the run's own verdict stays fail")
}

// A known finding no longer shown fails the report's headline, says so
// in the findings, and is a failed junit case of its own.
func TestKnownFindingNotReproduced(t *testing.T) {
	dir := reportDir(t)
	require.NoError(t, Write(dir, knownRun(result.KnownNotReproduced, "no basic.return listener")))

	html := read(t, filepath.Join(dir, IndexFile))
	assert.Regexp(t, `class="verdict fail"[^>]*>FAIL<`, html)
	assert.Contains(t, html, "1 known finding not reproduced")
	assert.Contains(t, html, `<li class="bad">✗ <b>blackbox-unroutable-then-routable</b> <span class="tag none">lost</span> NOT REPRODUCED: <span class="what">known finding not reproduced:`)

	md := read(t, filepath.Join(dir, SummaryFile))
	assert.Contains(t, md, "# faultline report: FAIL — watermill-outbox\n")
	assert.Contains(t, md, "NOT REPRODUCED: known finding not reproduced: blackbox-unroutable-then-routable no longer shows lost (passed with seed 1); if the library fixed it, remove it from the target file")

	junit := read(t, filepath.Join(dir, JUnitFile))
	assert.Contains(t, junit, `failures="1"`)
	assert.Contains(t, junit, `<testcase classname="known-finding" name="blackbox-unroutable-then-routable"`)
	assert.Contains(t, junit, `type="not-reproduced"`)
}
