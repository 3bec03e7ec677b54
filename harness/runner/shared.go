package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/ports"
	"github.com/faultline-dev/faultline/harness/redact"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/safe"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/proxies"
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
	// Target is the pipeline to attack (target.Load).
	Target *target.Target
	// ToxiproxyLog is the file the Toxiproxy server's own log lines go
	// to; empty: they are discarded (never the terminal).
	ToxiproxyLog string
	// MaxRuns bounds the runs under way at once on this infrastructure,
	// across every caller of it (its WithTarget copies too): a
	// test suite that runs several gates side by side puts no more load on
	// the machine than one gate does. 0: no bound beyond each caller's own.
	MaxRuns int
}

// Built is the infrastructure with the target built beside it.
type Built struct {
	Infra    infra.Infra
	BuildDir string                   // the target's {{build_dir}}
	Parts    map[string]time.Duration // start-up: infra, build, and the provider's own parts
	// Ports hands out the loopback ports of the infrastructure's services
	// and of the target's processes alike, so none can take another's.
	Ports *ports.Allocator
}

// OpenBuilt starts the infrastructure provider kind (empty: FAULTLINE_INFRA)
// and, meanwhile, runs the target's build step into a binary folder of this
// process. The folder and the infrastructure are registered on cleanup;
// folders that a killed process left are swept first.
func OpenBuilt(ctx context.Context, kind string, t *target.Target, log io.Writer, cleanup *supervisor.Cleanup) (Built, error) {
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
		took time.Duration
		err  error
	}
	buildDone := make(chan built, 1)
	go func() {
		var b built
		started := time.Now()
		b.err = safe.Do("build", func() error { return Build(ctx, t, binDir) })
		b.took = time.Since(started)
		buildDone <- b
	}()
	parts := map[string]time.Duration{}
	infraStart := time.Now()
	alloc := ports.New()
	cleanup.Add("free ports", func(context.Context) error { alloc.Close(); return nil })
	// The external provider's URLs are known before it starts: an error
	// or a line about them is written masked.
	in, err := infra.Open(ctx, kind, infra.Options{Log: redact.New(infra.EnvSecrets(nil)...).Writer(log), Ports: alloc})
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
	return Built{Infra: in, BuildDir: binDir, Parts: parts, Ports: alloc}, nil
}

// StartShared starts the infrastructure, builds the target once, and starts
// the Toxiproxy server: this binary started again as one
// (proxies.SelfServer), unless the provider runs its own. Every step it took is
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
	if opts.Target == nil {
		return nil, fmt.Errorf("start: no target")
	}
	b, err := OpenBuilt(ctx, opts.Infra, opts.Target, log, cleanup)
	if err != nil {
		return nil, err
	}
	in, parts := b.Infra, b.Parts
	// From here on the provider's own passwords are known too.
	log = redact.New(append(in.Secrets(), infra.EnvSecrets(nil)...)...).Writer(log)
	var px proxies.Links
	toxiStart := time.Now()
	if tp, ok := in.(infra.ToxiproxyProvider); ok {
		px = tp.Toxiproxy() // docker: its own, in the containers' network
	} else {
		var popts []proxies.ServerOption
		if opts.ToxiproxyLog != "" {
			popts = append(popts, proxies.WithLogFile(opts.ToxiproxyLog))
		}
		bin, err := proxies.SelfServer()
		if err != nil {
			return nil, fmt.Errorf("start toxiproxy: %w", err)
		}
		srv, err := proxies.StartServer(ctx, bin, log, popts...)
		if err != nil {
			return nil, fmt.Errorf("start toxiproxy: %w", err)
		}
		cleanup.Add("stop toxiproxy", func(context.Context) error { return srv.Stop() })
		px = srv
	}
	parts["toxiproxy"] = time.Since(toxiStart)
	took := time.Since(started)
	fmt.Fprintf(log, "shared infrastructure ready in %s (runs in %s)\n", took.Round(time.Millisecond), filepath.Clean(root))
	sh := &Shared{Infra: in, Proxies: px, Target: opts.Target, BuildDir: b.BuildDir, Root: root, Log: log, StartedIn: took, StartParts: parts,
		exclusive: &sync.RWMutex{}, apart: newApart(in), ports: b.Ports, tracker: &tracker{}, removals: &removals{}}
	if opts.MaxRuns > 0 {
		sh.slots = newSlots(opts.MaxRuns)
	}
	sh.cluster = newClusterApart(in, px)
	// Registered after the infrastructure's stop, so run before it (and
	// the runs' processes stop before the infrastructure they use).
	cleanup.Add("stop the infrastructure for broker restarts", sh.apart.stop)
	cleanup.Add("stop the clustered broker", sh.cluster.stop)
	cleanup.Add("wait for finished runs' databases and vhosts to be removed", func(context.Context) error {
		sh.removals.close()
		return nil
	})
	cleanup.Add("stop and remove unfinished runs", func(ctx context.Context) error {
		sh.RemoveUnfinished(ctx)
		return nil
	})
	return sh, nil
}

// WithTarget is this infrastructure attacking another target: the same
// PostgreSQL, RabbitMQ and Toxiproxy server (a run that restarts the
// broker still runs alone, across both), the target built into a folder of
// its own, removed on cleanup. A target built as this one is (the same
// folder and build command: this target read another way, e.g.
// target.WithoutEventLogs) runs this one's programs, not built again. Its
// runs are cleanup's.
func (sh *Shared) WithTarget(ctx context.Context, t *target.Target, cleanup *supervisor.Cleanup) (*Shared, error) {
	if sh.Target != nil && t.Dir == sh.Target.Dir && reflect.DeepEqual(t.Build, sh.Target.Build) {
		return sh.attacking(t, sh.BuildDir, sh.StartedIn, sh.StartParts, cleanup), nil
	}
	dir, err := os.MkdirTemp("", binPattern)
	if err != nil {
		return nil, fmt.Errorf("binary folder: %w", err)
	}
	cleanup.Add("remove binaries of "+t.Name, func(context.Context) error { return os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Errorf("binary folder: %w", err)
	}
	started := time.Now()
	if err := Build(ctx, t, dir); err != nil {
		return nil, err
	}
	took := time.Since(started)
	return sh.attacking(t, dir, took, map[string]time.Duration{"build": took}, cleanup), nil
}

// attacking is this infrastructure running t's programs from buildDir,
// its runs tracked apart and stopped by cleanup.
func (sh *Shared) attacking(t *target.Target, buildDir string, startedIn time.Duration, parts map[string]time.Duration, cleanup *supervisor.Cleanup) *Shared {
	other := &Shared{Infra: sh.Infra, Proxies: sh.Proxies, Target: t, BuildDir: buildDir, Root: sh.Root, Log: sh.Log,
		StartedIn: startedIn, StartParts: parts, exclusive: sh.exclusive,
		apart: sh.apart, cluster: sh.cluster, ports: sh.ports, slots: sh.slots, tracker: &tracker{}, removals: sh.removals}
	cleanup.Add("stop and remove unfinished runs of "+t.Name, func(ctx context.Context) error {
		other.RemoveUnfinished(ctx)
		return nil
	})
	return other
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
