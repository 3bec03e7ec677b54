package reports

import (
	"cmp"
	"slices"

	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
)

// Window is one line group of the report's window table: a window the
// run's scenarios opened, worded as the protocol words it, and one of the
// target's variants that a scenario opening it must catch. The table is
// drawn from the run alone (windowsOf): the windows from its results, the
// variants from the target's own list, so another target's variants get
// their own lines and a target with none gets none.
//
// Consecutive entries with the same Boundary, Name, Window and Scenario
// are one window with several variant lines.
type Window struct {
	Boundary string // the boundary of the pipeline it sits in (protocol)
	Window   string // what an attack there leaves half done (protocol)
	// Name is the window's protocol name, "" for a scenario's own window
	// (a run that names no window the protocol knows); CrashPoint: a
	// target's crash point can sit there (else faultline opens it from
	// outside).
	Name       string
	CrashPoint bool
	Guard      string // what closes it on a correct pipeline (protocol)
	// Scenario and Also are the scenarios that opened it on the correct
	// pipeline, each with its own line.
	Scenario string
	Also     []string
	Variant  string // the target's variant without the guard; "" for none
	Without  string // the outcome the target expects without the variant's guard
	// VariantScenario is the scenario of this window the target names as
	// catching Variant.
	VariantScenario string
	// Expect is the violation kind that catches Variant.
	Expect string
}

func (w Window) variantScenario() string { return w.VariantScenario }

// Key tells the window apart from the table's others: its protocol name,
// or for a scenario's own window, its text.
func (w Window) Key() string { return cmp.Or(w.Name, w.Window) }

// windowText words a window the run names as the protocol does: its name
// and what it leaves half done; a name the protocol does not know (a run
// written before windows were named) as it is.
func windowText(name string) string {
	if w, ok := protocol.DescribeWindow(name); ok {
		return w.Name + ": " + w.Opens
	}
	return name
}

// otherBoundary heads the windows the protocol does not know: a run
// (written before windows were named, or of a scenario with none of its
// own) gets a window of its own, from its scenario.
const otherBoundary = "other windows"

// targetVariants are the variants the table draws its variant lines
// from: the target's own list as results.json carries it, or, in results
// written before it did, the gate's verdicts (every variant it ran, with
// the scenarios meant to catch it).
func targetVariants(run result.Run) []result.TargetVariant {
	if run.TargetVariants != nil {
		return run.TargetVariants
	}
	var out []result.TargetVariant
	for _, v := range run.Variants {
		var by []string
		for _, list := range [][]string{v.CaughtBy, v.Missed, v.Indeterminate, v.NotRun} {
			for _, s := range list {
				if !slices.Contains(by, s) {
					by = append(by, s)
				}
			}
		}
		out = append(out, result.TargetVariant{Name: v.Name, Guard: v.Guard, Expect: v.Expected, CaughtBy: by})
	}
	return out
}

// windowsOf draws the window table from the run: every window one of its
// scenarios opened, in pipeline order (the protocol's boundaries, then its
// windows' order; windows it does not know last), each with the scenarios
// that opened it on the correct pipeline and an entry for each of the
// target's variants a scenario of the window must catch.
func windowsOf(run result.Run) []Window {
	type group struct {
		w        Window
		order    int
		scens    []string // on the correct pipeline
		catching []Window // variant entries
	}
	rank := map[string]int{}
	for i, w := range append(protocol.Windows(), protocol.OutsideWindows()...) {
		rank[w.Name] = i
	}
	boundary := map[string]int{}
	for i, b := range protocol.Boundaries() {
		boundary[b] = i
	}
	named := map[string]string{} // scenario → the window its results name
	var scens []string
	for _, s := range sortedResults(run) {
		if w, seen := named[s.Name]; !seen || w == "" {
			if !seen {
				scens = append(scens, s.Name)
			}
			named[s.Name] = s.Window
		}
	}
	groups := map[string]*group{}
	var keys []string
	windowOf := map[string]string{} // scenario → its group's key
	for _, name := range scens {
		key := "own\x00" + cmp.Or(named[name], name)
		w := Window{Boundary: otherBoundary, Window: cmp.Or(named[name], name)}
		order := len(rank) + 1
		if pw, ok := protocol.DescribeWindow(named[name]); ok {
			key = pw.Name
			w = Window{Boundary: pw.Boundary, Window: pw.Opens, Name: pw.Name, CrashPoint: pw.CrashPoint, Guard: pw.Guard}
			order = len(rank)
			if r, ok := rank[pw.Name]; ok {
				order = r
			}
		}
		windowOf[name] = key
		if groups[key] == nil {
			groups[key] = &group{w: w, order: order}
			keys = append(keys, key)
		}
	}
	for _, s := range sortedResults(run) {
		if variantOf(s) != correct {
			continue
		}
		g := groups[windowOf[s.Name]]
		if !slices.Contains(g.scens, s.Name) {
			g.scens = append(g.scens, s.Name)
		}
	}
	for _, v := range targetVariants(run) {
		for _, s := range v.CaughtBy {
			key, ok := windowOf[s]
			if !ok {
				continue // no run of it: nothing says which window it opens
			}
			g := groups[key]
			without := cmp.Or(v.Expect, "any violation")
			if v.Guard != "" {
				without += " (without " + v.Guard + ")"
			}
			g.catching = append(g.catching, Window{Variant: v.Name, VariantScenario: s, Expect: v.Expect, Without: without})
		}
	}
	slices.SortStableFunc(keys, func(a, b string) int {
		ga, gb := groups[a], groups[b]
		ba, okA := boundary[ga.w.Boundary]
		bb, okB := boundary[gb.w.Boundary]
		if !okA {
			ba = len(boundary)
		}
		if !okB {
			bb = len(boundary)
		}
		return cmp.Or(cmp.Compare(ba, bb), cmp.Compare(ga.order, gb.order))
	})
	var out []Window
	for _, key := range keys {
		g := groups[key]
		w := g.w
		if len(g.scens) > 0 {
			w.Scenario, w.Also = g.scens[0], g.scens[1:]
		}
		if len(g.catching) == 0 {
			out = append(out, w)
			continue
		}
		for _, c := range g.catching {
			e := w
			e.Variant, e.VariantScenario, e.Expect, e.Without = c.Variant, c.VariantScenario, c.Expect, c.Without
			out = append(out, e)
		}
	}
	return out
}
