package reports

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/result"
)

// The findings open the report, the failing runs first with their lost
// events by stage, and say how many runs were indeterminate; a target that
// lists no variants has no variants line.
func TestFindingsHeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  result.Run
		// failed are the failing runs in the order listed, with what each found.
		failed        []string
		missed        int
		indeterminate int
		why           string
		variantsLine  bool
	}{
		{
			name: "black-box target, no variants",
			run:  fixtureBlackBox(),
			failed: []string{
				"blackbox-relay-answers-lost: lost 1 (skipped 1)",
				"blackbox-relay-frozen-past-lease: lost 43 (routed-nowhere 3, consumed-without-effect 40)",
			},
			indeterminate: 1,
			why:           "2 of 5 runs of the correct pipeline failed; 1 run indeterminate (no verdict through the retries); 6 not run (the target does not offer what they need)",
		},
		{
			name:         "reference target with variants",
			run:          fixtureRun(),
			failed:       []string{"relay-pause-past-lease: lost 1 (consumed-without-effect 1)"},
			missed:       8, // published-before-confirm missed; no-fencing and six others never ran
			why:          "1 of 5 runs of the correct pipeline failed; 8 variants not caught; no run indeterminate; 1 not run (the target does not offer what they need)",
			variantsLine: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := newIndex(tc.run)
			f := ix.findingsOf(ix.stats(ix.matrix()))
			var failed []string
			for _, it := range f.Failed {
				failed = append(failed, it.Name+": "+it.Text)
			}
			assert.Equal(t, tc.failed, failed)
			assert.Len(t, f.Missed, tc.missed)
			assert.Len(t, f.Indeterminate, tc.indeterminate)
			assert.Equal(t, "Why it failed", f.Heading)
			assert.Equal(t, tc.why, f.Why)

			dir := reportDir(t)
			require.NoError(t, Write(dir, tc.run))
			md := read(t, filepath.Join(dir, SummaryFile))
			html := read(t, filepath.Join(dir, IndexFile))

			// The findings come before any table, the failing runs first.
			for _, page := range []struct{ name, text, findings, windows string }{
				{"summary.md", md, "## Why it failed", "## Failure windows"},
				{"index.html", html, `id="findings"`, "<h2>Failure windows</h2>"},
			} {
				fi, wi := strings.Index(page.text, page.findings), strings.Index(page.text, page.windows)
				require.NotEqual(t, -1, fi, page.name)
				require.NotEqual(t, -1, wi, page.name)
				assert.Less(t, fi, wi, "%s: findings before the window table", page.name)
				assert.Contains(t, page.text, upperFirst(tc.why)+".", page.name)
				last := fi
				for _, want := range f.Failed {
					i := strings.Index(page.text[fi:], want.Text)
					require.NotEqual(t, -1, i, "%s lists %s", page.name, want.Text)
					assert.Greater(t, fi+i, last, "%s: failing runs in order", page.name)
					last = fi + i
				}
			}
			assert.Equal(t, tc.variantsLine, strings.Contains(md, "- variants:"), "summary.md variants line")
			assert.Equal(t, tc.variantsLine, strings.Contains(html, "<span>variants <b"), "index.html variants line")
			assert.Equal(t, tc.variantsLine, strings.Contains(html, `id="matrix"`), "a catch matrix only with variants")
		})
	}
}

// The window table leaves out the windows the target does not offer and
// those not in the run, says so in one line, and gives the runs no window
// names a line of their own.
func TestWindowsLeftOut(t *testing.T) {
	for _, tc := range []struct {
		name     string
		run      result.Run
		left     leftOut
		line     string
		rows     []string // pipeline/scenario of every line
		last     string   // pipeline/scenario of the last line
		variants bool
		note     string // why there is no variant line
	}{
		{
			name: "black-box target",
			run:  fixtureBlackBox(),
			left: leftOut{NotOffered: 4},
			line: "4 windows left out: 4 the target does not offer (their scenarios could not run on it).",
			rows: []string{
				"correct/amqp-reset-before-confirm", "correct/blackbox-relay-answers-lost",
				"correct/blackbox-relay-frozen-past-lease", "correct/relay-pause-past-lease",
				"correct/broker-restart",
				"correct/blackbox-consumer-acks-dropped", "correct/consumer-crash-after-commit",
			},
			note: "The target lists no variants: every line is of the correct pipeline.",
		},
		{
			name:     "reference target",
			run:      fixtureRun(),
			rows:     nil, // every window, checked by TestWindowRows
			last:     "correct/commit-then-publish-probe",
			variants: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := newIndex(tc.run)
			kept, left := ix.offered(windowsOf(tc.run))
			assert.Equal(t, tc.left, left)
			assert.Equal(t, tc.line, left.Text())
			rows := ix.windowRows(kept)
			var got []string
			anyVariant := false
			for _, r := range rows {
				got = append(got, r.Pipeline+"/"+r.Scenario)
				anyVariant = anyVariant || r.Variant
			}
			if tc.rows != nil {
				assert.Equal(t, tc.rows, got)
			}
			assert.Equal(t, tc.variants, anyVariant, "variant lines only for a target with variants")
			if tc.left.Total() == 0 {
				assert.Equal(t, windowsOf(tc.run), kept, "nothing left out")
			}
			if tc.last != "" {
				assert.Equal(t, tc.last, got[len(got)-1], "a run no window names has its own line, last")
			}

			dir := reportDir(t)
			require.NoError(t, Write(dir, tc.run))
			md := read(t, filepath.Join(dir, SummaryFile))
			html := read(t, filepath.Join(dir, IndexFile))
			if tc.line != "" {
				assert.Contains(t, md, "## Failure windows\n\n"+tc.line+"\n")
				assert.Contains(t, html, `<p class="leftout">`+tc.line+`</p>`)
			} else {
				assert.NotContains(t, md, "left out")
			}
			assert.Equal(t, tc.note, ix.variantNote())
			if tc.note != "" {
				assert.Contains(t, md, tc.note)
				assert.Contains(t, html, `<p class="leftout">`+tc.note+`</p>`)
			}
			for _, r := range rows {
				assert.Contains(t, html, `data-window="`+r.W.Key()+`"`)
			}
		})
	}
}

func TestStageCounts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stages map[result.Stage][]string
		want   string
	}{
		{"none", nil, ""},
		{"empty stages left out", map[result.Stage][]string{result.StageQueued: {}}, ""},
		{"pipeline order", map[result.Stage][]string{
			result.StageConsumedNoEffect: {"a", "b"}, result.StageNeverCommitted: {"c"}, result.StageRoutedNowhere: {"d", "e", "f"},
		}, "never-committed 1, routed-nowhere 3, consumed-without-effect 2"},
		{"unknown stages last, by name", map[result.Stage][]string{"zeta": {"a"}, "alpha": {"b"}, result.StageSkipped: {"c"}},
			"skipped 1, alpha 1, zeta 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, stageCounts(tc.stages))
		})
	}
}

func TestSplitIDs(t *testing.T) {
	for _, n := range []int{0, 1, idsShown, idsShown + 1, 3 * idsShown} {
		ids := lostIDs("id", n)
		l := splitIDs(ids)
		assert.Len(t, l.Shown, min(n, idsShown), "n=%d", n)
		assert.Len(t, l.More, max(0, n-idsShown), "n=%d", n)
		assert.Equal(t, ids, append(append([]string{}, l.Shown...), l.More...), "every id, in order")
	}
}

// Every eventId of every stage is in index.html, past the first screenful
// behind a <details>; summary.md shows the first and says how many more and
// where they are.
func TestStageIDsCollapsed(t *testing.T) {
	dir := reportDir(t)
	run := fixtureBlackBox()
	require.NoError(t, Write(dir, run))
	md := read(t, filepath.Join(dir, SummaryFile))
	html := read(t, filepath.Join(dir, IndexFile))
	consumed := lostIDs("01JCONSUMED", 40)

	for _, tc := range []struct {
		name, page string
		want       []string
		not        []string
	}{
		{
			name: "index.html", page: html,
			want: []string{
				`<td>consumed-without-effect</td><td class="num">40</td>`,
				`<code>` + consumed[idsShown-1] + `</code> <details class="more"><summary>10 more</summary><code>` + consumed[idsShown] + `</code>`,
				`<code>` + consumed[39] + `</code> <span class="none">(results.json has them all)</span></details>`,
				`<td>routed-nowhere</td><td class="num">3</td>`,
				"01JNOWHERE&lt;script&gt;",
				"lost 43 (routed-nowhere 3, consumed-without-effect 40): ",
			},
			not: []string{"01JNOWHERE<script"},
		},
		{
			name: "summary.md", page: md,
			want: []string{
				"Where they stopped: routed-nowhere 3, consumed-without-effect 40",
				"- consumed-without-effect (40): `" + strings.Join(consumed[:idsShown], ", ") + "` and 10 more (results.json has them all)",
				"- skipped (1): `01JSKIPPED0000000000000000`\n",
			},
			not: []string{consumed[idsShown]},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, w := range tc.want {
				assert.Contains(t, tc.page, w)
			}
			for _, n := range tc.not {
				assert.NotContains(t, tc.page, n)
			}
		})
	}
	for _, id := range consumed {
		assert.Contains(t, html, "<code>"+id+"</code>", "index.html has every eventId")
	}
}
