package reports

import (
	"bytes"
	"cmp"
	"fmt"
	"strings"

	"github.com/faultline-dev/faultline/harness/result"
)

// mdCell makes text safe in a Markdown table cell and in running text:
// no table break, no newline, no raw HTML.
func mdCell(s string) string {
	r := strings.NewReplacer("|", `\|`, "\r", " ", "\n", " ", "&", "&amp;", "<", "&lt;", ">", "&gt;", "`", "'")
	return r.Replace(s)
}

// mdCode puts text in an inline code span that its own backticks cannot end.
func mdCode(s string) string {
	s = strings.NewReplacer("\n", " ", "\r", " ", "|", `\|`).Replace(s)
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// mdFence is a fence longer than any run of backticks in the block.
func mdFence(lines []string) string {
	fence := "```"
	for _, l := range lines {
		for strings.Contains(l, fence) {
			fence += "`"
		}
	}
	return fence
}

var mdIcon = map[string]string{clsGood: "✅", clsBad: "❌", clsLimit: "⚠️", clsNone: "⏭️", clsUnknown: "❔"}

func renderMarkdown(run result.Run) []byte {
	ix := newIndex(run)
	m := ix.matrix()
	st := ix.stats(m)
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	verdict, _ := headline(run)
	p("# faultline report: %s — %s\n\n", verdict, mdCell(targetName(run)))
	file := notRecorded
	if run.TargetFile != "" {
		file = mdCode(run.TargetFile)
	}
	p("- target file %s, faultline %s\n", file, mdCell(cmp.Or(run.Version, notRecorded)))
	p("- seed %s", mdCell(seedsText(run)))
	if !run.Started.IsZero() {
		p(", started %s", run.Started.UTC().Format("2006-01-02 15:04:05Z"))
	}
	p(", took %s", fmtDuration(run.DurationMS))
	if run.Infra != "" {
		p(", infrastructure %s", mdCell(run.Infra))
	}
	p("\n- correct pipeline: %d/%d passed", st.CorrectPassed, st.CorrectRun)
	if st.CorrectKnown > 0 {
		p(", %d showed a known finding", st.CorrectKnown)
	}
	if st.CorrectFailed > 0 {
		p(", %d failed", st.CorrectFailed)
	}
	if st.CorrectIndeterminate > 0 {
		p(", %d indeterminate", st.CorrectIndeterminate)
	}
	if st.CorrectNotRun > 0 {
		p(", %d not run", st.CorrectNotRun)
	}
	p("\n")
	// Only a target that lists variants has a variants line: 0/0 says
	// nothing, and the reference's variants are not every target's.
	if st.Variants > 0 {
		notRun := ""
		if st.VariantsNotRun > 0 {
			notRun = fmt.Sprintf(" (%d not run)", st.VariantsNotRun)
		}
		if st.VariantsIndeterminate > 0 {
			notRun += fmt.Sprintf(" (%d indeterminate)", st.VariantsIndeterminate)
		}
		p("- variants: %d/%d caught%s\n", st.VariantsCaught, st.Variants, notRun)
	}
	if run.Interrupted {
		p("- **interrupted**: the runs under way ended without a verdict, and nothing new started\n")
	}
	if len(run.Retried) > 0 {
		p("- %d indeterminate attempt(s) run again with the next seed:\n", len(run.Retried))
		for _, r := range run.Retried {
			line, _, _ := strings.Cut(r.Reason, "\n")
			p("  - %s [%s] seed %d, attempt %d: %s\n", mdCell(r.Name), mdCell(r.Variant), r.Seed, r.Attempt, mdCell(line))
		}
	}
	p("\n")

	f := ix.findingsOf(st)
	p("## %s\n\n%s.\n\n", f.Heading, mdCell(upperFirst(f.Why)))
	for _, g := range []struct {
		label string
		items []finding
	}{{"Failed", f.Failed}, {"Variants not caught", f.Missed}, {"Indeterminate", f.Indeterminate}} {
		if len(g.items) == 0 {
			continue
		}
		p("%s:\n\n", g.label)
		for _, it := range g.items {
			p("- %s %s", mdIcon[it.Class], mdCode(it.Name))
			if it.Pipeline != "" {
				p(" [%s] seed %d", mdCell(it.Pipeline), it.Seed)
			}
			p(": %s\n", mdCell(it.Text))
			writeTodo(&b, it)
		}
		p("\n")
	}
	if len(f.Known) > 0 {
		p("### Known findings\n\nWeaknesses of the pipeline as built that its target file declares, each with the behaviour it comes from: a run that shows exactly one does not fail the gate; one no longer shown does.\n\n")
		for _, k := range f.Known {
			p("- %s %s (%s) %s: %s  \n  cause: %s\n", mdIcon[k.Class], mdCode(k.Scenario), mdCell(k.Kinds), mdCell(k.Status), mdCell(k.Text), mdCell(k.Cause))
		}
		p("\n")
	}

	kept, left := ix.offered(windowsOf(run))
	p("## Failure windows\n\n")
	if t := left.Text(); t != "" {
		p("%s\n\n", t)
	}
	if t := ix.variantNote(); t != "" {
		p("%s\n\n", t)
	}
	p("| boundary | window | window name | guard | without the guard | pipeline | scenario | measured outcome |")
	for _, c := range countColumns {
		p(" %s |", c.Short)
	}
	p("\n|---|---|---|---|---|---|---|---|")
	for range countColumns {
		p("--:|")
	}
	p("\n")
	for _, r := range ix.windowRows(kept) {
		pipe := r.Pipeline
		if pipe == "" {
			pipe = "—"
		}
		without := ""
		if r.Variant {
			without = r.W.Without
		}
		scen := ""
		if r.Scenario != "" {
			scen = mdCode(r.Scenario)
		}
		crash := "—"
		if r.W.Name != "" {
			crash = mdCode(r.W.Name)
			if !r.W.CrashPoint {
				crash += " (from outside)"
			}
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s %s |", mdCell(r.W.Boundary), mdCell(r.W.Window), crash, mdCell(r.W.Guard),
			mdCell(without), mdCell(pipe), scen, mdIcon[r.Outcome.Class], mdCell(r.Outcome.Text))
		if r.Counts != nil {
			for _, c := range r.Counts.cells() {
				p(" %s |", c)
			}
		} else {
			for range countColumns {
				p(" – |")
			}
		}
		p("\n")
	}

	p("\n## Verdicts\n\n")
	for _, s := range sortedResults(run) {
		o := ix.verdictOf(s)
		p("- %s %s [%s] seed %d: %s", mdIcon[o.Class], mdCode(s.Name), mdCell(variantOf(s)), s.Seed, mdCell(o.Text))
		if s.Verdict != result.NotRun {
			p(" (recovery %s, took %s)", fmtRecovery(s.RecoveryMS), fmtDuration(s.DurationMS))
		}
		p("\n")
		for _, w := range s.WaitLines() {
			p("  - %s\n", mdCell(w))
		}
	}

	p("\n## Catch matrix\n\n")
	if len(m.Rows) == 0 {
		p("No variant in this run: the target lists none, or none was run.\n")
	} else {
		p("| variant | caught by |")
		for _, s := range m.Scenarios {
			p(" %s |", mdCode(s))
		}
		p(" verdict |\n|---|---|")
		for range m.Scenarios {
			p(":-:|")
		}
		p("---|\n")
		for _, r := range m.Rows {
			p("| %s | %s |", mdCode(r.Variant), mdCell(r.Expect))
			for _, c := range r.Cells {
				if c.Text == "" {
					p(" |")
					continue
				}
				p(" %s %s |", mdIcon[c.Class], c.Text)
			}
			p(" %s %s |\n", mdIcon[r.Verdict.Class], mdCell(r.Verdict.Text))
		}
	}

	if rows := timingRows(run); len(rows) > 0 {
		p("\n## Time to a verdict\n\n| figure | time | note |\n|---|--:|---|\n")
		for _, r := range rows {
			icon := ""
			if r.Class != "" {
				icon = mdIcon[r.Class] + " "
			}
			p("| %s | %s | %s%s |\n", mdCell(r.Label), r.Value, icon, mdCell(r.Note))
		}
		p("\nWhere the slowest runs' time went (seconds):\n\n")
		for i, s := range slowestRuns(run.Scenarios) {
			if i == 5 {
				break
			}
			p("- %s [%s] %s", mdCode(s.Name), mdCell(variantOf(s)), fmtDuration(s.DurationMS))
			if ph := phasesText(s); ph != "" {
				p(": %s", mdCell(ph))
			}
			p("\n")
		}
	}

	p("\n## Failures\n\n")
	n := 0
	for _, s := range sortedResults(run) {
		o := ix.verdictOf(s)
		if o.Class != clsBad {
			continue
		}
		n++
		p("### %s [%s] seed %d\n\n", mdCell(s.Name), mdCell(variantOf(s)), s.Seed)
		p("%s\n\n", mdCell(o.Text))
		if s.Traffic != "" {
			p("Traffic: %s\n\n", mdCell(s.Traffic))
		}
		p("Reproduce: %s\n\n", mdCode(reproduceCommand(run, s)))
		if s.Reason != "" {
			p("Reason: %s\n\n", mdCell(s.Reason))
		}
		for _, f := range s.Failed() {
			p("- %s\n", mdCell(f))
		}
		if len(s.Failed()) > 0 {
			p("\n")
		}
		writeViolations(&b, s, false)
	}
	if n == 0 {
		p("None.\n\n")
	}

	limits := false
	for _, s := range sortedResults(run) {
		if len(expectedLimits(s)) == 0 {
			continue
		}
		if !limits {
			p("## Documented limits\n\n")
			limits = true
		}
		p("### %s [%s] seed %d\n\n", mdCell(s.Name), mdCell(variantOf(s)), s.Seed)
		writeViolations(&b, s, true)
	}
	if used := usedTerms(run); len(used) > 0 {
		p("## Glossary\n\nThe violation kinds and stages of this report (index.html explains every word):\n\n")
		for _, t := range used {
			p("- %s: %s", mdCode(t.Name), mdCell(t.Meaning))
			if t.Guard != "" {
				p(" (guard: %s)", mdCell(t.Guard))
			}
			p("\n")
		}
	}
	return b.Bytes()
}

// writeTodo says under a failure what to do: the guard it points at,
// the window's guard, the command that runs it again.
func writeTodo(b *bytes.Buffer, f finding) {
	if len(f.Guards) > 0 {
		fmt.Fprintf(b, "  - missing guard: %s\n", mdCell(strings.Join(f.Guards, "; ")))
	}
	if f.WindowGuard != "" {
		fmt.Fprintf(b, "  - window %s is closed by: %s\n", mdCode(f.Window), mdCell(f.WindowGuard))
	}
	for _, c := range f.Commands {
		fmt.Fprintf(b, "  - reproduce: %s\n", mdCode(c))
	}
}

// writeViolations lists a run's violations with their timelines: the
// unexpected ones, or with expected set the documented limits.
func writeViolations(b *bytes.Buffer, s result.Scenario, expected bool) {
	for _, inv := range s.Invariants {
		if o := inv.Outcome(); o == result.OutcomeHeld || (o == result.OutcomeLimit) != expected {
			continue
		}
		for _, v := range inv.Violations {
			ids := splitIDs(v.EventIDs)
			fmt.Fprintf(b, "**%s** (%s): %s — eventIds %s%s\n\n", mdCell(v.Kind), mdCell(inv.Name), mdCell(v.Message), mdCode(strings.Join(ids.Shown, ", ")), mdMore(len(ids.More)))
			if sv := stageViews(v); len(sv) > 0 {
				fmt.Fprintf(b, "Where they stopped: %s\n\n", mdCell(stageCounts(v.Stages)))
				for _, st := range sv {
					fmt.Fprintf(b, "- %s (%d): %s%s\n", mdCell(st.Stage), st.Count, mdCode(strings.Join(st.IDs.Shown, ", ")), mdMore(len(st.IDs.More)))
				}
				b.WriteString("\n")
			}
			if len(v.Timeline) > 0 {
				fence := mdFence(v.Timeline)
				fmt.Fprintf(b, "%s\n%s\n%s\n\n", fence, strings.Join(v.Timeline, "\n"), fence)
			}
		}
	}
}

// mdMore says how many eventIds a list left out, and where they all are.
func mdMore(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more (results.json has them all)", n)
}

// upperFirst starts a sentence with a capital.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
