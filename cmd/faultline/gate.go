package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/gate"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/version"
	"github.com/faultline-dev/faultline/scenarios"
)

func cmdGate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("gate")
	var c common
	c.flags(fs)
	// gate's --target repeats: several pipelines on one infrastructure
	fs.Var(targetsFlag{&c}, "target", "a pipeline's target file; give it again to gate several pipelines in one run (default: "+defaultTargetDoc+")")
	seeds := fs.Int("seeds", 1, "run the correct pipeline's scenarios with this many seeds (seed, seed+1, ...)")
	profile := fs.String("profile", scenarios.ProfileDefault, "the scenarios to run: "+scenarios.ProfileDefault+" (one broker node, one database server) or "+scenarios.ProfileProduction+" (the default ones, and those of a clustered broker on infrastructure of its own; a target's processes must take {{amqp_urls}})")
	only := fs.String("scenarios", "", "gate only these scenarios of the profile, comma-separated (and the variants they catch): a quicker gate while working on one window; its verdict is of these alone")
	retries := fs.Int("retries", 2, "run a run that ended indeterminate (a fault that never happened, an infrastructure error) again this many times, with the next seed each time; every attempt is listed")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("gate takes no arguments, got %q", fs.Arg(0))
	}
	if *seeds < 1 || *seeds > maxSeeds {
		return usagef("--seeds must be between 1 and %d, got %d", maxSeeds, *seeds)
	}
	if *retries < 0 || *retries > maxRetries {
		return usagef("--retries must be between 0 and %d, got %d", maxRetries, *retries)
	}
	picked, err := scenarios.Profile(*profile)
	if err != nil {
		return usageError{msg: err.Error()}
	}
	if *only != "" {
		if picked, err = onlyScenarios(picked, *only, *profile); err != nil {
			return err
		}
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
		// Names are checked against every profile; the plan keeps what
		// this one runs.
		catches, err := gate.CatchesOf(t, scenarios.Every())
		if err != nil {
			return targetErrorf("%v", err)
		}
		known, err := gate.KnownFindingsOf(t, scenarios.Every())
		if err != nil {
			return targetErrorf("%v", err)
		}
		plans[i] = gate.Plan{Scenarios: picked, Catches: gate.Within(catches, picked), Known: known, Parallel: c.parallel, Retries: *retries}
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
	rep.Logf("gate: targets %v, profile %s, seeds %v; report in %s", names, *profile, plans[0].Seeds, dir)
	for i := range plans {
		prefix := ""
		if len(targets) > 1 {
			prefix = targets[i].Name + ": "
		}
		plans[i].Progress = func(done, total int, res result.Scenario) {
			verdict := res.Verdict
			if k, ok := targets[i].KnownFinding(res.Name); ok && res.Variant == "correct" && res.ShowsOnly(k.Violations) {
				verdict = "known finding (" + strings.Join(res.ViolationKinds(), ", ") + ")"
			}
			line := fmt.Sprintf("%s[%d/%d] %s [%s] seed %d: %s (%.1fs)", prefix, done, total, res.Name, res.Variant, res.Seed, verdict, float64(res.DurationMS)/1000)
			if res.Verdict == result.Indeterminate {
				line += ": " + firstLine(res.Reason)
				if res.Attempt > 0 && res.Attempt <= *retries {
					line += fmt.Sprintf(" (attempt %d: running it again with the next seed)", res.Attempt)
				}
			}
			rep.Done(prefix+gate.RunName(res.Name, res.Variant, res.Seed), line)
		}
		plans[i].Phase = func(run, phase string) { rep.Phase(prefix+run, phase) }
		plans[i].Tick = func(run, phase string, done float64) { rep.Tick(prefix+run, phase, done) }
	}

	started := time.Now()
	outs := make([]result.Run, len(targets))
	interrupted, err := withSharedCleanup(ctx, c, dir, rep, func(ctx context.Context, sh *runner.Shared, cleanup *supervisor.Cleanup) error {
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
			out.TargetFile, out.Version = t.Path, version.String()
			out.TargetVariants = gate.TargetVariants(t)
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
	whole := result.Run{Verdict: result.Pass, Pass: true, Interrupted: interrupted}
	for i, t := range targets {
		if interrupted && outs[i].Schema == "" {
			continue // never started
		}
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
		whole.Verdict = worse(whole.Verdict, out.Verdict)
	}
	whole.Pass = whole.Verdict == result.Pass
	if len(targets) > 1 {
		for i, t := range targets {
			fmt.Fprintf(stdout, "target %-16s %s\n", t.Name, strings.ToUpper(cmp.Or(outs[i].Verdict, "not run")))
		}
		fmt.Fprintf(stdout, "whole gate: %s\n", time.Since(started).Round(time.Second))
	}
	return verdictErr(whole)
}

// onlyScenarios are the scenarios of picked (the profile's) named in list,
// comma-separated, in the profile's order; a name not in the profile is a
// usage error.
func onlyScenarios(picked []runner.Scenario, list, profile string) ([]runner.Scenario, error) {
	want := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			want[name] = true
		}
	}
	var out []runner.Scenario
	for _, s := range picked {
		if want[s.Name] {
			out = append(out, s)
			delete(want, s.Name)
		}
	}
	for name := range want {
		if _, err := scenarios.Lookup(name); err != nil {
			return nil, usagef("--scenarios: unknown scenario %q (see faultline list)", name)
		}
		return nil, usagef("--scenarios: scenario %q is not of profile %s (see --profile)", name, profile)
	}
	if len(out) == 0 {
		return nil, usagef("--scenarios: name at least one scenario")
	}
	return out, nil
}

// Bounds of the gate's counts: each seed and each retry is a whole pass
// over the catalogue or a run again.
const (
	maxSeeds   = 100
	maxRetries = 10
)

// worse is the worse of two whole-run verdicts: fail, then indeterminate,
// then pass.
func worse(a, b string) string {
	rank := map[string]int{result.Pass: 0, result.Indeterminate: 1, result.Fail: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
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
