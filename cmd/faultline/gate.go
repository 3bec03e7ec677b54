package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"faultline/harness/gate"
	"faultline/harness/result"
	"faultline/harness/runner"
	"faultline/harness/supervisor"
	"faultline/scenarios"
)

func cmdGate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	var c common
	c.flags(fs)
	// gate's --target repeats: several pipelines on one infrastructure
	fs.Var(targetsFlag{&c}, "target", "a pipeline's target file; give it again to gate several pipelines in one run (default: $FAULTLINE_TARGET, else the reference pipeline, system/faultline.yaml)")
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
	targets := c.targets()
	seen := map[string]bool{}
	plans := make([]gate.Plan, len(targets))
	for i, t := range targets {
		if seen[t.Name] {
			return usagef("two targets named %q: each needs its own name (its report folder)", t.Name)
		}
		seen[t.Name] = true
		catches, err := gate.CatchesOf(t, scenarios.All())
		if err != nil {
			return usageError{err.Error()}
		}
		plans[i] = gate.Plan{Scenarios: scenarios.All(), Catches: catches, Parallel: c.parallel}
		for s := 0; s < *seeds; s++ {
			plans[i].Seeds = append(plans[i].Seeds, c.seed+int64(s))
		}
	}
	dir, err := outDir(c.out)
	if err != nil {
		return err
	}
	rep := newReporter(stderr)
	defer rep.Stop()
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	rep.Logf("gate: targets %v, seeds %v; report in %s", names, plans[0].Seeds, dir)
	for i := range plans {
		prefix := ""
		if len(targets) > 1 {
			prefix = targets[i].Name + ": "
		}
		plans[i].Progress = func(done, total int, res result.Scenario) {
			rep.Done(prefix+gate.RunName(res.Name, res.Variant, res.Seed), fmt.Sprintf("%s[%d/%d] %s [%s] seed %d: %s (%.1fs)", prefix, done, total, res.Name, res.Variant, res.Seed, res.Verdict, float64(res.DurationMS)/1000))
		}
		plans[i].Phase = func(run, phase string) { rep.Phase(prefix+run, phase) }
		plans[i].Tick = func(run, phase string, done float64) { rep.Tick(prefix+run, phase, done) }
	}

	started := time.Now()
	outs := make([]result.Run, len(targets))
	err = withSharedCleanup(ctx, c, dir, rep, func(sh *runner.Shared, cleanup *supervisor.Cleanup) error {
		for i, t := range targets {
			// The first target's time to a verdict counts the shared
			// start-up; the others', their own build and runs.
			tsh, from := sh, started
			if i > 0 {
				from = time.Now()
				var err error
				if tsh, err = sh.WithTarget(ctx, t, cleanup); err != nil {
					return err
				}
			}
			out, err := gate.Run(ctx, tsh, plans[i])
			if err != nil {
				return err
			}
			out.Infra = sh.Infra.Name()
			out.Target = t.Name
			if out.Timing != nil {
				out.Timing.TotalMS = time.Since(from).Milliseconds()
			}
			outs[i] = out
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The verdicts are in once the runs are over and the infrastructure is
	// down; the reports are written after.
	rep.Stop()
	pass := true
	for i, t := range targets {
		out := outs[i]
		reportDir := dir
		if len(targets) > 1 {
			fmt.Fprintf(stdout, "\n== target %s (%s)\n", t.Name, t.Path)
			reportDir = filepath.Join(dir, t.Name)
			if err := os.MkdirAll(reportDir, 0o755); err != nil {
				return fmt.Errorf("report folder: %w", err)
			}
		}
		printGate(stdout, out, plans[i].Catches)
		printTiming(stdout, out.Timing, out.Scenarios, "gate", waits(true, t.Lease))
		if err := writeReport(ctx, reportDir, out, stdout, rep); err != nil {
			return err
		}
		pass = pass && out.Pass
	}
	if len(targets) > 1 {
		for i, t := range targets {
			fmt.Fprintf(stdout, "target %-16s %s\n", t.Name, map[bool]string{true: "PASS", false: "FAIL"}[outs[i].Pass])
		}
		fmt.Fprintf(stdout, "whole gate: %s\n", time.Since(started).Round(time.Second))
	}
	if !pass {
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
