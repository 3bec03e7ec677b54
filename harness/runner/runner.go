package runner

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/observe"
	"github.com/faultline-dev/faultline/harness/ports"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/safe"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/proxies"
)

// Shared is the infrastructure one test binary (or one CLI run) shares
// between its scenarios.
type Shared struct {
	Infra   infra.Infra
	Proxies proxies.Links
	// Target is the pipeline under attack; BuildDir is where its build
	// step wrote (its {{build_dir}}).
	Target   *target.Target
	BuildDir string
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

	// exclusive is held by a run that touches the shared broker, and read
	// by every other run — of every target on this infrastructure.
	exclusive *sync.RWMutex
	// apart, if not nil, is where those runs go instead.
	apart *apart
	// cluster, if not nil, is the clustered broker the runs that need one
	// go to (fault.CapCluster).
	cluster *apart
	// ports hands the processes of every run their addresses.
	ports *ports.Allocator
	// slots, if not nil, holds a place for each run under way
	// (SharedOptions.MaxRuns).
	slots *slots
	logMu sync.Mutex

	// tracker knows the runs under way of this Shared and of the copies
	// that share its cleanup (the exclusive runs' infrastructure apart);
	// WithTarget has one of its own, with its own cleanup, which must not
	// stop other targets' runs.
	tracker *tracker
	// removals, if not nil, removes finished runs' databases and vhosts
	// on the shared infrastructure in the background; the cleanup waits
	// for them before the infrastructure stops.
	removals *removals
}

// removeWithin bounds the removal of one run's databases and vhost.
const removeWithin = time.Minute

// removals runs removals in the background until close; after it, each
// runs at once in its caller.
type removals struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (rm *removals) start(remove func()) {
	rm.mu.Lock()
	if rm.closed {
		rm.mu.Unlock()
		remove()
		return
	}
	rm.wg.Add(1)
	rm.mu.Unlock()
	go func() {
		defer rm.wg.Done()
		remove()
	}()
}

// close waits for the removals under way; later ones run in their caller.
func (rm *removals) close() {
	rm.mu.Lock()
	rm.closed = true
	rm.mu.Unlock()
	rm.wg.Wait()
}

// tracker records the runs under way: folder → its processes (nil before
// they start).
type tracker struct {
	mu     sync.Mutex
	active map[string]*supervisor.Supervisor
}

// RemoveUnfinished stops the processes of the runs still under way that
// its tracker knows (no restart can follow: a stopped supervisor starts
// nothing), and removes their folders, so an interrupted run leaves
// nothing behind.
func (sh *Shared) RemoveUnfinished(ctx context.Context) {
	t := sh.tracker
	t.mu.Lock()
	active := t.active
	t.active = nil
	t.mu.Unlock()
	for dir, sup := range active {
		if sup != nil {
			_ = sup.StopAll(ctx)
		}
		_ = os.RemoveAll(dir)
	}
}

// track records a run under way and, once they start, its processes.
func (sh *Shared) track(dir string, sup *supervisor.Supervisor) {
	t := sh.tracker
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active == nil {
		t.active = map[string]*supervisor.Supervisor{}
	}
	t.active[dir] = sup
}

func (sh *Shared) untrack(dir string) {
	t := sh.tracker
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.active, dir)
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
	// Stall, above zero, ends the convergence wait early once the
	// pipeline, not settled, has shown no change for Stall or five of the
	// target's leases, whichever is longer: a broken pipeline that stopped
	// (rows claimed and never freed) is judged on what it left, while one
	// that is only slow goes on to the convergence bound.
	Stall time.Duration
	// Tick is told, about once a second during the long phases (workload,
	// converging), how far the phase has come (0..1); may be nil.
	Tick func(phase string, done float64)
	// FaultDeadline bounds how long each fault waits for its window to
	// open (0: DefaultFaultDeadline). An exploration that tries windows
	// which may never open sets it near the workload's length.
	FaultDeadline time.Duration
}

// DefaultFaultDeadline is how long a fault waits for its window to open.
const DefaultFaultDeadline = 30 * time.Second

// consumerStartTimeout bounds the wait for the consumer to consume from its
// queue after it started. The wait ends as soon as it does; the bound
// only turns a consumer that never consumes into an error, so it is far
// above any start-up the machine's load can cause.
const consumerStartTimeout = 60 * time.Second

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
// and the convergence wait. The target's own waits (its relays' lease and
// poll) are in its target file; these are ours:
const (
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
	// the consumer consumes yet, before it starts the relays (and, once its
	// processes stopped, whether the queue has no consumer left).
	ConsumerPoll = observe.ConsumerPoll
)

func (sh *Shared) logf(format string, args ...any) {
	if sh.Log == nil {
		return
	}
	line := sh.redactor().String(fmt.Sprintf(format, args...))
	sh.logMu.Lock()
	defer sh.logMu.Unlock()
	fmt.Fprintf(sh.Log, "%s %s\n", time.Now().Format("15:04:05.000"), line)
}

// run is the state of one scenario run.
type run struct {
	sh        *Shared
	sc        Scenario // as the catalogue gives it; the run reads plan
	plan      Plan     // sc compiled for the target and the seed (provision)
	opts      Options
	id        string
	dir       string
	res       *result.Scenario
	links     map[string]*proxies.Link
	sup       *supervisor.Supervisor
	dbs       map[string]string        // the target's database name → the run's copy
	pools     map[string]*pgxpool.Pool // the target's database name → a pool on the run's copy
	instances []instance               // the target's process instances, in start order
	roles     *fault.Roles
	cleanup   []func(context.Context)
	// removeInfra removes what setupInfra made (the databases, the vhost),
	// after the cleanup: no process of the run is left to use them.
	removeInfra func(context.Context) error
	phase       *result.Phase
	obs         *history.Record // the end state, once observed
	// noInfra says why the run, which needs a clustered broker or a
	// database with a standby, got none.
	noInfra error
	// clientNodes maps an instance to the cluster node its broker link
	// goes to (fault.Env.ClientNodes); nil on one node.
	clientNodes map[string]int

	panicMu  sync.Mutex
	panicErr error // the first panic of a goroutine of the run
}

// Run runs the scenario and returns its result. It never panics on a
// failure of the system under test: every failure is in the result. A
// panic of the harness anywhere in the run, its teardown included, makes
// the run indeterminate.
func (sh *Shared) Run(ctx context.Context, sc Scenario, opts Options) (res result.Scenario) {
	defer func() {
		if p := recover(); p != nil {
			variant := cmp.Or(opts.Variant, "correct")
			res = result.Scenario{Name: sc.Name, Variant: variant, Seed: opts.Seed, Window: sc.Window, Verdict: result.Indeterminate,
				Reason: fmt.Sprintf("harness panic: %v\n%s", p, debug.Stack())}
		}
	}()
	return sh.run(ctx, sc, opts)
}

func (sh *Shared) run(ctx context.Context, sc Scenario, opts Options) result.Scenario {
	caps := scheduleNeeds(sc, sh.Target, opts.Seed)
	if sh.slots != nil {
		ownInfra := sc.Exclusive || slices.ContainsFunc(caps, func(c string) bool {
			return c == fault.CapCluster || c == fault.CapStandby || c == fault.CapStandbySync
		})
		if err := sh.slots.take(ctx, ownInfra); err != nil {
			return result.Scenario{Name: sc.Name, Variant: cmp.Or(opts.Variant, "correct"), Seed: opts.Seed, Window: sc.Window,
				Verdict: result.Indeterminate, Reason: fmt.Sprintf("not started: %v", err)}
		}
		defer sh.slots.give()
	}
	var noInfra error
	var later bool
	// spoiled: the run left its infrastructure apart unusable (a fault not
	// undone), set once it is over, read by the release deferred below.
	var spoiled bool
	switch {
	case slices.Contains(caps, fault.CapStandby) || slices.Contains(caps, fault.CapStandbySync):
		// A failover destroys its primary: each such run gets a database
		// with a standby (and a broker) of its own, stopped after it.
		in, stop, err := sh.startReplicated(ctx, slices.Contains(caps, fault.CapStandbySync))
		if err == nil {
			defer stop()
			sh = sh.on(in)
		} else {
			noInfra = err
		}
		sh.exclusive.RLock()
		defer sh.exclusive.RUnlock()
	case slices.Contains(caps, fault.CapCluster):
		// Its runs go one at a time to a cluster of their own; where there
		// is none, the run is not run (provision says why).
		if in, release, err := sh.cluster.take(ctx, sh.logf); err == nil {
			defer func() { release(spoiled) }()
			sh = sh.on(in)
		} else {
			noInfra = err
		}
	case sc.Exclusive:
		if in, release, err := sh.apart.take(ctx, sh.logf); err == nil {
			defer func() { release(spoiled) }()
			sh = sh.on(in)
		} else {
			sh.exclusive.Lock()
			defer sh.exclusive.Unlock()
		}
	default:
		sh.exclusive.RLock()
		defer sh.exclusive.RUnlock()
		// On the shared infrastructure the run's databases and vhost
		// are removed after it returns (and gives back its slot): each
		// DROP DATABASE waits for a checkpoint, seconds that belong to
		// no pipeline.
		later = sh.removals != nil
	}
	variant := opts.Variant
	if variant == "" {
		variant = "correct"
	}
	r := sh.newRun(sc, opts, variant, func(suffix string) string {
		return fmt.Sprintf("%s-%s-seed%d-%s", sc.Name, variant, opts.Seed, suffix)
	})
	r.noInfra = noInfra
	err := r.safeExecute(ctx)
	r.endPhase()
	teardownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	r.stop(teardownCtx)
	if later {
		sh.removals.start(func() {
			sh.exclusive.RLock() // a broker restarted on it is back first
			defer sh.exclusive.RUnlock()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeWithin)
			defer cancel()
			// The run is judged by now: what is left behind is said here.
			if err := r.remove(ctx); err != nil {
				sh.logf("%s [%s seed %d]: removing its databases and vhost: %v", sc.Name, variant, opts.Seed, err)
			}
		})
	} else {
		r.removeNow(teardownCtx)
	}
	spoiled = slices.ContainsFunc(r.res.Faults, func(f result.Fault) bool { return f.UndoError != "" })
	if perr := r.goroutinePanic(); perr != nil && err == nil {
		err = perr // a goroutine of the run panicked: what it saw is no evidence
	}
	sh.untrack(r.dir) // finished: its folder is kept or removed below, not by RemoveUnfinished
	interrupted := ctx.Err() != nil
	if r.res.Verdict == result.NotRun {
		r.res.Reason = err.Error()
	} else {
		r.res.Verdict, r.res.Reason = r.res.Judge(ending(err, interrupted, context.Cause(ctx)))
	}
	// A failure of the correct pipeline keeps its logs, and so does a run
	// that could not be judged (a panic's stack is there); a broken variant
	// is expected to fail, and its violations (with timelines) are in the
	// result. An interrupted run keeps nothing.
	keep := opts.KeepDir || (!interrupted && variant == "correct" &&
		(r.res.Verdict == result.Fail || r.res.Verdict == result.Indeterminate))
	r.finish(keep)
	r.res.DurationMS = time.Since(r.res.Started).Milliseconds()
	sh.logf("%s [%s seed %d]: %s in %s", sc.Name, variant, opts.Seed, r.res.Verdict, time.Duration(r.res.DurationMS)*time.Millisecond)
	return *r.res
}

// newRun is a run of sc, not begun: its id, and its folder below sh.Root,
// named by folder from the end of the id.
func (sh *Shared) newRun(sc Scenario, opts Options, variant string, folder func(suffix string) string) *run {
	r := &run{sh: sh, sc: sc, opts: opts, links: map[string]*proxies.Link{}, dbs: map[string]string{}, pools: map[string]*pgxpool.Pool{},
		res: &result.Scenario{Name: sc.Name, Variant: variant, Seed: opts.Seed, Window: sc.Window, Started: time.Now()}}
	r.id = ident(sc.Name) + "_" + randomHex(3)
	r.dir = filepath.Join(sh.Root, folder(r.id[len(r.id)-6:]))
	return r
}

// finish masks the passwords in the result (errors can quote URLs and the
// processes' output), then keeps the run's folder with a summary, its
// passwords masked too (reports/ is a CI artifact), or removes it. The
// processes have stopped: nothing writes to the folder any more.
func (r *run) finish(keep bool) {
	red := r.sh.redactor()
	redactResult(red, r.res)
	if !keep {
		_ = os.RemoveAll(r.dir)
		return
	}
	r.res.Dir = r.dir
	r.writeSummary()
	scrubDir(red, r.dir)
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
	safe.Go("progress ticker", func() {
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
	}, r.onPanic)
	return func() { close(quit); <-finished }
}

// safeExecute turns a panic of the harness into an indeterminate run, its
// stack in the run's folder, so one bug cannot take the shared
// infrastructure (and every other run) down with it.
func (r *run) safeExecute(ctx context.Context) error {
	err := safe.Do("run", func() error { return r.execute(ctx) })
	if perr, ok := safe.As(err); ok {
		return r.panicked(perr)
	}
	return err
}

// panicked records a recovered panic of the run or one of its goroutines:
// its stack goes to panic-WHERE.txt in the run's folder, and the error
// says where to find it.
func (r *run) panicked(p *safe.PanicError) error {
	path := filepath.Join(r.dir, "panic-"+fileSlug(p.Where)+".txt")
	if werr := os.WriteFile(path, fmt.Appendf(nil, "%v\n\n%s", p, p.Stack), 0o644); werr != nil {
		return fmt.Errorf("%w (stack not kept: %v)", p, werr)
	}
	return fmt.Errorf("%w (stack in %s)", p, filepath.Base(path))
}

// fileSlug is s as a file name part: lower-case letters and digits, every
// run of anything else one '-'.
func fileSlug(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			b.WriteRune(c)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// offered splits faults drawn at random into those the target offers and
// those it does not (a crash point its relay lacks), the latter described
// as optional faults that did not happen: a window the target cannot open
// is coverage it lacks, not a reason to run nothing. When it offers none of
// them, every fault stays, and the run is not run with the reasons.
func offered(env *fault.Env, faults []fault.Fault) (kept []fault.Fault, dropped []result.Fault) {
	for _, f := range faults {
		req, ok := f.(fault.Requirer)
		if !ok {
			kept = append(kept, f)
			continue
		}
		if err := req.Require(env); err != nil {
			d := f.Describe()
			d.Optional, d.Error = true, "not offered by the target: "+err.Error()
			dropped = append(dropped, d)
			continue
		}
		kept = append(kept, f)
	}
	if len(kept) == 0 {
		return faults, nil
	}
	return kept, dropped
}

func isPanic(err error) bool {
	_, ok := safe.As(err)
	return ok
}

// isDown reports whether err says a process of the target was down against
// its restart policy.
func isDown(err error) bool {
	var down *supervisor.DownError
	return errors.As(err, &down)
}

// ending is how a run that was not refused (not-run) ended, for
// result.Judge: err is what it ended with, interrupted whether its
// context ended under it (with cause).
func ending(err error, interrupted bool, cause error) result.Ending {
	switch {
	case isPanic(err):
		return result.Ending{Err: err, HarnessPanic: true}
	case interrupted:
		return result.Ending{Err: cause, Interrupted: true}
	case isDown(err):
		return result.Ending{Err: err, Down: true}
	}
	return result.Ending{Err: err}
}

// onPanic is told a panic of a goroutine of the run (its LISTEN loop, its
// progress ticker): the first one makes the run indeterminate.
func (r *run) onPanic(p *safe.PanicError) {
	err := r.panicked(p)
	r.panicMu.Lock()
	defer r.panicMu.Unlock()
	if r.panicErr == nil {
		r.panicErr = err
	}
}

func (r *run) goroutinePanic() error {
	r.panicMu.Lock()
	defer r.panicMu.Unlock()
	return r.panicErr
}

// inject starts every fault at once; the function it returns waits for
// them all and returns their results, in schedule order, and each is
// closed as the fault of its index ends. A fault that
// panics is recorded as erred (the panic's stack in the run's folder).
func (r *run) inject(ctx context.Context, env *fault.Env, faults []fault.Fault) (wait func() []result.Fault, each []<-chan struct{}) {
	results := make([]result.Fault, len(faults))
	var done sync.WaitGroup
	for i, f := range faults {
		ended := make(chan struct{})
		each = append(each, ended)
		done.Go(func() {
			defer close(ended)
			defer func() {
				if p := recover(); p != nil {
					results[i] = f.Describe()
					results[i].Error = r.panicked(&safe.PanicError{Where: fmt.Sprintf("fault %d", i+1), Value: p, Stack: debug.Stack()}).Error()
				}
			}()
			results[i] = f.Inject(ctx, env)
		})
	}
	return func() []result.Fault {
		done.Wait()
		for i := range results {
			results[i].Optional = r.plan.Scenario.FaultsOptional
		}
		return results
	}, each
}

// markSupervised puts on each process's lane what faultline did not cause
// and its event log may not show: its exits by itself and what its restart
// policy did (a restart is on the lane already, from its log's started
// line, when it writes one).
func (r *run) markSupervised(tl *result.Timeline, start time.Time) {
	if tl == nil || r.sup == nil {
		return
	}
	eventLog := map[string]bool{}
	for _, in := range r.instances {
		eventLog[in.name] = in.proc.EventLog
	}
	for _, p := range r.sup.Processes() {
		for _, e := range p.History() {
			if e.Kind == supervisor.EventRestarted && eventLog[p.Name()] {
				continue
			}
			i := slices.IndexFunc(tl.Lanes, func(l result.Lane) bool { return l.Process == p.Name() })
			if i < 0 {
				tl.Lanes = append(tl.Lanes, result.Lane{Process: p.Name()})
				i = len(tl.Lanes) - 1
			}
			tl.Lanes[i].Marks = append(tl.Lanes[i].Marks, result.Mark{AtMS: e.At.Sub(start).Milliseconds(), Kind: e.Kind, Label: e.Detail})
		}
	}
	// A lane reads in time order: the supervisor's marks came after the
	// event log's.
	for i := range tl.Lanes {
		slices.SortStableFunc(tl.Lanes[i].Marks, func(a, b result.Mark) int { return cmp.Compare(a.AtMS, b.AtMS) })
	}
}

// ends is what the run tells the reading of its end state of its
// processes: the roles that write event logs, the role references'
// instances, and each instance's crash points by window.
func (r *run) ends() observe.Ends {
	e := observe.Ends{LogRoles: r.logRoles(), Windows: map[string]map[string]string{}, Instances: map[history.Ref]string{}}
	count := map[string]int{}
	for _, in := range r.instances {
		count[in.proc.Role]++
		e.Instances[history.RefOf(in.proc.Role, count[in.proc.Role])] = in.name
		if count[in.proc.Role] == 1 {
			e.Instances[history.Ref(in.proc.Role)] = in.name
		}
	}
	for _, in := range r.instances {
		w := map[string]string{}
		for window, own := range in.proc.CrashPoints {
			w[own] = window
		}
		e.Windows[in.name] = w
	}
	return e
}

func (r *run) logPaths() []string {
	var out []string
	for _, p := range r.sup.EventLogPaths() {
		out = append(out, p)
	}
	return out
}

// setupInfra creates the scenario's databases (one per database of the
// target file), its vhost, the target's schema and a link per process
// instance and dependency. The databases and the vhost are made side by
// side, and removed so at teardown: with eight runs starting at once each
// CREATE DATABASE takes a second or more, and each DROP DATABASE waits for
// a checkpoint.
func (r *run) setupInfra(ctx context.Context) error {
	in := r.sh.Infra
	t := r.sh.Target
	type resource struct {
		create, remove func(context.Context) error
	}
	var resources []resource
	for _, name := range t.Databases {
		db := r.id + "_" + name
		r.dbs[name] = db
		resources = append(resources, resource{
			create: func(ctx context.Context) error {
				if err := in.CreateDatabase(ctx, db); err != nil {
					return fmt.Errorf("create database %s: %w", name, err)
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
	r.removeInfra = func(ctx context.Context) error {
		return sideBySide(len(resources), func(i int) error {
			if !made[i] {
				return nil
			}
			return resources[i].remove(ctx)
		})
	}
	if err != nil {
		return err
	}
	for _, name := range t.Databases {
		pool, err := pgxpool.New(ctx, infra.OwnSession(in.PostgresURL(r.dbs[name])))
		if err != nil {
			return fmt.Errorf("%s pool: %w", name, err)
		}
		r.pools[name] = pool
		r.cleanup = append(r.cleanup, func(context.Context) { pool.Close() })
	}
	if err := applySchema(ctx, t, r.pools, target.Values{Postgres: func(db string) (string, error) {
		run, ok := r.dbs[db]
		if !ok {
			return "", fmt.Errorf("no database %q in the target file", db)
		}
		return in.PostgresURL(run), nil
	}, BuildDir: r.sh.BuildDir, TargetDir: t.Dir, Slot: r.slot(), Publication: r.publication()}); err != nil {
		return err
	}

	// Each instance's links: to the database, to the broker, and on a
	// clustered broker one to each other node besides its own
	// (<instance>.amqp-n<k>, k 1-based).
	pgUpstream, amqpUpstream := in.LinkUpstreams()
	upstreams := map[string]string{}
	var names []string
	for _, inst := range r.instances {
		names = append(names, fault.DBLink(inst.name), fault.BrokerLink(inst.name))
		upstreams[fault.DBLink(inst.name)], upstreams[fault.BrokerLink(inst.name)] = pgUpstream, amqpUpstream
		if c, ok := in.(infra.Cluster); ok && r.clientNodes != nil {
			nodes := c.Nodes()
			for k, n := range nodes {
				if k == r.clientNodes[inst.name] {
					upstreams[fault.BrokerLink(inst.name)] = n.Upstream
					continue
				}
				name := fault.NodeLink(inst.name, k)
				names = append(names, name)
				upstreams[name] = n.Upstream
			}
		}
	}
	for _, name := range names {
		upstream := upstreams[name]
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

// nodesOf spreads the instances over the cluster's nodes, one after the
// other in start order (the consumer, which declares the queue, on the
// first): the node each instance's own broker link goes to. Nil on one
// node.
func nodesOf(in infra.Infra, instances []instance) map[string]int {
	c, ok := in.(infra.Cluster)
	if !ok || len(c.Nodes()) < 2 {
		return nil
	}
	out := map[string]int{}
	for i, in := range instances {
		out[in.name] = i % len(c.Nodes())
	}
	return out
}

// viaLink rewrites a URL's host to the link's listen address and, for
// PostgreSQL, names the writer (application_name) so audit triggers and
// pg_stat_activity tell the instances apart.
func viaLink(raw string, link *proxies.Link, appName string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Host = link.Addr()
	if appName != "" {
		q := u.Query()
		q.Set("application_name", appName)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// newSupervisor makes the run's supervisor, its log in the run's folder,
// stopped at teardown (and by an interrupt).
func (r *run) newSupervisor() error {
	outLog, err := os.Create(filepath.Join(r.dir, "supervisor.log"))
	if err != nil {
		return fmt.Errorf("supervisor log: %w", err)
	}
	r.cleanup = append(r.cleanup, func(context.Context) { outLog.Close() })
	// The supervisor logs each command line, which carries the URLs with
	// their passwords; one line per write, as the redactor needs.
	r.sup = supervisor.New(r.dir, r.sh.redactor().Writer(outLog))
	r.sh.track(r.dir, r.sup)
	r.cleanup = append(r.cleanup, func(ctx context.Context) {
		if r.sup.StopAll(ctx) != nil {
			return // a process may still hold its port: keep it reserved
		}
		for _, in := range r.instances {
			r.sh.ports.FreeAddr(in.control)
			r.sh.ports.FreeAddr(in.http)
		}
	})
	return nil
}

// startInstances starts every instance in start order and, once the last
// consumer is up, waits until the queue has a consumer. A failure — an
// instance that does not become ready (in is it), the queue never consumed
// (in is zero) — goes to failed, which says whether to go on.
func (r *run) startInstances(ctx context.Context, faults []fault.Fault, watch *observe.Watch, failed func(in instance, err error) bool) {
	consumers := 0
	for _, in := range r.instances {
		if in.proc.Role == protocol.Consumer {
			consumers++
		}
	}
	started, up := 0, 0
	for i := range r.instances {
		err := r.instances[i].addresses(r.sh.ports)
		in := r.instances[i]
		var spec supervisor.Spec
		if err == nil {
			spec, err = r.spec(in, faults)
		}
		if err == nil {
			_, err = r.sup.Start(ctx, spec)
		}
		if err != nil {
			if !failed(in, fmt.Errorf("start %s: %w", in.name, err)) {
				return
			}
		} else if in.proc.Role == protocol.Consumer {
			up++
		}
		if in.proc.Role != protocol.Consumer {
			continue
		}
		if started++; started == consumers && up == consumers {
			if err := r.waitConsuming(ctx, watch); err != nil && !failed(instance{}, err) {
				return
			}
		}
	}
}

// waitConsuming waits until the consumer has declared its queue and
// consumes from it, so the relays never publish into a missing topology
// (the consumer binds the queue before it consumes). It asks the queue with
// a passive declare every ConsumerPoll: the management API's view of a queue
// declared a moment ago lags by seconds, and waiting on it cost each run
// about 5 s. It gives up after consumerStartTimeout.
func (r *run) waitConsuming(ctx context.Context, watch *observe.Watch) error {
	ctx, cancel := context.WithTimeout(ctx, consumerStartTimeout)
	defer cancel()
	if err := watch.WaitConsumer(ctx, r.sh.Target.Topology.Queue, ConsumerPoll); err != nil {
		return fmt.Errorf("the consumer did not start consuming: %w", err)
	}
	return nil
}

// teardown runs the cleanup steps, last first; a step that panics is
// recorded (the run becomes indeterminate) and the others still run.
func (r *run) teardown(ctx context.Context) {
	r.stop(ctx)
	r.removeNow(ctx)
}

// stop runs the run's cleanup steps, the last first: its processes, links,
// pools and observers are gone after it.
func (r *run) stop(ctx context.Context) {
	for i := len(r.cleanup) - 1; i >= 0; i-- {
		err := safe.Do(fmt.Sprintf("teardown step %d", i+1), func() error { r.cleanup[i](ctx); return nil })
		if perr, ok := safe.As(err); ok {
			r.onPanic(perr)
		}
	}
}

// remove drops the run's databases and deletes its vhost, once stop has
// run; a panic comes back as an error.
func (r *run) remove(ctx context.Context) error {
	if r.removeInfra == nil {
		return nil
	}
	return safe.Do("remove the run's databases and vhost", func() error { return r.removeInfra(ctx) })
}

// removeNow is remove before the run is judged: a panic is recorded (the
// run becomes indeterminate), like a cleanup step's.
func (r *run) removeNow(ctx context.Context) {
	if perr, ok := safe.As(r.remove(ctx)); ok {
		r.onPanic(perr)
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
			tl.WriteString(history.FormatEntry(e))
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
		wg.Go(func() { errs[i] = safe.Do(fmt.Sprintf("side by side %d", i+1), func() error { return fn(i) }) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ident makes a scenario name into a database-name prefix.
// slot is the run's name for a logical replication slot ({{slot}}): a
// relay that tails the write-ahead log keeps its position there, and
// every incarnation of it resumes from the same one. Unique to the run
// (its id), so runs side by side on one server never share one; the
// run's databases take their slots with them when dropped.
func (r *run) slot() string { return r.id + "_slot" }

// publication is the run's name for a publication ({{publication}}).
func (r *run) publication() string { return r.id + "_pub" }

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
