package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/faultline-dev/faultline/harness/explore"
)

// cmdMerge merges the explore.json files of the shards of one exploration
// into one report: `faultline merge [--out DIR] DIR...`, each DIR a shard's
// report folder (or its explore.json).
func cmdMerge(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("merge", flag.ContinueOnError)
	out := fs.String("out", "", "report folder of the merged exploration (default: a new folder under reports/, with reports/latest pointing at it)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: faultline merge [--out DIR] DIR...   (each DIR holds a shard's explore.json)")
		fs.PrintDefaults()
	}
	paths, err := parseInterspersed(fs, args, stderr)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return usagef("merge: name the report folders (or explore.json files) of the shards to merge")
	}
	var reports []*explore.Report
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			p = filepath.Join(p, explore.ReportFile)
		}
		r, err := explore.LoadReport(p)
		if err != nil {
			return usageError{err.Error()}
		}
		reports = append(reports, r)
	}
	merged, err := explore.Merge(reports)
	if err != nil {
		return usageError{err.Error()}
	}
	dir, err := outDir(*out)
	if err != nil {
		return err
	}
	if err := explore.WriteAll(dir, merged); err != nil {
		return err
	}
	printExplore(stdout, merged, dir, "")
	return exploreVerdict(merged)
}
