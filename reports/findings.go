package reports

import (
	"fmt"
	"strings"

	"github.com/faultline-dev/faultline/harness/result"
)

// The findings open the report: why the verdict is what it is, the
// failing runs first with what they found (each violation's events by
// stage), then the variants not caught, then the runs that showed nothing.
// A team reads what to do there before any table.

// finding is one line of the findings.
type finding struct {
	Class    string // clsBad: a failed run, a variant not caught; clsUnknown: no verdict
	Name     string // the scenario, or the variant not caught
	Pipeline string // correct or the variant's name; "" on a variant's own line
	Seed     int64
	Text     string
	Anchor   string // the run's section; "" on a variant's own line
	// Guards are the guards a failed run's violations point at (guardsOf);
	// on a variant's line, the guard the variant removes.
	Guards []string
	// Window and WindowGuard: the window the run opened and what closes it
	// (the protocol's words), where it names one.
	Window, WindowGuard string
	// Commands run the failing runs again (reproduceCommand).
	Commands []string
}

type findings struct {
	Heading string
	// Why says in one line what made the verdict, with how many runs
	// failed and how many were indeterminate.
	Why           string
	Failed        []finding // runs of the correct pipeline that failed
	Missed        []finding // variants not caught
	Indeterminate []finding // runs, on any pipeline, with no verdict
	// Known are the target file's known findings, each with what the
	// gate saw of it.
	Known []knownFinding
}

func (f findings) Empty() bool {
	return len(f.Failed)+len(f.Missed)+len(f.Indeterminate)+len(f.Known) == 0
}

// knownFinding is one of the target file's known findings as the report
// lists it.
type knownFinding struct {
	Class    string // clsLimit: shown; clsBad: not reproduced; clsUnknown: indeterminate
	Scenario string
	Kinds    string // the violation kinds it lists
	Status   string // what the gate saw, in a word or two
	Text     string // the runs that showed it and their figures, or why none did
	Cause    string
	Anchor   string // the first run that showed it; "" if none did
}

// knownOf lists the run's known findings.
func (ix *index) knownOf() []knownFinding {
	var out []knownFinding
	for _, k := range ix.run.KnownFindings {
		kf := knownFinding{Scenario: k.Scenario, Kinds: strings.Join(k.Violations, ", "), Status: k.Status, Text: k.Line(), Cause: k.Cause}
		switch k.Status {
		case result.KnownShown:
			kf.Class = clsLimit
			for _, r := range ix.find(k.Scenario, correct) {
				if r.Known && len(k.Shown) > 0 && r.Seed == k.Shown[0].Seed {
					kf.Anchor = anchor(r)
					break
				}
			}
		case result.KnownNotReproduced:
			kf.Class, kf.Status = clsBad, "NOT REPRODUCED"
		case result.KnownOther:
			kf.Class, kf.Status = clsBad, "failed otherwise"
		default:
			kf.Class = clsUnknown
		}
		out = append(out, kf)
	}
	return out
}

// findingsOf reads the run's findings; st are its headline figures.
func (ix *index) findingsOf(st stats) findings {
	var f findings
	for _, s := range sortedResults(ix.run) {
		switch {
		case s.Verdict == result.Fail && variantOf(s) == correct && !s.Known:
			fd := finding{Class: clsBad, Name: s.Name, Pipeline: correct, Seed: s.Seed, Text: found(s), Anchor: anchor(s),
				Guards: guardsOf(s), Commands: []string{reproduceCommand(ix.run, s)}}
			fd.Window, fd.WindowGuard = windowGuard(s)
			f.Failed = append(f.Failed, fd)
		case s.Verdict == result.Indeterminate:
			line, _, _ := strings.Cut(s.Reason, "\n")
			f.Indeterminate = append(f.Indeterminate, finding{Class: clsUnknown, Name: s.Name, Pipeline: variantOf(s), Seed: s.Seed, Text: line, Anchor: anchor(s)})
		}
	}
	for _, v := range ix.run.Variants {
		if v.Caught {
			continue
		}
		must := ""
		if v.Expected != "" {
			must = "must report " + v.Expected + "; "
		}
		var guards []string
		if g := ix.guard[v.Name]; g != "" {
			guards = []string{g}
		}
		switch {
		case len(v.Missed) > 0:
			fd := finding{Class: clsBad, Name: v.Name, Text: "not caught: " + must + "missed by " + strings.Join(v.Missed, ", "), Guards: guards}
			for _, sc := range v.Missed {
				for _, r := range ix.find(sc, v.Name) {
					fd.Commands = append(fd.Commands, reproduceCommand(ix.run, r))
				}
			}
			f.Missed = append(f.Missed, fd)
		case len(v.Indeterminate) == 0:
			f.Missed = append(f.Missed, finding{Class: clsBad, Name: v.Name, Text: "not caught: " + must + "no scenario that catches it could run on it", Guards: guards})
		}
	}
	f.Known = ix.knownOf()
	f.Heading, f.Why = ix.why(st, f)
	return f
}

// found is what a failed run found: each unexpected violation with how
// many events and where they stopped, else what failed.
func found(s result.Scenario) string {
	var parts []string
	for _, v := range s.UnexpectedViolations() {
		parts = append(parts, violationSummary(s, v))
	}
	if len(parts) == 0 {
		return why(s)
	}
	return strings.Join(parts, "; ")
}

// why is the findings' heading and their line: what made the verdict.
func (ix *index) why(st stats, f findings) (heading, line string) {
	var parts []string
	if st.CorrectFailed > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d %s of the correct pipeline failed", st.CorrectFailed, st.CorrectRun, plural(st.CorrectRun, "run", "runs")))
	}
	if st.KnownNotReproduced > 0 {
		parts = append(parts, fmt.Sprintf("%d known %s not reproduced", st.KnownNotReproduced, plural(st.KnownNotReproduced, "finding", "findings")))
	}
	if len(f.Missed) > 0 {
		parts = append(parts, fmt.Sprintf("%d %s not caught", len(f.Missed), plural(len(f.Missed), "variant", "variants")))
	}
	if n := len(f.Indeterminate); n > 0 {
		parts = append(parts, fmt.Sprintf("%d %s indeterminate (no verdict through the retries)", n, plural(n, "run", "runs")))
	} else {
		parts = append(parts, "no run indeterminate")
	}
	if st.CorrectRun == 0 {
		parts = append(parts, "no scenario of the correct pipeline could run on this target")
	}
	if st.CorrectNotRun > 0 {
		parts = append(parts, fmt.Sprintf("%d not run (the target does not offer what they need)", st.CorrectNotRun))
	}
	line = strings.Join(parts, "; ")
	switch verdict, _ := headline(ix.run); verdict {
	case "FAIL":
		heading = "Why it failed"
	case "PASS":
		heading = "Findings"
		line = fmt.Sprintf("all %d %s of the correct pipeline passed", st.CorrectRun, plural(st.CorrectRun, "run", "runs"))
		if st.CorrectKnown > 0 {
			line = fmt.Sprintf("%d of %d %s of the correct pipeline passed, and %d showed the target's known %s and nothing else",
				st.CorrectPassed, st.CorrectRun, plural(st.CorrectRun, "run", "runs"), st.CorrectKnown, plural(len(f.Known), "finding", "findings"))
		}
		if st.Variants > 0 {
			line += fmt.Sprintf(", %d/%d variants caught", st.VariantsCaught, st.Variants)
		}
		if st.CorrectNotRun > 0 {
			line += fmt.Sprintf("; %d not run (the target does not offer what they need)", st.CorrectNotRun)
		}
	default:
		heading = "Why there is no verdict"
		if ix.run.Interrupted {
			line = "interrupted: the runs under way ended without a verdict, and nothing new started; " + line
		}
	}
	return heading, line
}
