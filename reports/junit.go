package reports

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/faultline-dev/faultline/harness/result"
)

// JUnit: one testcase per result, classname the pipeline (correct or the
// variant), name the scenario. On the correct pipeline a testcase passes
// when the scenario passed. On a variant it passes when the variant WAS
// CAUGHT — the scenario reported the violation the missing guard causes —
// and fails when it was not, since a harness that cannot catch a broken
// guard proves nothing. A run that ended indeterminate (it showed nothing,
// through its retries) is an error; a run that did not happen is skipped.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"` // indeterminate: no verdict either way
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// oneLineReason is a run's reason up to its first line break.
func oneLineReason(s result.Scenario) string {
	line, _, _ := strings.Cut(s.Reason, "\n")
	return s.Verdict + ": " + line
}

func seconds(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }

func renderJUnit(run result.Run) ([]byte, error) {
	ix := newIndex(run)
	suite := junitSuite{Name: "faultline", Time: seconds(run.DurationMS)}
	if !run.Started.IsZero() {
		suite.Timestamp = run.Started.UTC().Format("2006-01-02T15:04:05")
	}
	suite.Properties = []junitProperty{{"schema", run.Schema}, {"target", targetName(run)}}
	if run.TargetFile != "" {
		suite.Properties = append(suite.Properties, junitProperty{"target_file", run.TargetFile})
	}
	suite.Properties = append(suite.Properties, junitProperty{"version", cmp.Or(run.Version, notRecorded)},
		junitProperty{"seed", seedsText(run)}, junitProperty{"pass", fmt.Sprint(run.Pass)})
	if run.Verdict != "" {
		suite.Properties = append(suite.Properties, junitProperty{"verdict", run.Verdict})
	}
	if run.Interrupted {
		suite.Properties = append(suite.Properties, junitProperty{"interrupted", "true"})
	}
	if len(run.Retried) > 0 {
		suite.Properties = append(suite.Properties, junitProperty{"retried", fmt.Sprint(len(run.Retried))})
	}
	if run.Infra != "" {
		suite.Properties = append(suite.Properties, junitProperty{"infra", run.Infra})
	}
	perKey := map[string]int{}
	for _, s := range run.Scenarios {
		perKey[key(s.Name, variantOf(s))]++
	}
	for _, s := range sortedResults(run) {
		c := junitCase{Classname: variantOf(s), Name: s.Name, Time: seconds(s.DurationMS)}
		if perKey[key(s.Name, variantOf(s))] > 1 {
			c.Name = fmt.Sprintf("%s (seed %d)", s.Name, s.Seed)
		}
		switch {
		case s.Verdict == result.Indeterminate:
			c.Error = &junitFailure{Type: "indeterminate", Message: oneLineReason(s), Text: s.Reason}
			suite.Errors++
		case s.Verdict != result.Pass && s.Verdict != result.Limit && s.Verdict != result.Fail:
			msg := notRunText(s)
			c.Skipped = &junitSkipped{Message: msg}
			suite.Skipped++
		case variantOf(s) == correct:
			switch k, known := knownFindingOf(run, s.Name); {
			case s.Known && known:
				c.SystemOut = fmt.Sprintf("known finding of the target file, shown: %s (lists %s)\ncause: %s\n%s", found(s), strings.Join(k.Violations, ", "), k.Cause, violationText(s, false))
			case s.Verdict == result.Fail:
				c.Failure = &junitFailure{Type: "violation", Message: oneLineFailure(s), Text: todoText(run, s) + failureText(s)}
				suite.Failures++
			default:
				if lim := expectedLimits(s); len(lim) > 0 {
					c.SystemOut = "documented limit, reported as expected: " + strings.Join(lim, "; ") + "\n" + violationText(s, true)
				}
			}
		default:
			kind := ix.expect[s.Variant]
			if s.Caught(kind) {
				c.SystemOut = fmt.Sprintf("variant %s caught: the run reported %s, the violation its missing guard causes\n%s", s.Variant, orAny(kind), violationText(s, false))
			} else {
				o := missed(s, orAny(kind))
				c.Failure = &junitFailure{Type: "not-caught",
					Message: fmt.Sprintf("variant %s was NOT caught by %s: expected a %s violation; %s", s.Variant, s.Name, orAny(kind), strings.TrimPrefix(o.Text, "MISSED: ")),
					Text:    todoText(run, s) + failureText(s)}
				suite.Failures++
			}
		}
		if w := waitsText(s); w != "" {
			if c.SystemOut != "" && !strings.HasSuffix(c.SystemOut, "\n") {
				c.SystemOut += "\n"
			}
			c.SystemOut += w
		}
		suite.Cases = append(suite.Cases, c)
		suite.Tests++
	}
	// A known finding no longer shown fails the gate: CI sees it as a
	// failed case of its own, beside the run that passed.
	for _, k := range run.KnownFindings {
		if k.Status != result.KnownNotReproduced {
			continue
		}
		suite.Cases = append(suite.Cases, junitCase{Classname: "known-finding", Name: k.Scenario,
			Failure: &junitFailure{Type: "not-reproduced", Message: k.Detail, Text: "cause declared: " + k.Cause}})
		suite.Tests++
		suite.Failures++
	}
	out := junitSuites{Name: "faultline", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Skipped: suite.Skipped, Time: suite.Time, Suites: []junitSuite{suite}}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(&b)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("render junit.xml: %w", err)
	}
	b.WriteString("\n")
	return b.Bytes(), nil
}

// todoText opens a failure's text with what to do: the guard it points
// at (on a variant, the guard it removes), the window's guard, and the
// command that runs it again.
func todoText(run result.Run, s result.Scenario) string {
	var b strings.Builder
	guards := guardsOf(s)
	if v := variantOf(s); v != correct {
		guards = nil
		if g := newIndex(run).guard[v]; g != "" {
			guards = []string{g}
		}
	}
	if len(guards) > 0 {
		fmt.Fprintf(&b, "missing guard: %s\n", strings.Join(guards, "; "))
	}
	if name, g := windowGuard(s); g != "" {
		fmt.Fprintf(&b, "window %s is closed by: %s\n", name, g)
	}
	fmt.Fprintf(&b, "reproduce: %s\n", reproduceCommand(run, s))
	return b.String()
}

func orAny(kind string) string {
	if kind == "" {
		return "any"
	}
	return kind
}

// oneLineFailure is a failed run's message: its violations and reason.
func oneLineFailure(s result.Scenario) string {
	var parts []string
	if k := kinds(s); len(k) > 0 {
		parts = append(parts, "violations: "+strings.Join(k, ", "))
	}
	if f := s.Failed(); len(f) > 0 {
		parts = append(parts, strings.Join(f, "; "))
	}
	if s.Reason != "" {
		parts = append(parts, "reason: "+s.Reason)
	}
	if len(parts) == 0 {
		return "failed"
	}
	return strings.Join(parts, " — ")
}

// failureText is the body of a failure: what failed, each violation with
// its eventIds and their timeline.
func failureText(s result.Scenario) string {
	var b strings.Builder
	if s.Reason != "" {
		fmt.Fprintf(&b, "reason: %s\n", s.Reason)
	}
	for _, f := range s.Failed() {
		fmt.Fprintf(&b, "%s\n", f)
	}
	b.WriteString(violationText(s, false))
	if s.Dir != "" {
		fmt.Fprintf(&b, "logs: %s\n", s.Dir)
	}
	return b.String()
}

func violationText(s result.Scenario, expected bool) string {
	var b strings.Builder
	for _, inv := range s.Invariants {
		if o := inv.Outcome(); o == result.OutcomeHeld || (o == result.OutcomeLimit) != expected {
			continue
		}
		for _, v := range inv.Violations {
			fmt.Fprintf(&b, "\n%s (%s): %s\n  eventIds: %s\n", v.Kind, inv.Name, v.Message, strings.Join(v.EventIDs, ", "))
			for _, l := range v.Timeline {
				fmt.Fprintf(&b, "  %s\n", l)
			}
		}
	}
	return b.String()
}

// waitsText is what the run's faults waited for, one line each: how each
// window opened, or why it did not.
func waitsText(s result.Scenario) string {
	var b strings.Builder
	for _, l := range s.WaitLines() {
		fmt.Fprintf(&b, "%s\n", l)
	}
	return b.String()
}

// knownFindingOf is the run's known finding of scenario.
func knownFindingOf(run result.Run, scenario string) (result.KnownFinding, bool) {
	for _, k := range run.KnownFindings {
		if k.Scenario == scenario {
			return k, true
		}
	}
	return result.KnownFinding{}, false
}
