package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/scenarios"
)

func cmdList(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	var path string
	targetFlag(fs, &path)
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("list takes no arguments, got %q", fs.Arg(0))
	}
	t, err := loadTarget(path)
	if err != nil {
		return err
	}
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
	fmt.Fprintln(w, "SCENARIO\tWINDOW\tNEEDS OF THE TARGET\tWHAT HAPPENS")
	for _, s := range scenarios.All() {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", s.Name, s.Window, needsOf(s.Schedule(1), s.Settings), s.Description)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "VARIANT\tGUARD REMOVED\tCAUGHT BY (EXPECTED VIOLATION)")
	for _, v := range t.Variants {
		fmt.Fprintf(w, "%s\t%s\t%s (%s)\n", v.Name, v.Guard, strings.Join(v.CaughtBy, ", "), v.Expect)
	}
	return w.Flush()
}

// needsOf names the crash point windows and settings a schedule needs.
func needsOf(faults []fault.Fault, settings map[string]string) string {
	var out []string
	for _, f := range faults {
		switch f := f.(type) {
		case fault.Crash:
			out = append(out, f.Point)
		case fault.Toxic:
			if f.At != nil {
				out = append(out, f.At.Point)
			}
		case fault.LinkDown:
			if f.At != nil {
				out = append(out, f.At.Point)
			}
		}
	}
	for name := range settings {
		out = append(out, "setting "+name)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}
