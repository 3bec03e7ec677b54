package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/scenarios"
)

func cmdList(args []string, stdout io.Writer) error {
	fs := newFlagSet("list")
	var path string
	targetFlag(fs, &path)
	format := fs.String("format", "text", "text (tables) or json (the same, for programs: docs/cli.md)")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("list takes no arguments, got %q", fs.Arg(0))
	}
	if *format != "text" && *format != "json" {
		return usagef("--format %q: want text or json", *format)
	}
	t, err := loadTarget(path)
	if err != nil {
		return err
	}
	// A known finding naming no scenario of the catalogue is the file's
	// mistake: said after a text listing, which shows the catalogue; a
	// JSON one is not written.
	_, knownErr := gate.KnownFindingsOf(t, scenarios.Every())
	if *format == "json" {
		if knownErr != nil {
			return targetErrorf("%v", knownErr)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(listingOf(t)); err != nil {
			return fmt.Errorf("list: %w", err)
		}
		return nil
	}
	if err := printList(stdout, t); err != nil {
		return err
	}
	if knownErr != nil {
		return targetErrorf("%v", knownErr)
	}
	return nil
}

// printList prints what list shows, as tables.
func printList(stdout io.Writer, t *target.Target) error {
	offers := t.Windows()
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "target %s (%s)\n\n", t.Name, t.Path)
	fmt.Fprintln(w, "WINDOW\tROLE\tOFFERED BY\tWHAT A CRASH THERE LEAVES HALF DONE\tGUARD")
	for _, win := range protocol.Windows() {
		by := "-"
		if ps := offers[win.Name]; len(ps) > 0 {
			by = strings.Join(ps, ", ")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", win.Name, win.Role, by, win.Opens, win.Guard)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "WINDOW OPENED FROM OUTSIDE\tROLE\tWHAT IT LEAVES HALF DONE\tGUARD")
	for _, win := range protocol.OutsideWindows() {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", win.Name, win.Role, win.Opens, win.Guard)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "SCENARIO\tWINDOW\tTRAFFIC\tALSO CHECKS\tNEEDS OF THE TARGET\tSETTINGS ON THIS TARGET\tON THIS RELAY (%s)\tWHAT HAPPENS\n", t.RelayModel())
	for _, s := range scenarios.All() {
		shown := asOnRelay(s, t)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, cmp.Or(shown.Window, "any, at random"), trafficOf(s), alsoChecks(s, t),
			needsOf(shown.Schedule(1)), settingsOn(s, t), relayOn(s, t), shown.Description)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "PROFILE %s: A CLUSTERED BROKER, A FAILING-OVER DATABASE\tWINDOW\tALSO CHECKS\tON THIS TARGET\tWHAT HAPPENS\n", scenarios.ProfileProduction)
	for _, s := range scenarios.Production() {
		on := "runs"
		if why := t.TakesBrokerNodes(); why != "" && slices.Contains(fault.NeedsOf(s.Schedule(1)), fault.CapCluster) {
			on = "not run: " + why
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Window, alsoChecks(s, t), on, s.Description)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "TRAFFIC\tWHAT IT SENDS")
	for _, p := range workload.ProfileList() {
		fmt.Fprintf(w, "%s\t%s\n", p.Name, p.Sends)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "FAULT KIND\tOPENS\tWHAT IT DOES")
	for _, k := range fault.Kinds() {
		fmt.Fprintf(w, "%s\t%s\t%s\n", k.Name(), cmp.Or(k.Opens(), "-"), k.Doc())
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "VARIANT\tGUARD REMOVED\tCAUGHT BY (EXPECTED VIOLATION)")
	for _, v := range t.Variants {
		fmt.Fprintf(w, "%s\t%s\t%s (%s)\n", v.Name, v.Guard, strings.Join(v.CaughtBy, ", "), v.Expect)
	}
	if len(t.KnownFindings) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "KNOWN FINDINGS\tVIOLATIONS\tCAUSE (the gate passes on exactly these; one no longer shown fails it)")
		for _, k := range t.KnownFindings {
			fmt.Fprintf(w, "%s\t%s\t%s\n", k.Scenario, strings.Join(k.Violations, ", "), strings.Join(strings.Fields(k.Cause), " "))
		}
	}
	return w.Flush()
}

// alsoChecks names the optional invariants a scenario is judged by on t,
// as it runs there (without a setting it prefers, it may ask for fewer).
func alsoChecks(s runner.Scenario, t *target.Target) string {
	return cmp.Or(strings.Join(alsoCheckList(s, t), ", "), "-")
}

// alsoCheckList is alsoChecks as a list.
func alsoCheckList(s runner.Scenario, t *target.Target) []string {
	if on, _, err := s.On(t); err == nil {
		s = on
	}
	return append([]string{}, s.Invariants...)
}

// needsOf names the windows (crash points, watched tables, the topology) a
// schedule needs; the settings have their own column (settingsOn).
func needsOf(faults []fault.Fault) string {
	out := needList(faults)
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}

// needList is needsOf as a sorted list.
func needList(faults []fault.Fault) []string {
	out := []string{}
	for _, f := range faults {
		if k, ok := fault.KindOf(f); ok {
			// Each window a fault opens needs something of the target: a
			// crash point, a watched table, a topology.
			if _, w := k.Window(f); w != "" {
				out = append(out, orOutside(f, w))
			}
		}
		if fault.ObservedBy([]fault.Fault{f})[history.SourceAudit] {
			out = append(out, "outbox audit trail")
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// settingsOn says what a scenario's run rests on among the target's
// settings: each one it requires (offered, or the scenario is not run),
// each one it uses if offered, and, for those t lacks, how the scenario
// runs without them (its timing bounded instead) or why it cannot.
func settingsOn(s runner.Scenario, t *target.Target) string {
	var out, lacking []string
	for _, name := range slices.Sorted(maps.Keys(s.Settings)) {
		state := "offered"
		if _, ok := t.Settings[name]; !ok {
			state = "NOT offered"
			lacking = append(lacking, name)
		}
		out = append(out, fmt.Sprintf("%s=%s required (%s)", name, s.Settings[name], state))
	}
	for _, name := range slices.Sorted(maps.Keys(s.Prefers)) {
		state := "offered"
		if _, ok := t.Settings[name]; !ok {
			state = "not offered"
		}
		out = append(out, fmt.Sprintf("%s=%s if offered (%s)", name, s.Prefers[name], state))
	}
	if len(out) == 0 {
		return "-"
	}
	line := strings.Join(out, ", ")
	switch _, how, err := s.On(t); {
	case len(lacking) > 0:
		line += ": not run: the target offers no " + strings.Join(lacking, ", ")
	case err != nil:
		line += ": not run: " + err.Error()
	case how != "":
		line += ": " + how
	}
	return line
}

// orOutside is the window w of f as a need: its crash point, or, where the
// target maps none, what opens it from outside.
func orOutside(f fault.Fault, w string) string {
	if opener, ok := fault.OutsideOpener(f); ok {
		return w + " (crash point) or " + opener
	}
	return w
}

// trafficNames are the profiles a scenario runs under, its own first.
func trafficNames(s runner.Scenario) []string {
	var out []string
	for _, spec := range s.Traffic() {
		out = append(out, spec.ProfileName())
	}
	return out
}

// trafficOf is the TRAFFIC column: the scenario's profile, or its
// profiles and that the seed picks one.
func trafficOf(s runner.Scenario) string {
	if len(s.Also) == 0 {
		return s.Workload.ProfileName()
	}
	return strings.Join(trafficNames(s), " or ") + " (by seed)"
}
