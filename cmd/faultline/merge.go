package main

import (
	"io"
	"os"
	"path/filepath"

	"github.com/faultline-dev/faultline/harness/explore"
)

// cmdMerge merges the explore.json files of the shards of one exploration
// into one report: `faultline merge [--out DIR] DIR...`, each DIR a shard's
// report folder (or its explore.json).
func cmdMerge(args []string, stdout io.Writer) error {
	fs := newFlagSet("merge")
	out := fs.String("out", "", "report folder of the merged exploration (default: a new folder under reports/, with reports/latest pointing at it)")
	paths, err := parseInterspersed(fs, args, stdout)
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
			return usageError{msg: err.Error()}
		}
		reports = append(reports, r)
	}
	merged, err := explore.Merge(reports)
	if err != nil {
		return usageError{msg: err.Error()}
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
