package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
)

// termWidth is the widest line the gate's summary prints: it has to read
// on a terminal of 100 columns. (The HTML report has the full matrix.)
const termWidth = 100

// printGate prints the correct pipeline's verdicts and, per variant, the
// scenarios that must catch it: what the catch matrix holds, one variant a
// line (wrapped onto indented lines), so that no line is wider than
// termWidth.
func printGate(w io.Writer, run result.Run, catches []gate.Catch) {
	fmt.Fprintln(w, "correct pipeline:")
	failed, notRun, unknown, known := 0, 0, 0, 0
	nameW := 0
	for _, r := range run.Scenarios {
		if r.Variant == "correct" {
			nameW = max(nameW, utf8.RuneCountInString(r.Name))
		}
	}
	nameW = min(nameW, 32)
	for _, r := range run.Scenarios {
		if r.Variant != "correct" {
			continue
		}
		switch r.Verdict {
		case result.Pass, result.Limit:
		case result.NotRun:
			notRun++
		case result.Indeterminate:
			unknown++
		default:
			if r.Known {
				known++
			} else {
				failed++
			}
		}
		verdict := r.Verdict
		if r.Known {
			verdict = "known"
		}
		head := fmt.Sprintf("  %-*s  seed %-6d  %-7s  ", nameW, r.Name, r.Seed, verdict)
		indent := utf8.RuneCountInString(head)
		if indent > termWidth/2 {
			indent = 6
		}
		// oneLine's first line is the counts; the lines after it (the
		// reason, where the logs are) start with four spaces.
		parts := strings.Split(oneLine(r), "\n")
		printWrapped(w, head, strings.Repeat(" ", indent), parts[0])
		for _, p := range parts[1:] {
			printWrapped(w, "    ", "      ", strings.TrimSpace(p))
		}
	}

	variants, _, cells := gate.Matrix(run, catches)
	if len(variants) > 0 {
		fmt.Fprintln(w, "\ncatch matrix (each variant, and the scenarios that must catch it with the violation):")
	}
	varW := 0
	for _, v := range variants {
		varW = max(varW, utf8.RuneCountInString(v))
	}
	varW = min(varW, 28)
	for _, v := range variants {
		verdict := "MISSED"
		for _, vr := range run.Variants {
			if vr.Name == v && vr.Caught {
				verdict = "caught"
			}
		}
		// By cell, in the order of the catches: caught by …; missed by …;
		// not run: ….
		groups := map[string][]string{}
		for _, c := range catches {
			if c.Variant != v {
				continue
			}
			cell := cells[v][c.Scenario]
			item := c.Scenario
			if c.Expect != "" && cell != gate.NotRun {
				item += " (" + c.Expect + ")"
			}
			groups[cell] = append(groups[cell], item)
		}
		// A scenario and its violation kind stay on one line.
		var words []string
		for _, g := range []struct{ cell, label string }{
			{gate.Caught, "by"}, {gate.Missed, "missed by"}, {gate.Indeterminate, "indeterminate:"}, {gate.NotRun, "not run:"},
		} {
			items := groups[g.cell]
			if len(items) == 0 {
				continue
			}
			if len(words) > 0 {
				words[len(words)-1] += ";"
			}
			words = append(words, g.label)
			for i, item := range items {
				if i < len(items)-1 {
					item += ","
				}
				words = append(words, item)
			}
		}
		head := fmt.Sprintf("  %-*s  %-6s  ", varW, v, verdict)
		for _, line := range wrap(head, strings.Repeat(" ", 2+varW+2+6+2), words, termWidth) {
			fmt.Fprintln(w, line)
		}
	}

	printKnown(w, run.KnownFindings)
	caught := 0
	for _, v := range run.Variants {
		if v.Caught {
			caught++
		}
	}
	printRetried(w, run.Retried)
	ran := countCorrect(run) - notRun
	fmt.Fprintf(w, "\n%d/%d correct-pipeline runs passed", ran-failed-unknown-known, ran)
	if known > 0 {
		fmt.Fprintf(w, ", %d showed a known finding", known)
	}
	if failed > 0 {
		fmt.Fprintf(w, ", %d failed", failed)
	}
	if unknown > 0 {
		fmt.Fprintf(w, ", %d indeterminate (no verdict through their retries)", unknown)
	}
	if notRun > 0 {
		fmt.Fprintf(w, " (%d more not run: the target does not offer what they need)", notRun)
	}
	// A target that lists no variants has no variants figure (as in the
	// report): 0/0 says nothing.
	if len(run.Variants) > 0 {
		fmt.Fprintf(w, "; %d/%d variants caught", caught, len(run.Variants))
	}
	if len(run.KnownFindings) > 0 {
		shown, stale := 0, 0
		for _, k := range run.KnownFindings {
			switch k.Status {
			case result.KnownShown:
				shown++
			case result.KnownNotReproduced:
				stale++
			}
		}
		fmt.Fprintf(w, "; %d/%d known findings shown", shown, len(run.KnownFindings))
		if stale > 0 {
			fmt.Fprintf(w, " (%d NOT REPRODUCED)", stale)
		}
	}
	if len(run.Retried) > 0 {
		fmt.Fprintf(w, "; %d indeterminate attempt(s) run again", len(run.Retried))
	}
	fmt.Fprintln(w)
	if run.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: the runs under way ended without a verdict, and nothing new started")
	}
}

// printKnown lists the target file's known findings, each with what the
// gate saw of it (the runs that showed it and their figures, or why none
// did) and the behaviour it comes from.
func printKnown(w io.Writer, known []result.KnownFinding) {
	if len(known) == 0 {
		return
	}
	fmt.Fprintln(w, "\nknown findings (the target file's; a run showing exactly one does not fail the gate):")
	nameW := 0
	for _, k := range known {
		nameW = max(nameW, utf8.RuneCountInString(k.Scenario))
	}
	nameW = min(nameW, 32)
	for _, k := range known {
		status := k.Status
		if status == result.KnownNotReproduced {
			status = "NOT REPRODUCED"
		}
		head := fmt.Sprintf("  %-*s  %s  ", nameW, k.Scenario, status)
		printWrapped(w, head, "      ", "["+strings.Join(k.Violations, ", ")+"] "+k.Line())
		printWrapped(w, "      cause: ", "        ", k.Cause)
	}
}

// printRetried lists the attempts that ended indeterminate and were run
// again with the next seed, one a line: what happened to them is part of
// the verdict's evidence.
func printRetried(w io.Writer, retried []result.Scenario) {
	if len(retried) == 0 {
		return
	}
	fmt.Fprintln(w, "\nindeterminate attempts, each run again with the next seed:")
	for _, r := range retried {
		head := fmt.Sprintf("  %s [%s] seed %d, attempt %d: ", r.Name, r.Variant, r.Seed, r.Attempt)
		printWrapped(w, head, "      ", firstLine(r.Reason))
	}
}

// printWrapped prints text wrapped after head (see wrap).
func printWrapped(w io.Writer, head, indent, text string) {
	for _, line := range wrap(head, indent, strings.Fields(text), termWidth) {
		fmt.Fprintln(w, line)
	}
}

// wrap lays words out after head, a space between two, so that no line has
// more than width runes; the lines after the first start with indent. A
// word too long for a line of its own is broken after a ' ', '/', ',', '-',
// '=' or '_' near the end of the room left, or else where the room ends; so
// is a head too long for a line.
func wrap(head, indent string, words []string, width int) []string {
	width = max(width, 2)
	if utf8.RuneCountInString(indent) > width/2 {
		indent = strings.Repeat(" ", width/4)
	}
	ind := []rune(indent)
	var lines []string
	emit := func(line []rune) { lines = append(lines, strings.TrimRight(string(line), " ")) }
	cur := []rune(head)
	for len(cur) > width {
		n := breakAt(cur, width)
		emit(cur[:n])
		cur = append(slices.Clone(ind), cur[n:]...)
	}
	placed := false                                 // a word is on this line
	content := strings.TrimSpace(string(cur)) != "" // it holds more than the indent
	for _, word := range words {
		wr := []rune(word)
		for len(wr) > 0 {
			sep := 0
			if placed {
				sep = 1
			}
			if len(cur)+sep+len(wr) <= width {
				if placed {
					cur = append(cur, ' ')
				}
				cur = append(cur, wr...)
				placed, content = true, true
				break
			}
			room := width - len(cur) - sep
			if content && (len(ind)+len(wr) <= width || room < min(8, width-len(ind))) {
				// on a line of its own it fits, or there is next to no room
				// left here: start one
				emit(cur)
				cur, placed, content = slices.Clone(ind), false, false
				continue
			}
			// too long for any line: fill this one, go on with the rest
			n := breakAt(wr, room)
			if placed {
				cur = append(cur, ' ')
			}
			emit(append(cur, wr[:n]...))
			cur, placed, content = slices.Clone(ind), false, false
			wr = wr[n:]
		}
	}
	if content || len(lines) == 0 {
		emit(cur)
	}
	return lines
}

// breakAt returns where to break s, which is longer than room: after the
// last ' ', '/', ',', '-', '=' or '_' in the second half of the room, else
// at the room's end.
func breakAt(s []rune, room int) int {
	room = max(room, 1)
	for i := room; i > room/2; i-- {
		switch s[i-1] {
		case ' ', '/', ',', '-', '=', '_':
			return i
		}
	}
	return room
}
