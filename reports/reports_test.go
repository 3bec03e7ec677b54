package reports

import (
	"encoding/json"
	"encoding/xml"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/result"
)

// reportDir is where a test writes its report: a temporary folder, or
// $FAULTLINE_REPORT_DIR/<test> to keep it for a look.
func reportDir(t *testing.T) string {
	t.Helper()
	if keep := os.Getenv("FAULTLINE_REPORT_DIR"); keep != "" {
		dir := filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_"))
		require.NoError(t, os.RemoveAll(dir))
		return dir
	}
	return t.TempDir()
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestWriteAllFiles(t *testing.T) {
	dir := reportDir(t)
	run := fixtureRun()
	require.NoError(t, Write(dir, run))
	for _, f := range []string{IndexFile, SummaryFile, ResultsFile, JUnitFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err, f)
		assert.NotZero(t, fi.Size(), f)
	}
	// No temporary file left behind.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 4)
}

func TestResultsJSONRoundTrips(t *testing.T) {
	dir := reportDir(t)
	run := fixtureRun()
	run.Schema = "" // Write stamps the schema
	require.NoError(t, Write(dir, run))

	var raw map[string]any
	data := []byte(read(t, filepath.Join(dir, ResultsFile)))
	require.NoError(t, json.Unmarshal(data, &raw))
	assert.Equal(t, result.Schema, raw["schema"])
	for _, k := range []string{"seed", "scenarios", "variants"} {
		assert.Contains(t, raw, k)
	}
	sc := raw["scenarios"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "variant", "verdict", "counts", "faults", "recovery_ms", "invariants"} {
		assert.Contains(t, sc, k)
	}
	for _, k := range []string{"lost", "phantom", "duplicate_effects", "duplicates_absorbed", "fenced_writes"} {
		assert.Contains(t, sc["counts"].(map[string]any), k)
	}
	assert.Contains(t, sc["faults"].([]any)[0].(map[string]any), "hit")
	v := raw["variants"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "caught", "caught_by"} {
		assert.Contains(t, v, k)
	}

	var back result.Run
	require.NoError(t, json.Unmarshal(data, &back))
	want := fixtureRun()
	assert.Equal(t, want, back, "results.json is the run, whole")
}

// junit.xml as CI reads it.
type jSuites struct {
	XMLName xml.Name `xml:"testsuites"`
	Tests   int      `xml:"tests,attr"`
	Suites  []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Cases    []struct {
			Classname string `xml:"classname,attr"`
			Name      string `xml:"name,attr"`
			Time      string `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			SystemOut string `xml:"system-out"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestJUnit(t *testing.T) {
	dir := reportDir(t)
	run := fixtureRun()
	require.NoError(t, Write(dir, run))
	var js jSuites
	require.NoError(t, xml.Unmarshal([]byte(read(t, filepath.Join(dir, JUnitFile))), &js))
	require.Len(t, js.Suites, 1)
	s := js.Suites[0]
	assert.Equal(t, "faultline", s.Name)
	require.Len(t, s.Cases, len(run.Scenarios), "one testcase per scenario × pipeline")
	assert.Equal(t, len(run.Scenarios), s.Tests)

	got := map[string]int{}
	for i, c := range s.Cases {
		got[c.Classname+"/"+c.Name] = i
	}
	for _, r := range run.Scenarios {
		assert.Contains(t, got, caseName(r))
	}
	c := func(name string) int {
		i, ok := got[name]
		require.True(t, ok, name)
		return i
	}

	// Correct pipeline: pass passes, fail fails with violations and reason.
	assert.Nil(t, s.Cases[c("correct/producer-crash-after-commit")].Failure)
	assert.Equal(t, "14.200", s.Cases[c("correct/producer-crash-after-commit")].Time)
	f := s.Cases[c("correct/relay-pause-past-lease")].Failure
	require.NotNil(t, f)
	assert.Contains(t, f.Message, "violations: lost")
	assert.Contains(t, f.Message, "reason: invariant broken: no-lost-event "+evil, "the reason, as text")
	assert.Contains(t, f.Text, "01JLOST"+evil)
	assert.Contains(t, f.Text, "relay-1    fenced", "the violation's timeline")
	assert.Contains(t, f.Text, "evidence not seen: duplicate absorbed")

	// The documented limit passes and says so.
	lim := s.Cases[c("correct/inbox-retention-replay")]
	assert.Nil(t, lim.Failure)
	assert.Contains(t, lim.SystemOut, "documented limit")

	// Not run: skipped.
	sk := s.Cases[c("correct/unroutable-then-routable")]
	require.NotNil(t, sk.Skipped)
	assert.Nil(t, sk.Failure)
	assert.Contains(t, sk.Skipped.Message, "context canceled")
	require.NotNil(t, s.Cases[c("no-fencing/relay-pause-past-lease")].Skipped)

	// Variants: the testcase passes when the variant WAS caught...
	caughtCase := s.Cases[c("commit-then-publish/producer-crash-after-commit")]
	assert.Nil(t, caughtCase.Failure, "a caught variant is the expected outcome")
	assert.Contains(t, caughtCase.SystemOut, "caught")
	assert.Nil(t, s.Cases[c("no-inbox/consumer-crash-after-commit")].Failure)
	// ...and fails when it was not: a passing run on a variant...
	nf := s.Cases[c("no-inbox/relay-crash-after-confirm")].Failure
	require.NotNil(t, nf, "a variant run that passed is a failure: the broken guard went unnoticed")
	assert.Equal(t, "not-caught", nf.Type)
	assert.Contains(t, nf.Message, "variant no-inbox was NOT caught by relay-crash-after-confirm: expected a duplicate-effect violation")
	// ...or a run that failed with another violation than the guard's.
	wf := s.Cases[c("published-before-confirm/broker-nack")].Failure
	require.NotNil(t, wf)
	assert.Contains(t, wf.Message, "expected a lost violation")
	assert.Contains(t, wf.Message, "stuck-row")

	assert.Equal(t, 3, s.Failures)
	assert.Equal(t, 2, s.Skipped)
}

func TestJUnitVariantVerdicts(t *testing.T) {
	variantRun := func(verdict string, kinds ...string) result.Run {
		s := result.Scenario{Name: "sc", Variant: "no-inbox", Verdict: verdict}
		inv := result.Invariant{Name: "no-duplicate-effect", OK: len(kinds) == 0}
		for _, k := range kinds {
			inv.Violations = append(inv.Violations, result.Violation{Kind: k, EventIDs: []string{"e1"}, Message: k})
		}
		s.Invariants = []result.Invariant{inv}
		return result.Run{Scenarios: []result.Scenario{s}, Variants: []result.Variant{{Name: "no-inbox", Expected: "duplicate-effect"}}}
	}
	for _, tc := range []struct {
		name   string
		run    result.Run
		failed bool
	}{
		{"caught with its violation passes", variantRun(result.Fail, "duplicate-effect"), false},
		{"passing variant fails", variantRun(result.Pass), true},
		{"failing with another violation fails", variantRun(result.Fail, "lost"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderJUnit(tc.run)
			require.NoError(t, err)
			var js jSuites
			require.NoError(t, xml.Unmarshal(out, &js))
			require.Len(t, js.Suites[0].Cases, 1)
			assert.Equal(t, tc.failed, js.Suites[0].Cases[0].Failure != nil)
			assert.Equal(t, "no-inbox", js.Suites[0].Cases[0].Classname)
		})
	}
}

func TestSummaryMarkdown(t *testing.T) {
	dir := reportDir(t)
	require.NoError(t, Write(dir, fixtureRun()))
	md := read(t, filepath.Join(dir, SummaryFile))
	assert.Contains(t, md, "# faultline report: FAIL — reference\n")
	assert.Contains(t, md, "| boundary | window | window name | guard | without the guard | pipeline | scenario | measured outcome |")
	// Every window's rows: the correct pipeline's and the variant's.
	assert.Contains(t, md, "| app transaction | fact committed, event not yet published | `producer.after-commit` |")
	assert.Regexp(t, `\| commit-then-publish \| `+"`producer-crash-after-commit`"+` \| ✅ caught: lost \| 119 \| 119 \|`, md)
	assert.Contains(t, md, "| publisher → broker | the broker refuses a publish (nack) | `broker.nack` (from outside) |", "a window opened from outside, worded by the protocol")
	assert.Contains(t, md, "| lost (without mandatory publish) | no-mandatory | `unroutable-then-routable` | ⏭️ not run |", "the target's variant, with its guard")
	assert.Contains(t, md, "❌ MISSED: the run passed, no duplicate-effect reported")
	assert.Contains(t, md, "⚠️ documented limit: duplicate-effect of 01JREPLAYED000000000000000 reported")
	assert.Regexp(t, `- variants: \d+/\d+ caught \(\d+ not run\)`, md)
	assert.Contains(t, md, "## Catch matrix")
	assert.Contains(t, md, "| `no-inbox` | duplicate-effect |")
	assert.Contains(t, md, "## Failures")
	assert.Contains(t, md, "### relay-pause-past-lease [correct] seed 7")
	assert.Contains(t, md, "relay-1    fenced           01JLOST"+evil, "timeline lines in a code block, verbatim")
	assert.Contains(t, md, "- consumed-without-effect (1): `01JLOST<script>", "where each lost event stopped, in a code span")
	assert.NotContains(t, strings.ReplaceAll(md, "01JLOST"+evil, ""), "<script", "outside code blocks markup is escaped")
	assert.Contains(t, md, "&lt;script&gt;")
}

func TestIndexHTMLSelfContainedAndEscaped(t *testing.T) {
	dir := reportDir(t)
	require.NoError(t, Write(dir, fixtureRun()))
	html := read(t, filepath.Join(dir, IndexFile))
	lower := strings.ToLower(html)
	assert.NotContains(t, lower, "<script", "no script at all: markup from the run is text")
	assert.NotContains(t, lower, "http://")
	assert.NotContains(t, lower, "https://")
	assert.NotRegexp(t, `(?i)<(link|img|iframe|object|embed)\b`, html, "nothing loaded from elsewhere")
	assert.NotRegexp(t, `(?i)url\(`, html)
	assert.Contains(t, html, "invariant broken: no-lost-event &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;", "the reason, escaped")
	assert.Contains(t, html, "01JLOST&lt;script&gt;", "eventIds, escaped")
	assert.Regexp(t, `<tr><td>consumed-without-effect</td><td class="num">1</td><td class="ids">.*01JLOST&lt;script&gt;`, html, "where each lost event stopped, escaped")

	assert.Contains(t, html, `id="windows"`)
	assert.Contains(t, html, `id="matrix"`)
	assert.Equal(t, 3, strings.Count(html, `<svg class="timeline"`), "one per scenario with a timeline")
	assert.Contains(t, html, "no timeline recorded")
	shown, _ := newIndex(fixtureRun()).offered(windowsOf(fixtureRun()))
	assert.NotContains(t, html, `data-window="outbox.commit-order"`, "the fixture has no run of it: left out")
	for _, w := range shown {
		assert.Contains(t, html, `data-window="`+w.Key()+`"`)
	}
	// no-fencing's run in the claim.past-lease window was cut short.
	assert.Regexp(t, `data-window="claim.past-lease" data-pipeline="no-fencing">(?s:.*?)<td class="o none"[^>]*>not run: interrupted</td>`, html)
	// Timelines mark the fault, the processes and the traced events.
	for _, s := range []string{"m-kill", "m-pause", "m-resume", "m-restart", "f-crash", "f-pause", ">relay-1</text>", ">inventory</text>",
		"recovery 1.83 s", "before 96/s", "during 31.5/s", "after 140/s", "01JDUPLICATE0000000000000A"} {
		assert.Contains(t, html, s)
	}
}

func TestWindowRows(t *testing.T) {
	run := fixtureRun()
	ix := newIndex(run)
	rows := ix.windowRows(windowsOf(run))
	byKey := map[string]windowRow{}
	for _, r := range rows {
		byKey[r.Pipeline+"/"+r.Scenario] = r
	}
	assert.Equal(t, outcome{Text: "pass", Class: clsGood}, byKey["correct/producer-crash-after-commit"].Outcome)
	assert.Equal(t, "caught: lost", byKey["commit-then-publish/producer-crash-after-commit"].Outcome.Text)
	assert.Equal(t, 1, byKey["commit-then-publish/producer-crash-after-commit"].Counts.Lost)
	assert.Equal(t, clsBad, byKey["correct/relay-pause-past-lease"].Outcome.Class)
	assert.Equal(t, "FAIL: lost 1 (consumed-without-effect 1)", byKey["correct/relay-pause-past-lease"].Outcome.Text)
	assert.Equal(t, "not run: interrupted", byKey["no-fencing/relay-pause-past-lease"].Outcome.Text)
	assert.Equal(t, "MISSED: failed with stuck-row, not lost", byKey["published-before-confirm/broker-nack"].Outcome.Text)
	assert.Equal(t, clsLimit, byKey["correct/inbox-retention-replay"].Outcome.Class)
	assert.Equal(t, "not run: context canceled "+evil, byKey["correct/unroutable-then-routable"].Outcome.Text)
	assert.Equal(t, 3, byKey["correct/relay-crash-after-confirm"].Counts.DupPublished)

	// unroutable-then-routable is one window with two variants: one
	// correct line, two variant lines, its cells spanning the three.
	for i, r := range rows {
		if r.W.Scenario == "unroutable-then-routable" && r.First {
			assert.Equal(t, 3, r.Span)
			assert.Equal(t, "no-mandatory", rows[i+1].Pipeline)
			assert.Equal(t, "ignore-return", rows[i+2].Pipeline)
			assert.True(t, rows[i+2].Last)
		}
	}
	// Boundary cells span every line of their boundary.
	total := 0
	for _, r := range rows {
		if r.BoundaryFirst {
			total += r.BoundarySpan
		}
	}
	assert.Equal(t, len(rows), total)
}

func TestMatrix(t *testing.T) {
	run := fixtureRun()
	ix := newIndex(run)
	m := ix.matrix()
	cell := func(v, s string) string {
		for _, r := range m.Rows {
			if r.Variant != v {
				continue
			}
			for i, sc := range m.Scenarios {
				if sc == s {
					return r.Cells[i].Text
				}
			}
		}
		t.Fatalf("no cell %s × %s", v, s)
		return ""
	}
	assert.Equal(t, cellCaught, cell("commit-then-publish", "producer-crash-after-commit"))
	assert.Equal(t, cellMissed, cell("no-inbox", "relay-crash-after-confirm"))
	assert.Equal(t, cellCaught, cell("no-inbox", "consumer-crash-after-commit"))
	assert.Equal(t, cellMissed, cell("published-before-confirm", "broker-nack"))
	assert.Equal(t, cellNotRun, cell("no-fencing", "relay-pause-past-lease"))
	assert.Equal(t, cellNotRun, cell("no-lease", "relay-crash-after-claim"), "a window's variant that never ran")
	assert.Equal(t, "", cell("no-lease", "broker-nack"), "not a catching pair")
	st := ix.stats(m)
	assert.Equal(t, 2, st.VariantsCaught)
	notRun := 0
	for _, r := range m.Rows {
		if r.Verdict.Text == "not run" {
			notRun++
		}
	}
	require.Positive(t, notRun, "the fixture has variants that never ran")
	assert.Equal(t, notRun, st.VariantsNotRun, "a variant with no run is counted as not run, not as missed")
	assert.Equal(t, 4, st.CorrectPassed)
	assert.Equal(t, 5, st.CorrectRun)
	assert.Equal(t, 1, st.CorrectNotRun)
}

// A real run of the correct pipeline (no timelines yet, written before
// windows were named and the target's variants carried) renders too: each
// scenario's window is the text it recorded, under other windows.
func TestRealResults(t *testing.T) {
	var run result.Run
	require.NoError(t, json.Unmarshal([]byte(read(t, "testdata/s101-correct.json")), &run))
	dir := reportDir(t)
	require.NoError(t, Write(dir, run))
	html := read(t, filepath.Join(dir, IndexFile))
	assert.Equal(t, len(run.Scenarios), strings.Count(html, "no timeline recorded"))
	ix := newIndex(run)
	kept, left := ix.offered(windowsOf(run))
	assert.Equal(t, leftOut{}, left, "the table is drawn from the run: every window it has was run")
	assert.Contains(t, html, "No variant in this run", "no variant ran")
	for _, r := range ix.windowRows(kept) {
		assert.Equal(t, correct, r.Pipeline, "no variant ran: no variant lines")
		assert.NotEqual(t, "consumer-crash-before-commit", r.Scenario)
		if r.Scenario == "inbox-retention-replay" {
			assert.Equal(t, clsLimit, r.Outcome.Class, "the retention limit is reported, as expected")
		} else {
			assert.Equal(t, "pass", r.Outcome.Text, r.Scenario)
		}
	}
}

func TestMarkClassAndLanes(t *testing.T) {
	for _, tc := range []struct{ kind, label, want string }{
		{"crashpoint", "relay.after-confirm kill@3", "kill"},
		{"crashpoint", "relay.after-confirm pause", "pause"},
		{"crashpoint", "inventory.after-receive delay:200ms", "delay"},
		{"kill", "", "kill"},
		{"resumed", "", "resume"},
		{"restarted", "", "restart"},
		{"started", "", "start"},
		{"disconnected", "amqp", "disconnect"},
		{"connected", "amqp", "connect"},
		{"crashpoint", "", "kill"},
		{"odd", "", "other"},
	} {
		assert.Equal(t, tc.want, markClass(tc.kind, tc.label), tc.kind+" "+tc.label)
	}
	lanes := []result.Lane{{Process: "relay-1"}, {Process: "relay-10"}, {Process: "inventory"}}
	assert.Equal(t, 0, laneFor(lanes, "relay-1"))
	assert.Equal(t, 0, laneFor(lanes, "relay-1.amqp"))
	assert.Equal(t, 1, laneFor(lanes, "relay-10.pg"))
	assert.Equal(t, 2, laneFor(lanes, "inventory.pg"))
	assert.Equal(t, -1, laneFor(lanes, "rabbitmq"))
	assert.Equal(t, -1, laneFor(lanes, "relay-2"))
}

func TestTimelineLayoutStaysInside(t *testing.T) {
	for _, s := range fixtureRun().Scenarios {
		v := layoutTimeline(s)
		if s.Timeline == nil {
			assert.Nil(t, v)
			continue
		}
		num := regexp.MustCompile(`-?[0-9.]+`)
		check := func(what string, xs ...float64) {
			for _, x := range xs {
				assert.GreaterOrEqual(t, x, 0.0, what)
				assert.LessOrEqual(t, x, v.W, what)
			}
		}
		for _, l := range v.Lanes {
			for _, m := range l.Marks {
				check("mark "+m.Title, m.X, m.Y)
				assert.Less(t, m.Y, v.H)
			}
		}
		for _, sp := range v.Spans {
			check("span", sp.X, sp.X+sp.W)
		}
		for _, tr := range v.Traces {
			for _, p := range num.FindAllString(tr.Points, -1) {
				assert.NotEqual(t, "NaN", p)
			}
			for _, d := range tr.Dots {
				check("dot", d.X, d.Y)
			}
		}
		require.NotNil(t, v.Rate)
		for _, b := range v.Rate.Bars {
			check("bar", b.X, b.X+b.W)
			assert.GreaterOrEqual(t, b.H, 0.0)
			assert.LessOrEqual(t, b.Y+b.H, v.H)
		}
		require.NotNil(t, v.Recovery)
		assert.Greater(t, v.Recovery.X2, v.Recovery.X1)
	}
}

// Each run's waits read as one line each under its faults in index.html,
// under its verdict in summary.md and in its junit testcase's output: a
// wait seen and one that ran to its bound, their details escaped.
func TestWaitsRendered(t *testing.T) {
	seen := "waited 1.3 s (at most 8 s) for another relay to take relay-1's claim over — seen: relay-2 took 01JLOST" + evil + " over"
	unseen := "waited 30 s (at most 30 s) for the broker to count deliveries consumer holds unacked on inventory — not seen: bound reached: the broker counted no delivery held by the consumer on inventory within 30s " + evil
	for _, tc := range []struct {
		name string
		run  result.Run
		line string
		test string // its junit testcase
	}{
		{"seen", fixtureRun(), seen, "correct/relay-pause-past-lease"},
		{"not seen: bound reached", fixtureBlackBox(), unseen, "correct/blackbox-consumer-acks-dropped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := reportDir(t)
			require.NoError(t, Write(dir, tc.run))

			page := read(t, filepath.Join(dir, IndexFile))
			assert.Contains(t, page, html.EscapeString(tc.line), "under its fault, escaped")
			assert.NotContains(t, strings.ToLower(page), "<script")

			md := read(t, filepath.Join(dir, SummaryFile))
			assert.Contains(t, md, "  - "+mdCell(tc.line)+"\n", "under its verdict")

			var js jSuites
			require.NoError(t, xml.Unmarshal([]byte(read(t, filepath.Join(dir, JUnitFile))), &js))
			var out string
			for _, c := range js.Suites[0].Cases {
				if c.Classname+"/"+c.Name == tc.test {
					out = c.SystemOut
				}
			}
			assert.Contains(t, out, tc.line+"\n", "in its testcase's output, verbatim")
		})
	}
}
