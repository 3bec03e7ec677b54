package reports

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/result"
)

// The header of every file names the target, faultline's version and the
// seed; results.json carries the version and the target file.
func TestHeaderNamesTargetVersionSeed(t *testing.T) {
	dir := reportDir(t)
	require.NoError(t, Write(dir, fixtureRun()))
	html := read(t, filepath.Join(dir, IndexFile))
	assert.Contains(t, html, `<h1>faultline: <span class="target">reference</span></h1>`)
	assert.Contains(t, html, `target file <code class="path">/home/team/orders/system/faultline.yaml</code>`)
	assert.Contains(t, html, `faultline <b>v0.9.0</b>`)
	assert.Contains(t, html, `seed <b>7</b>`)
	assert.NotContains(t, html, "outbox → RabbitMQ → inbox</h1>")

	md := read(t, filepath.Join(dir, SummaryFile))
	assert.Contains(t, md, "# faultline report: FAIL — reference\n\n- target file `/home/team/orders/system/faultline.yaml`, faultline v0.9.0\n- seed 7,")

	junit := read(t, filepath.Join(dir, JUnitFile))
	for _, p := range []string{`<property name="target" value="reference">`, `<property name="target_file" value="/home/team/orders/system/faultline.yaml">`,
		`<property name="version" value="v0.9.0">`, `<property name="seed" value="7">`} {
		assert.Contains(t, junit, p)
	}

	var back result.Run
	require.NoError(t, json.Unmarshal([]byte(read(t, filepath.Join(dir, ResultsFile))), &back))
	assert.Equal(t, "v0.9.0", back.Version)
	assert.Equal(t, "reference", back.Target)
	assert.Equal(t, "/home/team/orders/system/faultline.yaml", back.TargetFile)
}

// A run that names no target is headed by its target file's path; one
// that recorded neither, nor a version, says so rather than naming the
// reference pipeline.
func TestHeaderWithoutTargetName(t *testing.T) {
	tests := []struct {
		name             string
		target, file     string
		wantH1, wantFile string
	}{
		{"path only", "", "/srv/pipe/faultline.yaml", "/srv/pipe/faultline.yaml", "/srv/pipe/faultline.yaml"},
		{"nothing recorded", "", "", "target not recorded", "not recorded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := fixtureRun()
			run.Target, run.TargetFile, run.Version = tc.target, tc.file, ""
			html, err := renderHTML(run)
			require.NoError(t, err)
			assert.Contains(t, string(html), `<h1>faultline: <span class="target">`+tc.wantH1+`</span></h1>`)
			assert.Contains(t, string(html), `target file <code class="path">`+tc.wantFile+`</code>`)
			assert.Contains(t, string(html), `faultline <b>not recorded</b>`)
		})
	}
}

func TestReproduceCommand(t *testing.T) {
	run := result.Run{TargetFile: "/home/team/orders/faultline.yaml"}
	tests := []struct {
		name string
		run  result.Run
		s    result.Scenario
		want string
	}{
		{"correct pipeline", run, result.Scenario{Name: "broker-nack", Variant: correct, Seed: 7},
			"faultline run broker-nack --seed 7 --target /home/team/orders/faultline.yaml"},
		{"a variant", run, result.Scenario{Name: "broker-nack", Variant: "published-before-confirm", Seed: 7},
			"faultline run broker-nack --variant published-before-confirm --seed 7 --target /home/team/orders/faultline.yaml"},
		{"no variant recorded", run, result.Scenario{Name: "broker-nack", Seed: 3},
			"faultline run broker-nack --seed 3 --target /home/team/orders/faultline.yaml"},
		{"a copy of --repeat", run, result.Scenario{Name: "relay-pause-past-lease.3", Variant: correct, Seed: 11},
			"faultline run relay-pause-past-lease --seed 11 --target /home/team/orders/faultline.yaml"},
		{"a path a shell would split", result.Run{TargetFile: "/home/my team/it's.yaml"}, result.Scenario{Name: "broker-nack", Seed: 7},
			`faultline run broker-nack --seed 7 --target '/home/my team/it'\''s.yaml'`},
		{"no target file recorded", result.Run{}, result.Scenario{Name: "broker-nack", Seed: 7},
			"faultline run broker-nack --seed 7 --target FILE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, reproduceCommand(tc.run, tc.s))
		})
	}
}

// A failing run points at the guard its violations name: a lost event's
// stage, any other kind its own.
func TestGuardsOf(t *testing.T) {
	lost := func(stages map[result.Stage][]string) result.Scenario {
		return result.Scenario{Invariants: []result.Invariant{{Name: "no-lost-event", Violations: []result.Violation{{Kind: "lost", Stages: stages}}}}}
	}
	kind := func(k string) result.Scenario {
		return result.Scenario{Invariants: []result.Invariant{{Name: "x", Violations: []result.Violation{{Kind: k}}}}}
	}
	tests := []struct {
		name string
		s    result.Scenario
		want []string
	}{
		{"lost at skipped", lost(map[result.Stage][]string{result.StageSkipped: {"a"}}),
			[]string{"mark Published only after a positive confirm; claim rows by status, never read past a position; confirm a slot's position only past what the broker confirmed"}},
		{"lost at two stages, pipeline order", lost(map[result.Stage][]string{result.StageConsumedNoEffect: {"a"}, result.StageRoutedNowhere: {"b"}}),
			[]string{"mandatory publish, with a basic.return matched to its own publish and retried", "ack only after the inbox row and the effect commit together; a failed COMMIT never acked"}},
		{"lost, stage unknown", lost(map[result.Stage][]string{result.StageUnknown: {"a"}}), nil},
		{"stuck row", kind("stuck-row"), []string{"lease expiry: a claimed row that is never settled is claimed again"}},
		{"stale write", kind("stale-write"), []string{"the claim id in every status write (fencing)"}},
		{"phantom", kind("phantom"), []string{"publish only from the outbox, its row in the fact's transaction"}},
		{"not converged points at none", kind("not-converged"), nil},
		{"a documented limit is no failure", result.Scenario{Invariants: []result.Invariant{{Name: "x", Expected: true, Violations: []result.Violation{{Kind: "duplicate-effect"}}}}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, guardsOf(tc.s))
		})
	}
}

// Every failing run in the findings shows its guard, the window's guard,
// its stage counts and the command that runs it again; a variant not
// caught, the guard it removes and its missed run's command.
func TestFindingsSayWhatToDo(t *testing.T) {
	dir := reportDir(t)
	require.NoError(t, Write(dir, fixtureRun()))
	html := read(t, filepath.Join(dir, IndexFile))
	findings := html[strings.Index(html, `<section id="findings"`):strings.Index(html, "<h2>Failure windows</h2>")]
	for _, want := range []string{
		`relay-pause-past-lease</b></a> seed 7: <span class="what">lost 1 (consumed-without-effect 1)</span>`,
		`<span class="k">missing guard</span> ack only after the inbox row and the effect commit together; a failed COMMIT never acked`,
		`<span class="k">window</span> <code>claim.past-lease</code> is closed by: claim id in every status write (fencing)`,
		`<span class="k">reproduce</span> <code class="cmd">faultline run relay-pause-past-lease --seed 7 --target /home/team/orders/system/faultline.yaml</code>`,
		`<b>published-before-confirm</b>: <span class="what">not caught: must report lost; missed by broker-nack</span>`,
		`<span class="k">missing guard</span> Published only after a positive confirm`,
		`<code class="cmd">faultline run broker-nack --variant published-before-confirm --seed 7 --target /home/team/orders/system/faultline.yaml</code>`,
		`<a href="#glossary">glossary</a>`,
	} {
		assert.Contains(t, findings, want)
	}
	md := read(t, filepath.Join(dir, SummaryFile))
	assert.Contains(t, md, "- ❌ `relay-pause-past-lease` [correct] seed 7: lost 1 (consumed-without-effect 1)\n"+
		"  - missing guard: ack only after the inbox row and the effect commit together; a failed COMMIT never acked\n"+
		"  - window `claim.past-lease` is closed by: claim id in every status write (fencing)\n"+
		"  - reproduce: `faultline run relay-pause-past-lease --seed 7 --target /home/team/orders/system/faultline.yaml`\n")
	assert.Contains(t, md, "## Glossary\n")
	assert.Contains(t, md, "- `consumed-without-effect`: delivered to the consumer")
	junit := read(t, filepath.Join(dir, JUnitFile))
	assert.Contains(t, junit, "reproduce: faultline run relay-pause-past-lease --seed 7 --target /home/team/orders/system/faultline.yaml")
	assert.Contains(t, junit, "missing guard: ack only after the inbox row and the effect commit together")
}

// The glossary is on the page, escaped, with every stage and every kind
// the checker reports.
func TestGlossaryComplete(t *testing.T) {
	var stages []string
	for _, st := range result.Stages() {
		stages = append(stages, string(st))
	}
	var have []string
	for _, tm := range stageTerms() {
		have = append(have, tm.Name)
	}
	assert.Equal(t, stages, have, "every stage, in pipeline order")

	// The kinds the checker and the runner report, read from their source.
	var kinds []string
	for _, dir := range []string{"../harness/check", "../harness/runner"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range regexp.MustCompile(`Violation\{\{?Kind: "([a-z-]+)"`).FindAllStringSubmatch(string(src), -1) {
				if !slices.Contains(kinds, m[1]) {
					kinds = append(kinds, m[1])
				}
			}
		}
	}
	require.GreaterOrEqual(t, len(kinds), 10, "the kinds were found in the source")
	for _, k := range kinds {
		_, ok := lookupTerm(violationKinds(), k)
		assert.True(t, ok, "the glossary explains violation kind %q", k)
	}

	run := fixtureRun()
	run.Scenarios[2].Invariants[1].Violations[0].Kind = "lost"
	html, err := renderHTML(run)
	require.NoError(t, err)
	page := string(html)
	assert.Contains(t, page, `<section id="glossary">`)
	for _, name := range []string{"skipped", "stuck-row", "phantom", "absorbed", "consumed-without-effect", "routed-nowhere"} {
		assert.Contains(t, page, `<dt id="g-`+name+`">`+name+`</dt>`)
	}
	assert.Contains(t, page, "the fact&#39;s transaction", "glossary text is escaped")
}

// A sentinel never reaches a page as a negative duration: the runner's -1
// (never converged) says so, any other negative figure is not measured.
func TestNoNegativeDurations(t *testing.T) {
	for _, tc := range []struct {
		ms       int64
		recovery string
		duration string
	}{
		{-1, "not converged", "not measured"},
		{-250, "not measured", "not measured"},
		{0, "0 ms", "0 ms"},
		{1830, "1.83 s", "1.83 s"},
	} {
		assert.Equal(t, tc.recovery, fmtRecovery(tc.ms), "recovery %d", tc.ms)
		assert.Equal(t, tc.duration, fmtDuration(tc.ms), "duration %d", tc.ms)
	}

	// The no-lease variant stays stuck and never converges: recovery -1.
	run := fixtureRun()
	run.Scenarios = append(run.Scenarios, result.Scenario{Name: "relay-crash-after-claim", Variant: "no-lease", Seed: 7, Verdict: result.Fail,
		Counts: counts(60), RecoveryMS: -1, DurationMS: -5, Started: at(-7000),
		Invariants: invariants(result.Invariant{Name: "outbox-truth", Violations: []result.Violation{{Kind: "stuck-row", EventIDs: []string{"01JNOLEASE"}}}})})
	run.DurationMS = -1
	dir := reportDir(t)
	require.NoError(t, Write(dir, run))
	negative := regexp.MustCompile(`-\d+(\.\d+)? ?(ms|s)\b|-\d+m\d+s`)
	for _, f := range []string{IndexFile, SummaryFile} {
		page := read(t, filepath.Join(dir, f))
		assert.NotRegexp(t, negative, page, f)
		assert.Contains(t, page, "not converged", f)
	}
	html := read(t, filepath.Join(dir, IndexFile))
	assert.Regexp(t, `data-pipeline="no-lease">(?s:.*?)<td class="num">not converged</td>`, html, "the no-lease row of the window table")
	assert.Contains(t, html, "took <b>not measured</b>")
}
