package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"faultline/harness/gate"
	"faultline/harness/result"
	"faultline/harness/runner"
	"faultline/scenarios"
)

func cmdGate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	var c common
	c.flags(fs)
	seeds := fs.Int("seeds", 1, "run the correct pipeline's scenarios with this many seeds (seed, seed+1, ...)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: faultline gate [flags]")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("gate takes no arguments, got %q", fs.Arg(0))
	}
	if *seeds < 1 {
		return usagef("--seeds must be at least 1, got %d", *seeds)
	}
	if err := c.resolve(); err != nil {
		return err
	}
	dir, err := outDir(c.out)
	if err != nil {
		return err
	}
	plan := gate.Plan{Scenarios: scenarios.All(), Catches: scenarios.Catches(), Parallel: c.parallel}
	for i := 0; i < *seeds; i++ {
		plan.Seeds = append(plan.Seeds, c.seed+int64(i))
	}
	progress(stderr, "gate: seeds %v; report in %s", plan.Seeds, dir)
	plan.Progress = func(done, total int, res result.Scenario) {
		progress(stderr, "[%d/%d] %s [%s] seed %d: %s (%.1fs)", done, total, res.Name, res.Variant, res.Seed, res.Verdict, float64(res.DurationMS)/1000)
	}
	plan.Phase = func(run, phase string) { progress(stderr, "  %s: %s", run, phase) }
	b := newBars(stderr)
	plan.Tick = b.tick

	started := time.Now()
	var out result.Run
	err = withShared(ctx, c, filepath.Join(dir, "runs"), stderr, func(sh *runner.Shared) error {
		var err error
		out, err = gate.Run(ctx, sh, plan)
		out.Infra = sh.Infra.Name()
		return err
	})
	if err != nil {
		return err
	}
	// The verdict is in once the runs are over and the infrastructure is
	// down; the report is written after.
	if out.Timing != nil {
		out.Timing.TotalMS = time.Since(started).Milliseconds()
	}
	printGate(stdout, out, plan.Catches)
	printTiming(stdout, out.Timing, out.Scenarios, "gate", waits(true))
	if err := writeReport(ctx, dir, out, stdout, stderr); err != nil {
		return err
	}
	if !out.Pass {
		return errViolation
	}
	return nil
}

// printGate prints the correct pipeline's verdicts and the catch matrix.
func printGate(w io.Writer, run result.Run, catches []gate.Catch) {
	fmt.Fprintln(w, "correct pipeline:")
	failed := 0
	for _, r := range run.Scenarios {
		if r.Variant != "correct" {
			continue
		}
		if r.Verdict != result.Pass {
			failed++
		}
		fmt.Fprintf(w, "  %-32s seed %-8d %s  %s\n", r.Name, r.Seed, r.Verdict, oneLine(r))
	}
	variants, scens, cells := gate.Matrix(run, catches)
	fmt.Fprintln(w, "\ncatch matrix (variant × scenario):")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  variant\t%s\tverdict\n", strings.Join(scens, "\t"))
	for _, v := range variants {
		row := []string{}
		for _, s := range scens {
			row = append(row, cells[v][s])
		}
		verdict := "MISSED"
		for _, vr := range run.Variants {
			if vr.Name == v && vr.Caught {
				verdict = "caught by " + strings.Join(vr.CaughtBy, ", ")
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v, strings.Join(row, "\t"), verdict)
	}
	_ = tw.Flush()
	caught := 0
	for _, v := range run.Variants {
		if v.Caught {
			caught++
		}
	}
	fmt.Fprintf(w, "\n%d/%d correct-pipeline runs passed; %d/%d variants caught\n", countCorrect(run)-failed, countCorrect(run), caught, len(run.Variants))
}

func countCorrect(run result.Run) int {
	n := 0
	for _, r := range run.Scenarios {
		if r.Variant == "correct" {
			n++
		}
	}
	return n
}
