// Package reports renders a faultline run into its report folder:
//
//	index.html     one self-contained page (inline CSS and SVG, no script,
//	               nothing loaded from the network, every value escaped by
//	               html/template): the findings (why the run failed: its
//	               failing runs with their lost events by stage, the
//	               variants not caught, the runs with no verdict), the
//	               failure-window table, the catch matrix, the time to a verdict (result.Timing, when the
//	               run recorded it) with each run's phases, and per
//	               scenario its timeline, counts, faults, evidence,
//	               invariants and violations
//	summary.md     the same headline table, verdicts, catch matrix, time
//	               to a verdict and failures in Markdown
//	results.json   the run as data (result.Run, with its schema version)
//	junit.xml      one testcase per scenario × pipeline for CI
//	screenshot.png index.html as headless Chromium draws it (Screenshot)
//
// The findings open the page; then the failure-window table filled with
// what was measured, drawn from the run itself: each window its scenarios
// opened, worded by the protocol, with their runs on the correct pipeline,
// and a line for each of the target's variants (results.json carries the
// target's list) that a scenario of the window must catch. Windows the run
// shows nothing of (the target does not offer them) are left out and
// counted in one line; a variant gets a line only when the run knows it
// (the gate's verdicts, its runs), so a target that lists no variants has
// no variant lines (a line says so), no variants figure and no matrix; a
// run that names no window the protocol knows gets a window of its own.
package reports

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/faultline-dev/faultline/harness/result"
)

// The files of a report folder.
const (
	IndexFile      = "index.html"
	SummaryFile    = "summary.md"
	ResultsFile    = "results.json"
	JUnitFile      = "junit.xml"
	ScreenshotFile = "screenshot.png"
)

// Write renders run into dir (created if missing): index.html, summary.md,
// results.json and junit.xml. A run without a schema gets result.Schema.
func Write(dir string, run result.Run) error {
	if run.Schema == "" {
		run.Schema = result.Schema
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	data, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return fmt.Errorf("reports: encode results.json: %w", err)
	}
	html, err := renderHTML(run)
	if err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	junit, err := renderJUnit(run)
	if err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{ResultsFile, append(data, '\n')},
		{SummaryFile, renderMarkdown(run)},
		{JUnitFile, junit},
		{IndexFile, html},
	} {
		if err := writeFile(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return nil
}

// writeFile replaces a file whole: a reader never sees half a report.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("reports: write %s: %w", path, werr)
	}
	return nil
}
