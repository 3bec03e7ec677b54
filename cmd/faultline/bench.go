package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/system/bench"
)

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench")
	opts := bench.Defaults()
	jsonPath := fs.String("json", "", "write every figure, the ratios and the targets to this file (bench.json)")
	fs.IntVar(&opts.Events, "events", opts.Events, "events per repetition (raw, relay, consumer, end to end)")
	fs.IntVar(&opts.NaiveEvents, "naive-events", opts.NaiveEvents, "events per repetition of the naive one-at-a-time relay")
	fs.IntVar(&opts.Reps, "reps", opts.Reps, "repetitions of each figure (the median is reported, with min and max)")
	fs.IntVar(&opts.Clients, "clients", opts.Clients, "concurrent HTTP clients in the end-to-end run")
	relays := fs.String("relays", "1,2,4", "relay instance counts to measure, comma-separated")
	only := fs.String("only", "", "measure only these figures, comma-separated: "+strings.Join(bench.FigureNames(), ", ")+" (default: all)")
	relayFlags := fs.String("relay-flags", "", "flags added to every relay's defaults, e.g. \"--batch-size 500\"")
	inventoryFlags := fs.String("inventory-flags", "", "flags added to the consumer's defaults, e.g. \"--workers 1\"")
	targetPath := fs.String("target", "", "the reference pipeline's target file: its build step builds order, relay and inventory, its workload is the order sent (default: "+referenceTarget+" at the root of faultline's source tree, looked for from the current folder up)")
	infraKind := fs.String("infra", "", "where PostgreSQL and RabbitMQ come from: local, docker, external or auto (default: $FAULTLINE_INFRA, else auto)")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("bench takes no arguments, got %q", fs.Arg(0))
	}
	counts, err := parseCounts(*relays)
	if err != nil {
		return usagef("--relays: %v", err)
	}
	opts.Relays = counts
	opts.RelayFlags, opts.InventoryFlags = strings.Fields(*relayFlags), strings.Fields(*inventoryFlags)
	if *only != "" {
		for _, name := range strings.Split(*only, ",") {
			opts.Only = append(opts.Only, strings.TrimSpace(name))
		}
	}
	if err := opts.Validate(); err != nil {
		return usagef("%v", err)
	}
	if *infraKind != "" && !slices.Contains(infra.Kinds(), *infraKind) {
		return usagef("--infra %q: want one of %s", *infraKind, strings.Join(infra.Kinds(), ", "))
	}
	if *jsonPath != "" {
		// Fail on an unwritable path now, not after minutes of measuring.
		if err := os.MkdirAll(filepath.Dir(*jsonPath), 0o755); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}

	// Neither FAULTLINE_TARGET nor a team's faultline.yaml is read: the
	// bench runs the reference's own programs, which another pipeline's
	// build step does not build.
	refPath := *targetPath
	if refPath == "" {
		dir, err := cwd()
		if err != nil {
			return err
		}
		if refPath, err = findReference(dir); err != nil {
			return err
		}
	}
	ref, err := loadTargetFile(refPath)
	if err != nil {
		return err
	}

	// Ctrl-C cancels the measurement: the repetition under way stops its
	// processes and drops its databases and vhost, then the infrastructure
	// stops and the folder goes. A second Ctrl-C exits at once.
	parent := ctx
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	go func() {
		<-ctx.Done()
		stopSignals()
	}()
	cleanup := supervisor.NewCleanup()
	defer func() { _ = cleanup.Run(context.WithoutCancel(ctx)) }()
	work, err := os.MkdirTemp("", "faultline-bench-*")
	if err != nil {
		return fmt.Errorf("bench folder: %w", err)
	}
	cleanup.Add("remove bench folder", func(context.Context) error { return os.RemoveAll(work) })
	progress(stderr, "bench: starting PostgreSQL and RabbitMQ, building the pipeline")
	started := time.Now()
	b, err := runner.OpenBuilt(ctx, *infraKind, ref, stderr, cleanup)
	if err != nil {
		return err
	}
	progress(stderr, "bench: ready in %s; %d events × %d repetitions, relays %v", time.Since(started).Round(time.Millisecond), opts.Events, opts.Reps, opts.Relays)
	opts.Dir = filepath.Join(work, "runs")
	opts.Log = stderr
	rep, err := bench.Run(ctx, b.Infra, bench.ProgramsOf(ref, b.BuildDir), opts)
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		return fmt.Errorf("bench: its processes, databases and vhosts are gone: %w", errInterrupted)
	}
	if err != nil {
		return err
	}
	printBench(stdout, rep)
	if *jsonPath != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fmt.Errorf("encode bench.json: %w", err)
		}
		if err := os.WriteFile(*jsonPath, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("write bench.json: %w", err)
		}
		fmt.Fprintf(stdout, "figures: %s\n", *jsonPath)
	}
	return nil
}

// parseCounts reads "1,2,4".
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// printBench prints the figures as events/s and as ratios to the raw
// ceiling, then the ratios against their targets.
func printBench(w io.Writer, rep bench.Report) {
	raw := 0.0
	for _, f := range rep.Figures {
		if f.Name == bench.FigureRaw {
			raw = f.Median
		}
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "figure\tevents\tmedian ev/s\tmin ev/s\tmax ev/s\t× raw\t\n")
	for _, f := range rep.Figures {
		ratio := "-"
		if raw > 0 {
			ratio = fmt.Sprintf("%.2f", f.Median/raw)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.0f\t%s\t\n", bench.Label(f), f.Events, f.Median, f.Min, f.Max, ratio)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nratios (medians of %d repetitions, best relay: %d instance(s)):\n", rep.Reps, rep.Ratios.BestRelayInstances)
	for _, t := range rep.Targets {
		verdict := "met"
		if !t.Met {
			verdict = "MISSED"
		}
		fmt.Fprintf(w, "  %-18s %6.2f  target ≥ %-4g %s\n", t.Ratio, t.Got, t.Want, verdict)
	}
	fmt.Fprintf(w, "  %-18s %6.2f\n", "end_to_end_vs_relay", rep.Ratios.EndToEndVsRelay)
	fmt.Fprintf(w, "bench finished in %s on %d CPUs (%s)\n", (time.Duration(rep.DurationMS) * time.Millisecond).Round(time.Second), rep.Machine.CPUs, rep.Infra)
}
