package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/target"
)

// gateFixture is a gate's result with 14 variants and 25 scenarios, some
// of the names and failure reasons far longer than any real one.
func gateFixture() (result.Run, []gate.Catch) {
	var scens []string
	for i := range 25 {
		scens = append(scens, fmt.Sprintf("inventory-crash-after-receive-%02d", i))
	}
	scens[7] = "relay-db-slow-past-lease-while-the-broker-restarts-and-every-link-drops-packets-" + strings.Repeat("x", 60)
	kinds := []string{"lost", "phantom", "duplicate-effect", "stale-write", "stuck-row"}
	var variants []string
	for i := range 14 {
		variants = append(variants, fmt.Sprintf("variant-%02d-inbox-own-tx", i))
	}
	variants[3] = "a-variant-whose-name-is-longer-than-the-variant-column-by-a-long-way"

	run := result.Run{Schema: result.Schema, Seed: 42, Seeds: []int64{42}}
	for i, s := range scens {
		r := result.Scenario{Name: s, Variant: "correct", Seed: 42, Verdict: result.Pass, RecoveryMS: 1234,
			Counts: result.Counts{Orders: 1200, Lost: 0, DuplicatesAbsorbed: 37, FencedWrites: 2}}
		if i%6 == 5 {
			r.Verdict = result.Fail
			r.Reason = "invariant broken: every committed event has exactly one effect: " + strings.Repeat("3f2a9c1e-0b7d-4e55-9a61-2c8e5d7f1a0b, ", 6)
			r.Dir = "/work/main/reports/20260101-120000/runs/" + s + "-correct-seed42-abcdef/and/a/very/long/path/" + strings.Repeat("d", 120)
			r.Counts.Lost = 3
		}
		run.Scenarios = append(run.Scenarios, r)
	}
	var catches []gate.Catch
	k := 0 // every scenario catches some variant
	for i, v := range variants {
		for j := range 2 + i%5 { // 2..6 catching scenarios a variant
			s := scens[k%len(scens)]
			k++
			kind := kinds[(i+j)%len(kinds)]
			catches = append(catches, gate.Catch{Variant: v, Scenario: s, Expect: kind, Guard: "a guard"})
			r := result.Scenario{Name: s, Variant: v, Seed: 42}
			switch {
			case i%4 == 3 && j == 0: // never ran
				r.Verdict, r.Reason = result.NotRun, "context canceled"
			case i%5 == 4: // ran, did not report it
				r.Verdict = result.Pass
			default:
				r.Verdict = result.Fail
				r.Invariants = []result.Invariant{{Name: "x", OK: false, Violations: []result.Violation{{Kind: kind}}}}
			}
			run.Scenarios = append(run.Scenarios, r)
		}
	}
	run.Variants = gate.Verdicts(catches, run.Scenarios)
	return run, catches
}

func TestPrintGateFitsAHundredColumns(t *testing.T) {
	run, catches := gateFixture()
	variants, scens, _ := gate.Matrix(run, catches)
	require.Len(t, variants, 14)
	require.Len(t, scens, 25)

	var out bytes.Buffer
	printGate(&out, run, catches)
	text := out.String()
	t.Log("\n" + text)
	for i, line := range strings.Split(text, "\n") {
		assert.LessOrEqual(t, utf8.RuneCountInString(line), termWidth, "line %d is too wide: %q", i+1, line)
	}

	// Every variant has its line, with its verdict.
	for _, v := range run.Variants {
		verdict := "MISSED"
		if v.Caught {
			verdict = "caught"
		}
		found := false
		for line := range strings.Lines(text) {
			if strings.HasPrefix(strings.TrimSpace(line), v.Name) {
				found = true
				assert.Contains(t, line, verdict, v.Name)
			}
		}
		assert.True(t, found, "no line for variant %s", v.Name)
	}
	// Every correct-pipeline run is listed, its failures with reason and logs.
	assert.Equal(t, 25, strings.Count(text, "seed 42 "))
	assert.Contains(t, text, "logs: /work/main/reports/")
	assert.Contains(t, text, "21/25 correct-pipeline runs passed")
	caught := 0
	for _, v := range run.Variants {
		if v.Caught {
			caught++
		}
	}
	assert.Contains(t, text, fmt.Sprintf("%d/14 variants caught", caught))
}

func TestPrintGateVariantLine(t *testing.T) {
	catches := []gate.Catch{
		{Variant: "no-inbox", Scenario: "relay-crash-after-confirm", Expect: "duplicate-effect"},
		{Variant: "no-inbox", Scenario: "inventory-crash-after-commit", Expect: "duplicate-effect"},
		{Variant: "no-lease", Scenario: "relay-crash-after-claim", Expect: "stuck-row"},
		{Variant: "no-lease", Scenario: "broker-nack", Expect: "stuck-row"},
	}
	dup := []result.Invariant{{Violations: []result.Violation{{Kind: "duplicate-effect"}}}}
	results := []result.Scenario{
		{Name: "relay-crash-after-confirm", Variant: "no-inbox", Verdict: result.Fail, Invariants: dup},
		{Name: "inventory-crash-after-commit", Variant: "no-inbox", Verdict: result.Fail, Invariants: dup},
		{Name: "relay-crash-after-claim", Variant: "no-lease", Verdict: result.Pass},
	}
	run := result.Run{Scenarios: results, Variants: gate.Verdicts(catches, results)}
	var out bytes.Buffer
	printGate(&out, run, catches)
	assert.Contains(t, out.String(), "\n"+
		"  no-inbox  caught  by relay-crash-after-confirm (duplicate-effect),\n"+
		"                    inventory-crash-after-commit (duplicate-effect)\n"+
		"  no-lease  MISSED  missed by relay-crash-after-claim (stuck-row); not run: broker-nack\n")
}

// The terminal's last line agrees with the report: a variants figure only
// for a target that lists variants, no 0/0.
func TestPrintGateVariantsFigure(t *testing.T) {
	withVariants, catches := gateFixture()
	blackBox := result.Run{Scenarios: []result.Scenario{
		{Name: "blackbox-relay-answers-lost", Variant: "correct", Verdict: result.Fail},
		{Name: "broker-restart", Variant: "correct", Verdict: result.Pass},
		{Name: "relay-crash-after-claim", Variant: "correct", Verdict: result.NotRun},
	}, Variants: []result.Variant{}}
	for _, tc := range []struct {
		name    string
		run     result.Run
		catches []gate.Catch
		want    string
		not     []string
	}{
		{"black-box target, no variants", blackBox, nil,
			"\n1/2 correct-pipeline runs passed, 1 failed (1 more not run: the target does not offer what they need)\n",
			[]string{"variants caught", "catch matrix"}},
		{"target with variants", withVariants, catches, "variants caught", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			printGate(&out, tc.run, tc.catches)
			assert.Contains(t, out.String(), tc.want)
			for _, n := range tc.not {
				assert.NotContains(t, out.String(), n)
			}
		})
	}
}

func TestWrap(t *testing.T) {
	for _, tc := range []struct {
		name, head, indent, text string
		width                    int
		want                     []string
	}{
		{"fits", "  a  ", "     ", "one two", 20, []string{"  a  one two"}},
		{"at spaces", "> ", "  ", "one two three four", 10, []string{"> one two", "  three", "  four"}},
		{"no text", "head  ", "", "", 10, []string{"head"}},
		{"long word after a slash", "", "  ", "logs: /aaaa/bbbb/cccc/dddd", 12, []string{"logs:", "  /aaaa/", "  bbbb/cccc/", "  dddd"}},
		{"long word, nowhere to break", "", "", strings.Repeat("x", 25), 10, []string{"xxxxxxxxxx", "xxxxxxxxxx", "xxxxx"}},
		{"long head", strings.Repeat("h", 25), " ", "t", 10, []string{"hhhhhhhhhh", " hhhhhhhhh", " hhhhhht"}},
		{"words with spaces stay whole", "> ", "  ", "a (lost),|b (lost)", 14, []string{"> a (lost),", "  b (lost)"}},
		{"a word with spaces too long breaks after a dash", "", "", "aaaa (bbbb-cccc)", 12, []string{"aaaa (bbbb-", "cccc)"}},
		{"a word with spaces too long breaks at a space", "", "", "aaaaaa (bbbbbbbb)", 10, []string{"aaaaaa", "(bbbbbbbb)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			words := strings.Fields(tc.text)
			if strings.Contains(tc.text, "|") {
				words = strings.Split(tc.text, "|")
			} else if strings.Contains(tc.text, "(") {
				words = []string{tc.text}
			}
			got := wrap(tc.head, tc.indent, words, tc.width)
			assert.Equal(t, tc.want, got)
			for _, l := range got {
				assert.LessOrEqual(t, utf8.RuneCountInString(l), tc.width, l)
			}
		})
	}
}

// A known finding's run is listed as known, counted apart from the
// failures, and the finding is listed with its figures and its cause; one
// not reproduced says so and what to do.
func TestPrintGateKnownFindings(t *testing.T) {
	lost := result.Scenario{Name: "blackbox-unroutable-then-routable", Variant: "correct", Seed: 1, Verdict: result.Fail, Counts: result.Counts{Orders: 120, Lost: 73},
		Reason:     "invariant broken: no-lost",
		Invariants: []result.Invariant{{Name: "no-lost", Violations: []result.Violation{{Kind: "lost", EventIDs: []string{"e1"}}}}}}
	pass := result.Scenario{Name: "broker-restart", Variant: "correct", Seed: 1, Verdict: result.Pass}
	finding := target.KnownFinding{Scenario: lost.Name, Violations: []string{"lost"}, Cause: "watermill-amqp registers no basic.return listener"}

	runs := []result.Scenario{pass, lost}
	run := result.Run{Scenarios: runs, KnownFindings: gate.MarkKnown([]target.KnownFinding{finding}, runs), Variants: []result.Variant{}}
	require.Equal(t, result.Pass, gate.Decide(run, false))
	var out bytes.Buffer
	printGate(&out, run, nil)
	text := out.String()
	t.Log("\n" + text)
	assert.Regexp(t, `blackbox-unroutable-then-routable +seed 1 +known `, text)
	assert.Contains(t, text, "known findings (the target file's; a run showing exactly one does not fail the gate):")
	assert.Contains(t, text, "blackbox-unroutable-then-routable  shown  [lost] seed 1: lost 73")
	assert.Contains(t, text, "cause: watermill-amqp registers no basic.return listener")
	assert.Contains(t, text, "\n1/2 correct-pipeline runs passed, 1 showed a known finding; 1/1 known findings shown\n")
	assert.NotContains(t, text, "failed")

	fixed := lost
	fixed.Verdict, fixed.Invariants, fixed.Counts.Lost = result.Pass, nil, 0
	runs = []result.Scenario{pass, fixed}
	run = result.Run{Scenarios: runs, KnownFindings: gate.MarkKnown([]target.KnownFinding{finding}, runs), Variants: []result.Variant{}}
	require.Equal(t, result.Fail, gate.Decide(run, false))
	out.Reset()
	printGate(&out, run, nil)
	text = out.String()
	flat := strings.Join(strings.Fields(text), " ")
	assert.Contains(t, flat, "NOT REPRODUCED [lost] known finding not reproduced: blackbox-unroutable-then-routable no longer shows lost")
	assert.Contains(t, flat, "(passed with seed 1); if the library fixed it, remove it from the target file")
	assert.Contains(t, text, "; 0/1 known findings shown (1 NOT REPRODUCED)\n")
	for i, line := range strings.Split(text, "\n") {
		assert.LessOrEqual(t, utf8.RuneCountInString(line), termWidth, "line %d is too wide: %q", i+1, line)
	}
}
