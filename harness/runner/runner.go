package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"faultline/harness/check"
	"faultline/harness/fault"
	"faultline/harness/infra"
	"faultline/harness/result"
	"faultline/harness/supervisor"
	"faultline/harness/workload"
	"faultline/proxies"
	"faultline/system/topology"
)

// Shared is the infrastructure one test binary (or one CLI run) shares
// between its scenarios.
type Shared struct {
	Infra   infra.Infra
	Proxies proxies.Links
	Bins    supervisor.Binaries
	// Root is where each run gets its folder.
	Root string
	// Log receives progress lines; may be nil.
	Log io.Writer
	// StartedIn is how long StartShared took: the infrastructure's
	// start-up, with the build of the pipeline running alongside, and the
	// Toxiproxy server's. StartParts are its parts: infra (the provider's
	// whole start-up), postgres and rabbitmq where the provider times them
	// (infra.StartTimer), build, toxiproxy.
	StartedIn  time.Duration
	StartParts map[string]time.Duration

	exclusive sync.RWMutex
	logMu     sync.Mutex

	activeMu sync.Mutex
	active   map[string]*supervisor.Supervisor // runs under way: folder → its processes (nil before they start)
}

// RemoveUnfinished stops the processes of the runs still under way (no
// restart can follow: a stopped supervisor starts nothing) and removes
// their folders, so an interrupted run leaves nothing behind.
func (sh *Shared) RemoveUnfinished(ctx context.Context) {
	sh.activeMu.Lock()
	active := sh.active
	sh.active = nil
	sh.activeMu.Unlock()
	for dir, sup := range active {
		if sup != nil {
			_ = sup.StopAll(ctx)
		}
		_ = os.RemoveAll(dir)
	}
}

// track records a run under way and, once they start, its processes.
func (sh *Shared) track(dir string, sup *supervisor.Supervisor) {
	sh.activeMu.Lock()
	defer sh.activeMu.Unlock()
	if sh.active == nil {
		sh.active = map[string]*supervisor.Supervisor{}
	}
	sh.active[dir] = sup
}

func (sh *Shared) untrack(dir string) {
	sh.activeMu.Lock()
	defer sh.activeMu.Unlock()
	delete(sh.active, dir)
}

// Options of one run.
type Options struct {
	Seed    int64
	Variant string // "" or "correct": the correct pipeline
	// KeepDir keeps the run's folder even when it passes.
	KeepDir bool
	// Phase is told each phase as it starts (infra, workload, faults,
	// converging, checking); may be nil.
	Phase func(name string)
	// Converge overrides the scenario's convergence bound.
	Converge time.Duration
	// Tick is told, about once a second during the long phases (workload,
	// converging), how far the phase has come (0..1); may be nil.
	Tick func(phase string, done float64)
}

// Phases of a run.
const (
	PhaseInfra      = "infra"
	PhaseWorkload   = "workload"
	PhaseFaults     = "faults"
	PhaseConverging = "converging"
	PhaseChecking   = "checking"
)

// Where a run waits (README, "Time to a verdict"). A run's wall time is
// its infra phase (databases, vhost, links, processes: under a second),
// its workload (paced: most scenarios send 120 orders over 5 s so that
// faults land mid-stream), the faults still under way when the workload
// ends (a broker restart waits for the broker to boot again, about 5 s),
// and the convergence wait. These waits are ours:
const (
	// RelayLease is the relays' claim lease: a row whose relay died or
	// froze is claimed again only after it. The crash points fire early in
	// the workload, so the wait overlaps the workload and rarely adds to a
	// run; it also has to outlast a slow batch on a loaded machine, or the
	// correct pipeline would have its claims taken over.
	RelayLease = 2 * time.Second
	// RelayPoll is how often an idle relay looks for Pending rows.
	RelayPoll = 50 * time.Millisecond
	// QuietWindow is how long the pipeline must stay settled (outbox
	// settled, queue drained, reservations unchanged) to count as
	// converged; it costs every run this much. The unacked count comes
	// from the management API (AMQP does not give it), which lags: the
	// quorum queue publishes it every 500 ms on the local and docker
	// providers and the API collects it every 500 ms. The window is three
	// such intervals, so a delivery still held by the consumer is seen
	// before the run is cut short and its effect missed. (On an external
	// broker with RabbitMQ's defaults the count lags up to 5 s.)
	QuietWindow = 1500 * time.Millisecond
	// ConsumerPoll is how often a run asks, with a passive declare, whether
	// the consumer consumes yet, before it starts the relays.
	ConsumerPoll = 20 * time.Millisecond
)

// defaultArgs are the process flags every run starts with: short leases and
// backoffs so a scenario runs in seconds. A scenario's Args come after these
// and win.
func defaultArgs(kind string) []string {
	switch kind {
	case "relay":
		return []string{"--lease", RelayLease.String(), "--poll-interval", RelayPoll.String(), "--batch-size", "50", "--backoff-base", "100ms", "--backoff-max", "1s", "--confirm-timeout", "1500ms", "--reconnect-max", "500ms"}
	case "inventory":
		return []string{"--prefetch", "32", "--tx-batch", "16", "--cleanup-interval", "0s", "--reconnect-max", "500ms"}
	}
	return nil
}

func (sh *Shared) logf(format string, args ...any) {
	if sh.Log == nil {
		return
	}
	sh.logMu.Lock()
	defer sh.logMu.Unlock()
	fmt.Fprintf(sh.Log, time.Now().Format("15:04:05.000")+" "+format+"\n", args...)
}

// run is the state of one scenario run.
type run struct {
	sh      *Shared
	sc      Scenario
	opts    Options
	id      string
	dir     string
	res     *result.Scenario
	links   map[string]*proxies.Link
	sup     *supervisor.Supervisor
	orders  *pgxpool.Pool
	invDB   *pgxpool.Pool
	cleanup []func(context.Context)
	phase   *result.Phase
	obs     *check.Observation // the end state, once observed
	qprobe  *queueProbe        // see probe; nil until first asked for
}

// Run runs the scenario and returns its result. It never panics on a
// failure of the system under test: every failure is in the result.
func (sh *Shared) Run(ctx context.Context, sc Scenario, opts Options) result.Scenario {
	if sc.Exclusive {
		sh.exclusive.Lock()
		defer sh.exclusive.Unlock()
	} else {
		sh.exclusive.RLock()
		defer sh.exclusive.RUnlock()
	}
	variant := opts.Variant
	if variant == "" {
		variant = "correct"
	}
	r := &run{sh: sh, sc: sc, opts: opts, links: map[string]*proxies.Link{},
		res: &result.Scenario{Name: sc.Name, Variant: variant, Seed: opts.Seed, Window: sc.Window, Started: time.Now()}}
	r.id = ident(sc.Name) + "_" + randomHex(3)
	r.dir = filepath.Join(sh.Root, fmt.Sprintf("%s-%s-seed%d-%s", sc.Name, variant, opts.Seed, r.id[len(r.id)-6:]))
	err := r.execute(ctx)
	r.endPhase()
	teardownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	r.teardown(teardownCtx)
	sh.untrack(r.dir) // finished: its folder is kept or removed below, not by RemoveUnfinished
	if err != nil {
		if r.res.Verdict != result.NotRun {
			r.res.Verdict = result.Fail
		}
		r.res.Reason = err.Error()
	} else if failed := r.res.Failed(); len(failed) > 0 {
		r.res.Verdict = result.Fail
		r.res.Reason = strings.Join(failed, "; ")
	} else {
		r.res.Verdict = result.Pass
	}
	// A failure of the correct pipeline keeps its logs; a broken variant is
	// expected to fail, and its violations (with timelines) are in the result.
	keep := opts.KeepDir || (r.res.Verdict == result.Fail && variant == "correct")
	if !keep {
		_ = os.RemoveAll(r.dir)
	} else {
		r.res.Dir = r.dir
		r.writeSummary()
	}
	r.res.DurationMS = time.Since(r.res.Started).Milliseconds()
	sh.logf("%s [%s seed %d]: %s in %s", sc.Name, variant, opts.Seed, r.res.Verdict, time.Duration(r.res.DurationMS)*time.Millisecond)
	return *r.res
}

func (r *run) startPhase(name string) {
	r.endPhase()
	r.res.Phases = append(r.res.Phases, result.Phase{Name: name, Start: time.Now()})
	r.phase = &r.res.Phases[len(r.res.Phases)-1]
	if r.opts.Phase != nil {
		r.opts.Phase(name)
	}
}

func (r *run) endPhase() {
	if r.phase != nil && r.phase.End.IsZero() {
		r.phase.End = time.Now()
	}
}

// tick reports a long phase's progress once a second until stopped.
func (r *run) tick(phase string, done func() float64) (stop func()) {
	if r.opts.Tick == nil {
		return func() {}
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				r.opts.Tick(phase, min(done(), 1))
			}
		}
	}()
	return func() { close(quit); <-finished }
}

// safeExecute turns a panic of the harness into a failed run, so one bug
// cannot take the shared infrastructure (and every other run) down with it.
func (r *run) safeExecute(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("harness panic: %v", p)
		}
	}()
	return r.execute(ctx)
}

// execute is the run proper; an error is a failure to run, not a verdict.
func (r *run) execute(ctx context.Context) error {
	r.startPhase(PhaseInfra)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return fmt.Errorf("run folder: %w", err)
	}
	faults := r.sc.Schedule(r.opts.Seed)
	for _, need := range needs(faults) {
		if need == fault.CapBrokerRestart && !r.sh.Infra.CanRestartBroker() {
			r.res.Verdict = result.NotRun
			return fmt.Errorf("not run: needs a broker restart, which the %s provider cannot do", r.sh.Infra.Name())
		}
	}
	if err := r.setupInfra(ctx); err != nil {
		return err
	}
	if err := r.startProcesses(ctx, faults); err != nil {
		return err
	}

	r.startPhase(PhaseWorkload)
	workloadStart := time.Now()
	orderProc, _ := r.sup.Process("order")
	wl := workload.New(r.sc.Workload, uint64(r.opts.Seed), func() string {
		if orderProc.Running() {
			return orderProc.ControlAddr()
		}
		return ""
	})
	env := &fault.Env{
		Processes: r.sup, Links: r.links, Infra: r.sh.Infra, VHost: r.id, OrdersDB: r.orders,
		Acknowledged: wl.Acknowledged, Deadline: 30 * time.Second,
		Logf: func(format string, args ...any) { r.sh.logf(r.sc.Name+": "+format, args...) },
	}
	runCtx, cancelRun := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelRun()
	faultResults := make([]result.Fault, len(faults))
	var faultsDone sync.WaitGroup
	for i, f := range faults {
		faultsDone.Add(1)
		go func() {
			defer faultsDone.Done()
			defer func() {
				if p := recover(); p != nil {
					faultResults[i] = f.Describe()
					faultResults[i].Error = fmt.Sprintf("harness panic: %v", p)
				}
			}()
			faultResults[i] = f.Inject(runCtx, env)
		}()
	}
	stopTick := r.tick(PhaseWorkload, func() float64 {
		return float64(wl.Acknowledged()) / float64(max(r.sc.Workload.Orders*max(r.sc.Workload.EventsPerOrder, 1), 1))
	})
	wlErr := wl.Run(runCtx)
	stopTick()
	r.startPhase(PhaseFaults)
	faultsDone.Wait()
	r.res.Faults = faultResults
	if wlErr != nil {
		return fmt.Errorf("workload: %w (%d orders acknowledged)", wlErr, wl.Acknowledged())
	}

	r.startPhase(PhaseConverging)
	src := r.sources()
	timeout := r.sc.Converge
	if timeout == 0 {
		timeout = 45 * time.Second
	}
	if r.opts.Converge > 0 {
		timeout = r.opts.Converge
	}
	convStart := time.Now()
	stopTick = r.tick(PhaseConverging, func() float64 { return time.Since(convStart).Seconds() / timeout.Seconds() })
	convergedAt, convErr := check.WaitConverged(runCtx, src, timeout, QuietWindow)
	stopTick()
	lastFault := time.Time{}
	for _, f := range faultResults {
		if f.End.After(lastFault) {
			lastFault = f.End
		}
	}
	converged := result.Invariant{Name: check.Converged, OK: convErr == nil}
	if convErr != nil {
		converged.Detail = convErr.Error()
		converged.Violations = []result.Violation{{Kind: "not-converged", Message: convErr.Error()}}
		r.res.RecoveryMS = -1
	} else if !lastFault.IsZero() {
		r.res.RecoveryMS = max(convergedAt.Sub(lastFault).Milliseconds(), 0)
	}

	r.startPhase(PhaseChecking)
	stopCtx, cancelStop := context.WithTimeout(ctx, 20*time.Second)
	_ = r.sup.StopAll(stopCtx)
	cancelStop()
	src.LogPaths = r.logPaths()
	obs, err := check.Observe(ctx, src)
	if err != nil {
		return fmt.Errorf("observe: %w", err)
	}
	r.obs = obs
	checked, counts := check.Check(obs, check.Options{Ordered: r.sc.Ordered})
	invs := append([]result.Invariant{converged}, checked...)
	evidence := check.Evaluate(obs, r.sc.Evidence)
	if r.sc.Expect != nil {
		evidence = append(evidence, r.sc.Expect(obs, faultResults, invs))
	}
	r.res.Invariants = invs
	r.res.Evidence = evidence
	r.res.Counts = counts
	r.res.Timeline = check.BuildTimeline(obs, workloadStart, time.Now(), faultResults, invs)
	return nil
}

func (r *run) sources() check.Sources {
	return check.Sources{OrdersDB: r.orders, InventoryDB: r.invDB, Queue: r.probe().queue}
}

// probe is the run's one queue probe, closed at teardown.
func (r *run) probe() *queueProbe {
	if r.qprobe == nil {
		p := &queueProbe{infra: r.sh.Infra, vhost: r.id}
		r.cleanup = append(r.cleanup, func(context.Context) { p.close() })
		r.qprobe = p
	}
	return r.qprobe
}

func (r *run) logPaths() []string {
	var out []string
	for _, p := range r.sup.EventLogPaths() {
		out = append(out, p)
	}
	return out
}

// setupInfra creates the scenario's databases, vhost and links. The two
// databases and the vhost are made side by side, and removed so at
// teardown: with eight runs starting at once each CREATE DATABASE takes a
// second or more, and each DROP DATABASE waits for a checkpoint.
func (r *run) setupInfra(ctx context.Context) error {
	in := r.sh.Infra
	type resource struct {
		create, remove func(context.Context) error
	}
	var resources []resource
	for _, db := range []string{r.id + "_orders", r.id + "_inventory"} {
		resources = append(resources, resource{
			create: func(ctx context.Context) error {
				if err := in.CreateDatabase(ctx, db); err != nil {
					return fmt.Errorf("create database: %w", err)
				}
				return nil
			},
			remove: func(ctx context.Context) error { return in.DropDatabase(ctx, db) },
		})
	}
	resources = append(resources, resource{
		create: func(ctx context.Context) error {
			if err := in.CreateVHost(ctx, r.id); err != nil {
				return fmt.Errorf("create vhost: %w", err)
			}
			return nil
		},
		remove: func(ctx context.Context) error { return in.DeleteVHost(ctx, r.id) },
	})
	made := make([]bool, len(resources))
	err := sideBySide(len(resources), func(i int) error {
		err := resources[i].create(ctx)
		made[i] = err == nil
		return err
	})
	r.cleanup = append(r.cleanup, func(ctx context.Context) {
		_ = sideBySide(len(resources), func(i int) error {
			if !made[i] {
				return nil
			}
			return resources[i].remove(ctx)
		})
	})
	if err != nil {
		return err
	}
	if r.orders, err = pgxpool.New(ctx, in.PostgresURL(r.id+"_orders")); err != nil {
		return fmt.Errorf("orders pool: %w", err)
	}
	r.cleanup = append(r.cleanup, func(context.Context) { r.orders.Close() })
	if r.invDB, err = pgxpool.New(ctx, in.PostgresURL(r.id+"_inventory")); err != nil {
		return fmt.Errorf("inventory pool: %w", err)
	}
	r.cleanup = append(r.cleanup, func(context.Context) { r.invDB.Close() })

	names := []string{"order.pg", "order.amqp", "inventory.pg", "inventory.amqp"}
	for i := 1; i <= r.relays(); i++ {
		names = append(names, fmt.Sprintf("relay-%d.pg", i), fmt.Sprintf("relay-%d.amqp", i))
	}
	pgUpstream, amqpUpstream := in.LinkUpstreams()
	for _, name := range names {
		upstream := pgUpstream
		if strings.HasSuffix(name, ".amqp") {
			upstream = amqpUpstream
		}
		proxyName := r.id + "." + name
		link, err := r.sh.Proxies.AddLink(ctx, proxyName, upstream)
		if err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
		r.links[name] = link
		r.cleanup = append(r.cleanup, func(ctx context.Context) { _ = r.sh.Proxies.RemoveLink(ctx, proxyName) })
	}
	return nil
}

func (r *run) relays() int {
	if r.sc.Relays > 0 {
		return r.sc.Relays
	}
	return 2
}

// viaLink rewrites a URL's host to the link's listen address.
func viaLink(raw string, link *proxies.Link) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Host = link.Addr()
	return u.String()
}

// startProcesses starts the consumer first (it declares the queue), then
// the relays, then the order service — each through its own links.
func (r *run) startProcesses(ctx context.Context, faults []fault.Fault) error {
	in := r.sh.Infra
	outLog, err := os.Create(filepath.Join(r.dir, "supervisor.log"))
	if err != nil {
		return fmt.Errorf("supervisor log: %w", err)
	}
	r.cleanup = append(r.cleanup, func(context.Context) { outLog.Close() })
	r.sup = supervisor.New(r.dir, outLog)
	r.sh.track(r.dir, r.sup)
	r.cleanup = append(r.cleanup, func(ctx context.Context) { _ = r.sup.StopAll(ctx) })

	type proc struct {
		name, kind string
		args       []string
	}
	ordersURL, invURL, amqpURL := in.PostgresURL(r.id+"_orders"), in.PostgresURL(r.id+"_inventory"), in.AMQPURL(r.id)
	procs := []proc{{"inventory", "inventory", []string{
		"--db-url", viaLink(invURL, r.links["inventory.pg"]), "--amqp-url", viaLink(amqpURL, r.links["inventory.amqp"]),
	}}}
	for i := 1; i <= r.relays(); i++ {
		name := fmt.Sprintf("relay-%d", i)
		procs = append(procs, proc{name, "relay", []string{
			"--instance", name,
			"--db-url", viaLink(ordersURL, r.links[name+".pg"]), "--amqp-url", viaLink(amqpURL, r.links[name+".amqp"]),
		}})
	}
	// The order service talks to the broker only in the variants without an
	// outbox; it gets its link all the same.
	procs = append(procs, proc{"order", "order", []string{"--instance", "order", "--db-url", viaLink(ordersURL, r.links["order.pg"]),
		"--amqp-url", viaLink(amqpURL, r.links["order.amqp"])}})

	for _, p := range procs {
		bin, err := r.sh.Bins.For(p.kind)
		if err != nil {
			return err
		}
		args := append(append(append([]string{}, p.args...), defaultArgs(p.kind)...), r.sc.Args[p.kind]...)
		var env []string
		if r.opts.Variant != "" && r.opts.Variant != "correct" {
			env = append(env, "FAULTLINE_VARIANT="+r.opts.Variant)
		}
		var arms []string
		for _, f := range faults {
			if a, ok := f.(fault.StartArmer); ok {
				for _, kv := range a.StartEnv(p.name) {
					arms = append(arms, strings.TrimPrefix(kv, "FAULTLINE_CRASHPOINTS="))
				}
			}
		}
		if len(arms) > 0 {
			env = append(env, "FAULTLINE_CRASHPOINTS="+strings.Join(arms, ","))
		}
		if _, err := r.sup.Start(ctx, supervisor.Spec{Name: p.name, Kind: p.kind, Binary: bin, Args: args, Env: env}); err != nil {
			return fmt.Errorf("start %s: %w", p.name, err)
		}
		if p.kind == "inventory" {
			if err := r.waitConsuming(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitConsuming waits until the consumer has declared its queue and
// consumes from it, so the relays never publish into a missing topology
// (the consumer binds the queue before it consumes). It asks the queue with
// a passive declare every ConsumerPoll: the management API's view of a queue
// declared a moment ago lags by seconds, and waiting on it cost each run
// about 5 s.
func (r *run) waitConsuming(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := r.probe().waitConsumer(ctx, topology.Queue, ConsumerPoll); err != nil {
		return fmt.Errorf("the consumer did not start consuming: %w", err)
	}
	return nil
}

func (r *run) teardown(ctx context.Context) {
	for i := len(r.cleanup) - 1; i >= 0; i-- {
		r.cleanup[i](ctx)
	}
}

// writeSummary leaves a readable account next to the logs of a run that is kept.
func (r *run) writeSummary() {
	var b strings.Builder
	fmt.Fprintf(&b, "%s [%s] seed %d: %s\n", r.res.Name, r.res.Variant, r.res.Seed, r.res.Verdict)
	if r.res.Reason != "" {
		fmt.Fprintf(&b, "reason: %s\n", r.res.Reason)
	}
	for _, v := range r.res.Violations() {
		fmt.Fprintf(&b, "\nviolation %s: %s\n", v.Kind, v.Message)
		for _, line := range v.Timeline {
			fmt.Fprintf(&b, "  %s\n", line)
		}
	}
	_ = os.WriteFile(filepath.Join(r.dir, "summary.txt"), []byte(b.String()), 0o644)
	if r.obs != nil {
		// The whole run, every process, merged in time order.
		var tl strings.Builder
		for _, e := range r.obs.Log {
			tl.WriteString(check.FormatEntry(e))
			tl.WriteByte('\n')
		}
		_ = os.WriteFile(filepath.Join(r.dir, "timeline.txt"), []byte(tl.String()), 0o644)
	}
}

// sideBySide runs fn(0) … fn(n-1) at once and returns their errors joined.
func sideBySide(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ident makes a scenario name into a database-name prefix.
func ident(name string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(name) {
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 40 {
		s = s[:40]
	}
	return "fl_" + s
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
