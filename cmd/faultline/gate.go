package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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
	catches, err := gate.CatchesOf(c.target, scenarios.All())
	if err != nil {
		return usageError{err.Error()}
	}
	plan := gate.Plan{Scenarios: scenarios.All(), Catches: catches, Parallel: c.parallel}
	for i := 0; i < *seeds; i++ {
		plan.Seeds = append(plan.Seeds, c.seed+int64(i))
	}
	rep := newReporter(stderr)
	defer rep.Stop()
	rep.Logf("gate: target %s, seeds %v; report in %s", c.target.Name, plan.Seeds, dir)
	plan.Progress = func(done, total int, res result.Scenario) {
		rep.Done(gate.RunName(res.Name, res.Variant, res.Seed), fmt.Sprintf("[%d/%d] %s [%s] seed %d: %s (%.1fs)", done, total, res.Name, res.Variant, res.Seed, res.Verdict, float64(res.DurationMS)/1000))
	}
	plan.Phase = rep.Phase
	plan.Tick = rep.Tick

	started := time.Now()
	var out result.Run
	err = withShared(ctx, c, dir, rep, func(sh *runner.Shared) error {
		var err error
		out, err = gate.Run(ctx, sh, plan)
		out.Infra = sh.Infra.Name()
		out.Target = c.target.Name
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
	rep.Stop()
	printGate(stdout, out, plan.Catches)
	printTiming(stdout, out.Timing, out.Scenarios, "gate", waits(true, c.target.Lease))
	if err := writeReport(ctx, dir, out, stdout, rep); err != nil {
		return err
	}
	if !out.Pass {
		return errViolation
	}
	return nil
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
