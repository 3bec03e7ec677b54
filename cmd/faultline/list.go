package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"faultline/scenarios"
	"faultline/system/crashpoint"
)

func cmdList(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("list takes no arguments, got %q", fs.Arg(0))
	}
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CRASH POINT\tPROCESS\tWINDOW IT OPENS\tGUARD")
	for _, p := range crashpoint.Catalogue() {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Name, p.Process, p.Window, p.Guard)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "SCENARIO\tWINDOW\tWHAT HAPPENS")
	for _, s := range scenarios.All() {
		fmt.Fprintf(w, "%s\t%s\t%s\n", s.Name, s.Window, s.Description)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "VARIANT\tGUARD REMOVED\tCAUGHT BY (EXPECTED VIOLATION)")
	seen := map[string]int{}
	type row struct {
		name, guard string
		by          []string
	}
	var rows []*row
	for _, c := range scenarios.Catches() {
		i, ok := seen[c.Variant]
		if !ok {
			i = len(rows)
			seen[c.Variant] = i
			rows = append(rows, &row{name: c.Variant, guard: c.Guard})
		}
		rows[i].by = append(rows[i].by, c.Scenario+" ("+c.Expect+")")
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\n", r.name, r.guard, strings.Join(r.by, ", "))
	}
	return w.Flush()
}
