package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"faultline/harness/infra"
	"faultline/harness/result"
	"faultline/harness/supervisor"
	"faultline/proxies"
)

// SharedOptions configure StartShared.
type SharedOptions struct {
	// Root is where run folders go; empty: a new temporary folder, removed
	// by the cleanup when empty.
	Root string
	Log  io.Writer
	// Infra is the provider (local, docker, external or auto; the CLI's
	// --infra); empty: FAULTLINE_INFRA, else auto.
	Infra string
}

// Built is the infrastructure with the programs built beside it.
type Built struct {
	Infra     infra.Infra
	Bins      supervisor.Binaries
	Toxiproxy string                   // the Toxiproxy server binary, when asked for
	Parts     map[string]time.Duration // start-up: infra, build, and the provider's own parts
}

// OpenBuilt starts the infrastructure provider kind (empty: FAULTLINE_INFRA)
// and, meanwhile, builds the pipeline's programs — and Toxiproxy's server
// when withToxiproxy — into a binary folder of this process. The folder and
// the infrastructure are registered on cleanup; folders that a killed
// process left are swept first.
func OpenBuilt(ctx context.Context, kind string, log io.Writer, withToxiproxy bool, cleanup *supervisor.Cleanup) (Built, error) {
	sweepBinaries(os.TempDir())
	binDir, err := os.MkdirTemp("", binPattern)
	if err != nil {
		return Built{}, fmt.Errorf("binary folder: %w", err)
	}
	cleanup.Add("remove binaries", func(context.Context) error { return os.RemoveAll(binDir) })
	if err := os.WriteFile(filepath.Join(binDir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return Built{}, fmt.Errorf("binary folder: %w", err)
	}
	type built struct {
		bins supervisor.Binaries
		toxi string
		took time.Duration
		err  error
	}
	buildDone := make(chan built, 1)
	go func() {
		var b built
		t := time.Now()
		if b.bins, b.err = supervisor.Build(ctx, binDir); b.err == nil && withToxiproxy {
			b.toxi, b.err = proxies.BuildServer(ctx, binDir)
		}
		b.took = time.Since(t)
		buildDone <- b
	}()
	parts := map[string]time.Duration{}
	infraStart := time.Now()
	in, err := infra.Open(ctx, kind, infra.Options{Log: log})
	parts["infra"] = time.Since(infraStart)
	if in != nil {
		cleanup.Add("stop infrastructure", in.Stop)
	}
	b := <-buildDone
	if err != nil {
		return Built{}, fmt.Errorf("start infrastructure: %w", err)
	}
	if b.err != nil {
		return Built{}, fmt.Errorf("build: %w", b.err)
	}
	parts["build"] = b.took
	if st, ok := in.(infra.StartTimer); ok {
		for name, took := range st.StartTimes() {
			parts[name] = took
		}
	}
	return Built{Infra: in, Bins: b.bins, Toxiproxy: b.toxi, Parts: parts}, nil
}

// StartShared starts the infrastructure, builds the pipeline and Toxiproxy
// binaries once, and starts the Toxiproxy server. Every step it took is
// registered on cleanup, so an interrupt or a failure later tears it down.
func StartShared(ctx context.Context, opts SharedOptions, cleanup *supervisor.Cleanup) (*Shared, error) {
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	started := time.Now()
	root := opts.Root
	var err error
	if root == "" {
		if root, err = os.MkdirTemp("", "faultline-runs-*"); err != nil {
			return nil, fmt.Errorf("runs folder: %w", err)
		}
	} else if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("runs folder: %w", err)
	}
	cleanup.Add("remove empty runs folder", func(context.Context) error {
		_ = os.Remove(root) // only if no failing run kept its logs there
		return nil
	})
	b, err := OpenBuilt(ctx, opts.Infra, log, true, cleanup)
	if err != nil {
		return nil, err
	}
	in, parts := b.Infra, b.Parts
	var px proxies.Links
	toxiStart := time.Now()
	if tp, ok := in.(infra.ToxiproxyProvider); ok {
		px = tp.Toxiproxy() // docker: its own, in the containers' network
	} else {
		srv, err := proxies.StartServer(ctx, b.Toxiproxy, log)
		if err != nil {
			return nil, fmt.Errorf("start toxiproxy: %w", err)
		}
		cleanup.Add("stop toxiproxy", func(context.Context) error { return srv.Stop() })
		px = srv
	}
	parts["toxiproxy"] = time.Since(toxiStart)
	took := time.Since(started)
	fmt.Fprintf(log, "shared infrastructure ready in %s (runs in %s)\n", took.Round(time.Millisecond), filepath.Clean(root))
	sh := &Shared{Infra: in, Proxies: px, Bins: b.Bins, Root: root, Log: log, StartedIn: took, StartParts: parts}
	cleanup.Add("stop and remove unfinished runs", func(ctx context.Context) error {
		sh.RemoveUnfinished(ctx)
		return nil
	})
	return sh, nil
}

// Timing is the time to a verdict as far as the shared infrastructure and
// the runs tell it: the start-up and its parts, and the median and maximum
// wall time of the runs. The caller adds what only it knows (how long all
// the runs and the whole command took, and the goals).
func (sh *Shared) Timing(runs []result.Scenario) *result.Timing {
	t := &result.Timing{InfraStartMS: sh.StartedIn.Milliseconds()}
	if len(sh.StartParts) > 0 {
		t.StartPartsMS = map[string]int64{}
		for name, took := range sh.StartParts {
			t.StartPartsMS[name] = took.Milliseconds()
		}
	}
	t.ScenarioMedianMS, t.ScenarioMaxMS = result.ScenarioStats(runs)
	return t
}

const binPattern = "faultline-bin-*"

// sweepBinaries removes binary folders left by a process that died without
// its cleanup (SIGKILL): their owner.pid names a process that is gone.
func sweepBinaries(root string) {
	dirs, _ := filepath.Glob(filepath.Join(root, binPattern))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue // being created, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(dir)
		}
	}
}
