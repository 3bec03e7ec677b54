package reports

import (
	"fmt"
	"sort"
	"strings"

	"github.com/faultline-dev/faultline/harness/result"
)

// The data behind every rendering: one place decides what a window's
// measured outcome is, whether a variant was caught, and in which order
// results are listed, so index.html, summary.md and junit.xml agree.

const correct = "correct"

// Classes of an outcome (CSS classes in index.html, icons in summary.md).
const (
	clsGood  = "good"  // what should happen happened
	clsBad   = "bad"   // a broken guarantee, or a variant not caught
	clsLimit = "limit" // a documented limit, reported as expected
	clsNone  = "none"  // not run, nothing to compare
	// clsUnknown: indeterminate, the run showed nothing (a fault that
	// never happened, an infrastructure error, an interrupt).
	clsUnknown = "unknown"
)

// outcome is one measured outcome.
type outcome struct {
	Text   string
	Class  string
	Detail string // longer text for a tooltip
}

// index finds results by scenario and variant.
type index struct {
	run    result.Run
	byKey  map[string][]result.Scenario
	expect map[string]string // variant → violation kind that catches it
	guard  map[string]string
	// variants are the variants the run knows: the gate's verdicts and the
	// runs on a variant. Only these get a line in the window table or a
	// row in the catch matrix; a target that lists none gets neither.
	variants map[string]bool
}

func key(name, variant string) string { return name + "\x00" + variant }

func variantOf(s result.Scenario) string {
	if s.Variant == "" {
		return correct
	}
	return s.Variant
}

func newIndex(run result.Run) *index {
	ix := &index{run: run, byKey: map[string][]result.Scenario{}, expect: map[string]string{}, guard: map[string]string{}, variants: map[string]bool{}}
	for _, s := range run.Scenarios {
		k := key(s.Name, variantOf(s))
		ix.byKey[k] = append(ix.byKey[k], s)
		if variantOf(s) != correct {
			ix.variants[variantOf(s)] = true
		}
	}
	for _, v := range run.Variants {
		ix.variants[v.Name] = true
	}
	for _, v := range targetVariants(run) {
		ix.expect[v.Name], ix.guard[v.Name] = v.Expect, v.Guard
	}
	// The gate's own verdicts say it best.
	for _, v := range run.Variants {
		if v.Expected != "" {
			ix.expect[v.Name] = v.Expected
		}
		if v.Guard != "" {
			ix.guard[v.Name] = v.Guard
		}
	}
	return ix
}

// variantNote says in one line why the window table has no variant line,
// "" when it may have some: the target lists no variants, or none was run.
func (ix *index) variantNote() string {
	switch {
	case ix.run.TargetVariants != nil && len(ix.run.TargetVariants) == 0:
		return "The target lists no variants: every line is of the correct pipeline."
	case len(ix.variants) == 0:
		return "No variant in this run: every line is of the correct pipeline."
	}
	return ""
}

func (ix *index) find(name, variant string) []result.Scenario {
	return ix.byKey[key(name, variant)]
}

// kinds lists the violation kinds of the unexpected broken invariants, or
// the broken invariants' names when they carry no violation.
func kinds(s result.Scenario) []string {
	var out []string
	seen := map[string]bool{}
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, inv := range s.Invariants {
		if o := inv.Outcome(); o != result.OutcomeBroken && o != result.OutcomeNotConverged {
			continue
		}
		if len(inv.Violations) == 0 {
			add(inv.Name)
		}
		for _, v := range inv.Violations {
			add(v.Kind)
		}
	}
	return out
}

// expectedLimits describes the broken invariants a scenario expected.
func expectedLimits(s result.Scenario) []string {
	var out []string
	for _, inv := range s.Invariants {
		if inv.Outcome() != result.OutcomeLimit {
			continue
		}
		for _, v := range inv.Violations {
			out = append(out, v.Kind+" of "+strings.Join(v.EventIDs, ", "))
		}
		if len(inv.Violations) == 0 {
			out = append(out, inv.Name)
		}
	}
	return out
}

// why says in one line why a run failed.
func why(s result.Scenario) string {
	if k := kinds(s); len(k) > 0 {
		return strings.Join(k, ", ")
	}
	if f := s.Failed(); len(f) > 0 {
		return f[0]
	}
	if s.Reason != "" {
		return s.Reason
	}
	return s.Verdict
}

// pick is the run a cell shows when a scenario ran with several seeds: the
// first that failed (other than with a known finding), else the first
// that showed a known finding, else the first.
func pick(runs []result.Scenario) result.Scenario {
	for _, r := range runs {
		if r.Verdict == result.Fail && !r.Known {
			return r
		}
	}
	for _, r := range runs {
		if r.Known {
			return r
		}
	}
	return runs[0]
}

func seedNote(runs []result.Scenario, shown result.Scenario) string {
	if len(runs) < 2 {
		return ""
	}
	if shown.Verdict == result.Fail {
		return fmt.Sprintf(" (seed %d of %d)", shown.Seed, len(runs))
	}
	return fmt.Sprintf(" (%d seeds)", len(runs))
}

// correctOutcome is what a scenario measured on the correct pipeline.
func correctOutcome(runs []result.Scenario) outcome {
	if len(runs) == 0 {
		return outcome{Text: "not run", Class: clsNone}
	}
	r := pick(runs)
	note := seedNote(runs, r)
	switch r.Verdict {
	case result.Pass, result.Limit:
		if lim := expectedLimits(r); len(lim) > 0 {
			return outcome{Text: "documented limit: " + strings.Join(lim, "; ") + " reported" + note, Class: clsLimit, Detail: r.Reason}
		}
		return outcome{Text: "pass" + note, Class: clsGood}
	case result.Fail:
		if r.Known {
			return outcome{Text: "known finding: " + found(r) + note, Class: clsLimit, Detail: strings.Join(r.Failed(), "\n")}
		}
		return outcome{Text: "FAIL: " + found(r) + note, Class: clsBad, Detail: strings.Join(r.Failed(), "\n")}
	case result.Indeterminate:
		return indeterminate(r)
	default:
		return outcome{Text: notRunText(r), Class: clsNone}
	}
}

// headline is the whole run's verdict as the report's headline says it,
// and its class. A run written before the verdict was recorded has only
// Pass.
func headline(run result.Run) (text, class string) {
	switch {
	case run.Interrupted:
		return "INTERRUPTED", "unknown"
	case run.Verdict == result.Indeterminate:
		return "INDETERMINATE", "unknown"
	case run.Verdict == result.Fail, run.Verdict == "" && !run.Pass:
		return "FAIL", "fail"
	default:
		return "PASS", "pass"
	}
}

// indeterminate is the outcome of a run that showed nothing.
func indeterminate(r result.Scenario) outcome {
	line, _, _ := strings.Cut(r.Reason, "\n")
	return outcome{Text: "INDETERMINATE: " + line, Class: clsUnknown, Detail: r.Reason}
}

func notRunText(r result.Scenario) string {
	if r.Reason != "" {
		return "not run: " + r.Reason
	}
	return "not run"
}

// variantOutcome is what a catching scenario measured on a variant.
func variantOutcome(runs []result.Scenario, kind string) outcome {
	if len(runs) == 0 {
		return outcome{Text: "not run", Class: clsNone}
	}
	for _, r := range runs {
		if r.Caught(kind) {
			k := kind
			if k == "" {
				k = why(r)
			}
			return outcome{Text: "caught: " + k + seedNote(runs, r), Class: clsGood, Detail: strings.Join(r.Failed(), "\n")}
		}
	}
	r := pick(runs)
	return missed(r, kind)
}

func missed(r result.Scenario, kind string) outcome {
	switch r.Verdict {
	case result.Pass, result.Limit:
		return outcome{Text: "MISSED: the run passed, no " + kind + " reported", Class: clsBad}
	case result.Fail:
		return outcome{Text: "MISSED: failed with " + why(r) + ", not " + kind, Class: clsBad, Detail: strings.Join(r.Failed(), "\n")}
	case result.Indeterminate:
		return indeterminate(r)
	default:
		return outcome{Text: notRunText(r), Class: clsNone}
	}
}

// verdictOf is a single result's outcome: on the correct pipeline its
// verdict, on a variant whether it was caught.
func (ix *index) verdictOf(s result.Scenario) outcome {
	if variantOf(s) == correct {
		return correctOutcome([]result.Scenario{s})
	}
	return variantOutcome([]result.Scenario{s}, ix.expect[s.Variant])
}

// sortedResults lists the correct pipeline's results by name and seed, then
// the variants' by variant, name and seed.
func sortedResults(run result.Run) []result.Scenario {
	out := append([]result.Scenario(nil), run.Scenarios...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		ac, bc := variantOf(a) == correct, variantOf(b) == correct
		if ac != bc {
			return ac
		}
		if variantOf(a) != variantOf(b) {
			return variantOf(a) < variantOf(b)
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Seed < b.Seed
	})
	return out
}

// anchor is a scenario's element id in index.html.
func anchor(s result.Scenario) string {
	var b strings.Builder
	b.WriteString("sc-")
	for _, r := range s.Name + "--" + variantOf(s) + fmt.Sprintf("--%d", s.Seed) {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteRune('_')
		}
	}
	return b.String()
}

// countsRow are the headline's count columns of one run.
type countsRow struct {
	Published, Delivered, DupPublished, DupDelivered, Absorbed, DupEffects, Lost, Phantom, Fenced int
	Recovery                                                                                      string
}

// countColumns names them, with what each means.
var countColumns = []countColumn{
	{"published", "pub\u00adlished", "publish calls"},
	{"delivered", "deliv\u00adered", "deliveries to the consumer"},
	{"dup pub", "dup pub", "duplicates published: extra publishes of an eventId"},
	{"dup del", "dup del", "duplicates delivered: extra deliveries of an eventId"},
	{"absorbed", "ab\u00adsorbed", "duplicate deliveries the inbox recognised"},
	{"dup effect", "dup effect", "extra effect rows for one eventId"},
	{"lost", "lost", "committed events with no effect"},
	{"phantom", "phan\u00adtom", "effects or messages with no committed order"},
	{"fenced", "fenced", "status writes refused to a stale claim"},
	{"recovery", "recov\u00adery", "from the last fault to convergence"},
}

// countColumn is a headline count column: its name, its heading in
// index.html (with soft hyphens for a narrow column) and what it means.
type countColumn struct{ Short, Head, Long string }

func (c countsRow) cells() []string {
	return []string{
		fmt.Sprint(c.Published), fmt.Sprint(c.Delivered), fmt.Sprint(c.DupPublished), fmt.Sprint(c.DupDelivered),
		fmt.Sprint(c.Absorbed), fmt.Sprint(c.DupEffects), fmt.Sprint(c.Lost), fmt.Sprint(c.Phantom), fmt.Sprint(c.Fenced), c.Recovery,
	}
}

func countsOf(s result.Scenario) *countsRow {
	if s.Verdict == result.NotRun {
		return nil
	}
	c := s.Counts
	return &countsRow{
		Published: c.Published, Delivered: c.Delivered, DupPublished: c.DuplicatesPublished, DupDelivered: c.DuplicatesDelivered,
		Absorbed: c.DuplicatesAbsorbed, DupEffects: c.DuplicateEffects, Lost: c.Lost, Phantom: c.Phantom, Fenced: c.FencedWrites,
		Recovery: fmtRecovery(s.RecoveryMS),
	}
}

// fmtMS prints a duration in milliseconds for people.
func fmtMS(ms int64) string {
	neg := ""
	if ms < 0 {
		neg, ms = "-", -ms
	}
	switch {
	case ms < 1000:
		return fmt.Sprintf("%s%d ms", neg, ms)
	case ms < 60_000:
		return fmt.Sprintf("%s%.2f s", neg, float64(ms)/1000)
	default:
		return fmt.Sprintf("%s%dm%02ds", neg, ms/60_000, ms%60_000/1000)
	}
}

// windowRow is one line of the headline table: a window's run on the
// correct pipeline or on its variant.
type windowRow struct {
	W Window
	// The boundary cell spans every line of consecutive windows at the
	// same boundary; the window cells span the lines of one window.
	BoundaryFirst bool
	BoundarySpan  int
	First         bool
	Span          int
	Last          bool // last line of its window

	Variant  bool   // a variant's line (else the correct pipeline's)
	Pipeline string // correct, or the variant's name, or "" for none
	Scenario string
	Anchor   string // the shown result's section, "" when not run
	Outcome  outcome
	Counts   *countsRow
}

// groupWindows splits the table into windows: consecutive entries with the
// same Boundary, Name, Window and Scenario are one window with several
// variants.
func groupWindows(windows []Window) [][]Window {
	var out [][]Window
	for i := 0; i < len(windows); {
		w := windows[i]
		j := i + 1
		for j < len(windows) && windows[j].Boundary == w.Boundary && windows[j].Name == w.Name && windows[j].Window == w.Window && windows[j].Scenario == w.Scenario {
			j++
		}
		out = append(out, windows[i:j])
		i = j
	}
	return out
}

// leftOut counts the windows the table leaves out: NotOffered, whose
// scenarios the target cannot run (not run, with the reason), and NotInRun,
// of which nothing was run at all (a `run` of some scenarios). Neither has
// a variant the run knows.
type leftOut struct{ NotOffered, NotInRun int }

func (l leftOut) Total() int { return l.NotOffered + l.NotInRun }

// Text says it in one line, "" when nothing was left out.
func (l leftOut) Text() string {
	var parts []string
	if l.NotOffered > 0 {
		parts = append(parts, fmt.Sprintf("%d the target does not offer (their scenarios could not run on it)", l.NotOffered))
	}
	if l.NotInRun > 0 {
		parts = append(parts, fmt.Sprintf("%d not in this run", l.NotInRun))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("%d %s left out: %s.", l.Total(), plural(l.Total(), "window", "windows"), strings.Join(parts, ", "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// offered keeps the windows the run shows something of: a run of one of
// its scenarios on the correct pipeline that the target could run, or a
// variant of it that the run knows. The others are left out: their
// scenarios could not run on the target (NotOffered), or nothing of them
// was run (NotInRun).
func (ix *index) offered(windows []Window) (kept []Window, out leftOut) {
	for _, group := range groupWindows(windows) {
		w := group[0]
		show, anyRun := false, false
		for _, name := range append([]string{w.Scenario}, w.Also...) {
			for _, r := range ix.find(name, correct) {
				anyRun = true
				if r.Verdict != result.NotRun {
					show = true
				}
			}
		}
		for _, g := range group {
			if ix.variants[g.Variant] {
				show = true
			}
		}
		switch {
		case show:
			kept = append(kept, group...)
		case anyRun:
			out.NotOffered++
		default:
			out.NotInRun++
		}
	}
	return kept, out
}

// windowRows fills the headline table with the windows given (offered
// leaves out those the run shows nothing of). A variant line is there for
// each variant the run knows, and a documented limit's line only when the
// run knows any variant.
func (ix *index) windowRows(windows []Window) []windowRow {
	var rows []windowRow
	for _, group := range groupWindows(windows) {
		w := group[0]
		start := len(rows)
		for _, name := range append([]string{w.Scenario}, w.Also...) {
			if name == "" {
				continue // no run of the correct pipeline opened it
			}
			runs := ix.find(name, correct)
			row := windowRow{W: w, Pipeline: correct, Scenario: name, Outcome: correctOutcome(runs)}
			if len(runs) > 0 {
				r := pick(runs)
				row.Anchor, row.Counts = anchor(r), countsOf(r)
			}
			rows = append(rows, row)
		}
		for _, g := range group {
			if g.Variant == "" || !ix.variants[g.Variant] {
				continue
			}
			row := windowRow{W: g, Variant: true, Pipeline: g.Variant}
			kind := g.Expect
			if kind == "" {
				kind = ix.expect[g.Variant]
			}
			row.Scenario = g.variantScenario()
			runs := ix.find(row.Scenario, g.Variant)
			row.Outcome = variantOutcome(runs, kind)
			if len(runs) > 0 {
				r := pick(runs)
				for _, x := range runs {
					if x.Caught(kind) {
						r = x
						break
					}
				}
				row.Anchor, row.Counts = anchor(r), countsOf(r)
			}
			rows = append(rows, row)
		}
		if len(rows) == start {
			continue
		}
		rows[start].First, rows[start].Span = true, len(rows)-start
		rows[len(rows)-1].Last = true
	}
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].W.Boundary == rows[i].W.Boundary {
			j++
		}
		rows[i].BoundaryFirst, rows[i].BoundarySpan = true, j-i
		i = j
	}
	return rows
}

// Cells of the catch matrix.
const (
	cellCaught  = "caught"
	cellMissed  = "missed"
	cellNotRun  = "not run"
	cellUnknown = "indeterminate"
)

type matrixCell struct {
	Text   string // caught, missed, not run, or "" where the scenario is not meant to catch the variant
	Class  string
	Anchor string
	Title  string
}

// Glyph is the cell as the page's narrow column shows it; its title says
// it in words.
func (c matrixCell) Glyph() string {
	switch c.Text {
	case cellCaught:
		return "✓"
	case cellMissed:
		return "✗"
	case cellUnknown:
		return "?"
	case cellNotRun:
		return "–"
	}
	return ""
}

type matrixRow struct {
	Variant string
	Guard   string
	Expect  string
	Cells   []matrixCell
	Verdict outcome
}

type matrix struct {
	Scenarios []string
	Rows      []matrixRow
}

// matrix is variant × catching scenario: caught, missed or not run. The
// pairs come from the gate's verdicts, the windows and the variant runs.
func (ix *index) matrix() matrix {
	var variants, scens []string
	seenV, seenS := map[string]bool{}, map[string]bool{}
	pairs := map[string]bool{}
	add := func(v, s string) {
		if v == "" || v == correct || s == "" {
			return
		}
		if !seenV[v] {
			seenV[v] = true
			variants = append(variants, v)
		}
		if !seenS[s] {
			seenS[s] = true
			scens = append(scens, s)
		}
		pairs[key(s, v)] = true
	}
	for _, v := range ix.run.Variants {
		for _, s := range v.CaughtBy {
			add(v.Name, s)
		}
		for _, list := range [][]string{v.Missed, v.Indeterminate, v.NotRun} {
			for _, s := range list {
				add(v.Name, s)
			}
		}
		if !seenV[v.Name] {
			seenV[v.Name] = true
			variants = append(variants, v.Name)
		}
	}
	for _, s := range ix.run.Scenarios {
		add(variantOf(s), s.Name)
	}
	// The target pairs each variant the run knows with the scenarios meant
	// to catch it.
	for _, v := range targetVariants(ix.run) {
		if ix.variants[v.Name] {
			for _, s := range v.CaughtBy {
				add(v.Name, s)
			}
		}
	}
	sort.Strings(scens)

	m := matrix{Scenarios: scens}
	for _, v := range variants {
		row := matrixRow{Variant: v, Guard: ix.guard[v], Expect: ix.expect[v]}
		anyCaught, anyRun, anyUnknown := false, false, false
		var by []string
		for _, s := range scens {
			if !pairs[key(s, v)] {
				row.Cells = append(row.Cells, matrixCell{})
				continue
			}
			runs := ix.find(s, v)
			cell := matrixCell{Text: cellNotRun, Class: clsNone, Title: s + " was not run on " + v}
			for _, r := range runs {
				if r.Verdict == result.NotRun {
					continue
				}
				if r.Verdict == result.Indeterminate {
					anyUnknown = true
					if cell.Text == cellNotRun {
						cell = matrixCell{Text: cellUnknown, Class: clsUnknown, Anchor: anchor(r), Title: indeterminate(r).Text}
					}
					continue
				}
				anyRun = true
				o := variantOutcome([]result.Scenario{r}, row.Expect)
				cell.Anchor, cell.Title = anchor(r), o.Text
				if o.Class == clsGood {
					cell.Text, cell.Class = cellCaught, clsGood
					anyCaught = true
					by = append(by, s)
					break
				}
				cell.Text, cell.Class = cellMissed, clsBad
			}
			row.Cells = append(row.Cells, cell)
		}
		switch {
		case anyCaught:
			row.Verdict = caughtBy(by)
		case anyRun:
			row.Verdict = outcome{Text: "MISSED", Class: clsBad}
		case anyUnknown:
			row.Verdict = outcome{Text: "indeterminate", Class: clsUnknown}
		default:
			row.Verdict = outcome{Text: "not run", Class: clsNone}
		}
		// The gate's verdict wins where it has one.
		for _, gv := range ix.run.Variants {
			if gv.Name != v {
				continue
			}
			if gv.Caught {
				row.Verdict = caughtBy(gv.CaughtBy)
			} else if anyRun || len(gv.Missed) > 0 {
				row.Verdict = outcome{Text: "MISSED", Class: clsBad}
			}
		}
		m.Rows = append(m.Rows, row)
	}
	return m
}

// caughtBy is a matrix row's verdict for a caught variant: the scenario
// that caught it, or how many did, so that the column and the row stay
// narrow; the tooltip names them all, and so do the ✓ cells.
func caughtBy(scens []string) outcome {
	o := outcome{Text: "caught by " + strings.Join(scens, ", "), Class: clsGood, Detail: strings.Join(scens, "\n")}
	if len(scens) > 1 {
		o.Text = fmt.Sprintf("caught by %d scenarios", len(scens))
	}
	return o
}

// stats are the run's headline figures.
type stats struct {
	CorrectPassed, CorrectFailed, CorrectRun, CorrectNotRun int
	// CorrectKnown of CorrectRun failed with a known finding of the
	// target file and nothing else: neither passed nor failed.
	CorrectKnown int
	// KnownNotReproduced are the target's known findings no run showed
	// although their scenario passed or was not run: each fails the gate.
	KnownNotReproduced int
	// CorrectIndeterminate of CorrectRun showed nothing, retries and all.
	CorrectIndeterminate     int
	VariantsCaught, Variants int
	// VariantsIndeterminate had only indeterminate catching runs.
	VariantsIndeterminate int
	// VariantsNotRun of Variants had no run at all (a `run` of some
	// scenarios, a provider that cannot do what their scenarios need).
	VariantsNotRun int
}

// CorrectClean: every run of the correct pipeline passed or showed a
// known finding and nothing else.
func (s stats) CorrectClean() bool { return s.CorrectPassed+s.CorrectKnown == s.CorrectRun }

func (ix *index) stats(m matrix) stats {
	var st stats
	for _, s := range ix.run.Scenarios {
		if variantOf(s) != correct {
			continue
		}
		switch s.Verdict {
		case result.Pass, result.Limit:
			st.CorrectPassed++
			st.CorrectRun++
		case result.Fail:
			st.CorrectRun++
			if s.Known {
				st.CorrectKnown++
			} else {
				st.CorrectFailed++
			}
		case result.Indeterminate:
			st.CorrectRun++
			st.CorrectIndeterminate++
		default:
			st.CorrectNotRun++
		}
	}
	for _, k := range ix.run.KnownFindings {
		if k.Status == result.KnownNotReproduced {
			st.KnownNotReproduced++
		}
	}
	for _, r := range m.Rows {
		st.Variants++
		switch r.Verdict.Class {
		case clsGood:
			st.VariantsCaught++
		case clsNone:
			st.VariantsNotRun++
		case clsUnknown:
			st.VariantsIndeterminate++
		}
	}
	return st
}

// notConverged is the runner's recovery of a run that never converged.
const notConverged = -1

// fmtRecovery renders a recovery time: the runner's notConverged says so
// in words, and any other negative figure is no measurement.
func fmtRecovery(ms int64) string {
	if ms == notConverged {
		return "not converged"
	}
	return fmtDuration(ms)
}

// fmtDuration renders how long something took; a negative figure is a
// sentinel or clocks that disagree, never a duration, and says so.
func fmtDuration(ms int64) string {
	if ms < 0 {
		return "not measured"
	}
	return fmtMS(ms)
}

// fmtAt renders a moment of a run's timeline, counted from the workload's
// start: one before it (a process started ahead of the workload) says so
// in words rather than as a negative time.
func fmtAt(ms int64) string {
	if ms < 0 {
		return fmtMS(-ms) + " before the start"
	}
	return fmtMS(ms)
}
