package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/observe"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/proxies"
)

// execute is the run proper, in five phases, each handing the next what it
// made; an error is a failure to run, not a verdict.
func (r *run) execute(ctx context.Context) error {
	p, err := r.provision(ctx)
	if err != nil {
		return err
	}
	s, err := r.start(ctx, p, stopAtFirst)
	if err != nil {
		return err
	}
	d, err := r.drive(ctx, p, s)
	if err != nil {
		return err
	}
	c, err := r.converge(ctx, s, d)
	if err != nil {
		return err
	}
	return r.judge(ctx, s, d, c)
}

// provisioned is what the provision phase leaves: the schedule as the
// target can run it, and the Env its faults act through (its Tap, Audit,
// Processes and Acknowledged are filled in as the run goes).
type provisioned struct {
	faults     []fault.Fault
	notOffered []result.Fault // faults drawn at random the target does not offer
	env        *fault.Env
	// need is what the run needs watched from outside; watchAlways installs
	// every observer whatever it needs (check-target checks they install).
	need        map[history.Source]bool
	watchAlways bool
}

// errRunFolder marks a failure to make the run's folder.
var errRunFolder = errors.New("run folder")

// provision makes the run's folder, takes the scenario as it runs on the
// target, draws its schedule, refuses (not run) what the target or the
// provider cannot do, and creates the run's databases, vhost, schema and
// links.
func (r *run) provision(ctx context.Context) (provisioned, error) {
	r.startPhase(PhaseInfra)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return provisioned{}, fmt.Errorf("%w: %w", errRunFolder, err)
	}
	caps := Capabilities{Provider: r.sh.Infra.Name(), BrokerRestart: r.sh.Infra.CanRestartBroker(), Apart: r.noInfra, Infra: r.sh.Infra}
	_, caps.DatabaseRestart = r.sh.Infra.(infra.DatabaseRestarter)
	plan, err := Compile(r.sc, r.sh.Target, caps, r.opts.Seed)
	if IsNotRun(err) {
		r.res.Verdict = result.NotRun
	}
	if err != nil {
		return provisioned{}, err
	}
	if plan.Fitted != "" {
		r.sh.logf("%s: %s", r.sc.Name, plan.Fitted)
	}
	r.plan = plan
	r.res.Window = plan.Scenario.Window // re-timed for the target's relay, maybe
	r.res.Traffic = plan.Scenario.Workload.ProfileName()
	p := provisioned{faults: plan.Faults, notOffered: plan.NotOffered, need: plan.Observe}
	r.instances, r.roles, r.clientNodes = plan.instances, plan.env.Roles, plan.env.ClientNodes
	// The run's environment is the one Compile judged the faults against,
	// with what the run makes: its links, vhost, databases, commit feed.
	env := plan.env
	env.Links, env.VHost, env.DB, env.Commits = r.links, r.id, r.pools, history.NewCommits()
	env.Deadline, env.Landings = cmp.Or(r.opts.FaultDeadline, DefaultFaultDeadline), fault.NewLandings()
	env.Logf = func(format string, args ...any) { r.sh.logf(r.sc.Name+": "+format, args...) }
	p.env = &env
	if err := r.setupInfra(ctx); err != nil {
		return provisioned{}, err
	}
	return p, nil
}

// started is what the start phase leaves: the target's processes running
// (the run's supervisor) and what watches them from outside.
type started struct {
	watch *observe.Watch
}

// stopAtFirst ends the start at the first process that fails.
func stopAtFirst(instance, error) bool { return false }

// start starts the target's processes (a failure goes to failed, which says
// whether to go on; the first one it stops at is start's error), installs
// what watches them from outside when the run needs it, hands the faults
// the tap and the audit trail, and refuses (not run) a run that cannot see
// what it needs.
func (r *run) start(ctx context.Context, p provisioned, failed func(instance, error) bool) (started, error) {
	if err := r.newSupervisor(); err != nil {
		return started{}, err
	}
	s := started{watch: observe.New(observe.Run{Infra: r.sh.Infra, VHost: r.id, Target: r.sh.Target, DB: r.pools, DBName: r.dbs, OnPanic: r.onPanic}, p.env.Commits)}
	r.cleanup = append(r.cleanup, func(context.Context) { s.watch.Close() })
	var stopped error
	r.startInstances(ctx, p.faults, s.watch, func(in instance, err error) bool {
		if failed(in, err) {
			return true
		}
		stopped = err
		return false
	})
	if stopped != nil {
		return started{}, stopped
	}
	if p.watchAlways || r.watches(p.need) {
		s.watch.Install(ctx, p.need)
	}
	if s.watch.Tapped() {
		p.env.Tap = observe.TapQueue
	}
	if s.watch.Audited() {
		p.env.Audit = s.watch.Audit
	}
	if s.watch.Routing() {
		p.env.Routed = s.watch.Routed
	}
	if why := s.watch.Unobservable(p.need); why != "" {
		r.res.Verdict = result.NotRun
		return started{}, fmt.Errorf("not run on target %s: %s", r.sh.Target.Name, why)
	}
	return s, nil
}

// driven is what the drive phase leaves: the schedule and each fault's
// result (in schedule order), when the workload began, and the deadline
// of the run's attack and convergence.
type driven struct {
	faults        []fault.Fault
	results       []result.Fault
	workloadStart time.Time
	deadline      time.Time
	acknowledged  int64 // requests the producer answered ok (facts)
	// acknowledgedByID: per aggregate id, its requests answered ok (nil:
	// the create gives no id).
	acknowledgedByID map[string]int64
	// requestsFailed: requests the producer failed (5xx, or no answer)
	// and the workload sent again.
	requestsFailed int64
	loadEnded      time.Time // when the workload's last order was answered
	traffic        history.Traffic
	// clients stops the count of the target's clients (watchClients)
	// and returns it; the converge phase calls it once the pipeline
	// settled, so the count covers the reconnection.
	clients func() []history.ClientSample
}

// runBound bounds a run from its workload to the end of its convergence:
// three minutes, and as long as a fault may wait for a takeover besides
// (fault.TakeoverWait), so a target with a long lease keeps its
// past-lease windows.
func runBound(lease time.Duration) time.Duration {
	return 3*time.Minute + fault.TakeoverWait(0, lease)
}

// drive runs the workload with the faults injected alongside, waits for
// every fault to end, and makes sure each was undone and every link carries
// traffic again: otherwise the pipeline could not converge for the
// harness's reasons.
func (r *run) drive(ctx context.Context, p provisioned, s started) (driven, error) {
	r.startPhase(PhaseWorkload)
	d := driven{faults: p.faults, workloadStart: time.Now()}
	wl := workload.New(r.plan.Scenario.Workload, r.sh.Target.Workload, uint64(r.opts.Seed), r.producerAddr())
	wl.Carried(s.watch.Effects)
	p.env.Processes = r.sup
	p.env.Acknowledged = wl.Acknowledged
	runCtx, cancelRun := context.WithTimeout(ctx, runBound(r.sh.Target.Lease))
	defer cancelRun()
	d.deadline, _ = runCtx.Deadline()
	// Every answered request is an event (the create and each step), with
	// one effect to come.
	stopClients := r.watchClients(ctx, s.watch, func() int { return int(wl.Acknowledged()) })
	var once sync.Once
	var samples []history.ClientSample
	d.clients = func() []history.ClientSample {
		once.Do(func() { samples = stopClients() })
		return samples
	}
	r.cleanup = append(r.cleanup, func(context.Context) { d.clients() })
	var held *backlog
	if h := r.plan.Scenario.Workload.Hold; h != nil {
		var queue func() (history.QueueInfo, error)
		if h.Role == protocol.Consumer {
			queue = func() (history.QueueInfo, error) { return s.watch.Queue(runCtx, r.sh.Target.Topology.Queue) }
		}
		var err error
		if held, err = r.holdBack(*h, queue); err != nil {
			return d, err
		}
		p.env.Backlog, p.env.Released = held.seen, held.released
	}
	faultsDone, faultEnded := r.inject(runCtx, p.env, p.faults)
	if held != nil {
		measure := func() (int, error) { return int(wl.Acknowledged()), nil }
		if held.hold.Role == protocol.Consumer {
			measure = func() (int, error) { return s.watch.Waiting(runCtx, r.sh.Target.Topology.Queue) }
		}
		go held.release(runCtx, p.env.Deadline, measure, overBacklog(p.faults, faultEnded, p.env.Landings))
	}
	stopTick := r.tick(PhaseWorkload, func() float64 {
		return float64(wl.Acknowledged()) / float64(max(r.plan.Scenario.Workload.Orders*max(r.plan.Scenario.Workload.EventsPerOrder, 1), 1))
	})
	wlErr := wl.Run(runCtx)
	stopTick()
	d.acknowledged, d.acknowledgedByID, d.requestsFailed, d.loadEnded = wl.Acknowledged(), wl.AcknowledgedByID(), wl.Stats().Failed, time.Now()
	r.startPhase(PhaseFaults)
	d.results = faultsDone()
	r.res.Faults = append(d.results, p.notOffered...)
	st := wl.Stats()
	d.traffic = history.Traffic{Profile: r.plan.Scenario.Workload.ProfileName(), Batch: r.sh.Target.Relay.Batch, MaxInFlight: st.MaxInFlight, Carried: st.Carried, Sent: st.Sent}
	if held != nil {
		<-held.released
		held.traffic(&d.traffic)
		if held.err != nil {
			r.sh.logf("%s: %v", r.sc.Name, held.err)
		}
	}
	if wlErr == nil && r.plan.Scenario.Workload.AfterFaults > 0 {
		wlErr = wl.RunAfterFaults(runCtx)
		d.acknowledged, d.acknowledgedByID, d.requestsFailed, d.loadEnded = wl.Acknowledged(), wl.AcknowledgedByID(), wl.Stats().Failed, time.Now()
	}
	if wlErr != nil {
		return d, fmt.Errorf("workload: %w (%d orders acknowledged)", wlErr, wl.Acknowledged())
	}
	// Every fault has ended. What one could not undo, and a link that does
	// not carry traffic, would keep the pipeline from converging for the
	// harness's reasons: the run shows nothing, and waits for nothing.
	if notUndone := r.res.NotUndone(); len(notUndone) > 0 {
		return d, fmt.Errorf("not waiting for convergence: %s", strings.Join(notUndone, "; "))
	}
	if err := checkLinks(runCtx, r.linksUp(runCtx), linkCheckTimeout); err != nil {
		return d, fmt.Errorf("after the faults: %w", err)
	}
	return d, nil
}

// linksUp are the run's links that must carry traffic after the faults:
// all of them, but on a clustered broker not those to a node a fault left
// down for the rest of the run (a lost machine).
func (r *run) linksUp(ctx context.Context) map[string]*proxies.Link {
	c, ok := r.sh.Infra.(infra.Cluster)
	if !ok || r.clientNodes == nil {
		return r.links
	}
	st, err := c.Status(ctx)
	if err != nil || len(st.Down) == 0 {
		return r.links
	}
	gone := map[string]bool{}
	for _, n := range c.Nodes() {
		if slices.Contains(st.Down, n.Name) {
			gone[n.Upstream] = true
		}
	}
	out := make(map[string]*proxies.Link, len(r.links))
	for name, l := range r.links {
		if !gone[l.Upstream()] {
			out[name] = l
		}
	}
	return out
}

// converged is what the converge phase leaves: when the pipeline was first
// seen settled (err: it was not, in time), and how long after the last
// fault ended (-1: not converged; 0 without a fault).
type converged struct {
	at         time.Time
	err        error
	recoveryMS int64
	clients    []history.ClientSample // the target's clients, counted until it settled
}

// converge waits, within the run's deadline, for the pipeline to settle; a
// process down with no restart coming ends the run.
func (r *run) converge(ctx context.Context, s started, d driven) (converged, error) {
	r.startPhase(PhaseConverging)
	runCtx, cancelRun := context.WithDeadline(ctx, d.deadline)
	defer cancelRun()
	timeout := r.plan.Scenario.Converge
	if timeout == 0 {
		timeout = 45 * time.Second
	}
	if r.opts.Converge > 0 {
		timeout = r.opts.Converge
	}
	convStart := time.Now()
	stopTick := r.tick(PhaseConverging, func() float64 { return time.Since(convStart).Seconds() / timeout.Seconds() })
	var c converged
	stall := time.Duration(0)
	if r.opts.Stall > 0 {
		stall = max(r.opts.Stall, 5*r.sh.Target.Lease)
	}
	c.at, c.err = waitConverged(runCtx, s.watch, r.sup.Down, converge{Timeout: timeout, Quiet: QuietWindow, Stall: stall, Events: int(d.acknowledged)})
	stopTick()
	c.clients = d.clients()
	if isDown(c.err) {
		return c, c.err
	}
	lastFault := time.Time{}
	for _, f := range d.results {
		if f.End.After(lastFault) {
			lastFault = f.End
		}
	}
	if c.err != nil {
		c.recoveryMS = -1
	} else if !lastFault.IsZero() {
		c.recoveryMS = max(c.at.Sub(lastFault).Milliseconds(), 0)
	}
	return c, nil
}

// recovery is the run's recovery after its faults, with the liveness
// bound drawn from it (check.LivenessBound): the span of the faults that
// happened, the target's lease where its file says one, and the
// reconnection its clients were seen to take (check.MeasureReconnection).
func (r *run) recovery(d driven, c converged) *history.Recovery {
	var first, last time.Time
	for _, f := range d.results {
		if !f.Hit || f.Start.IsZero() {
			continue
		}
		if first.IsZero() || f.Start.Before(first) {
			first = f.Start
		}
		if f.End.After(last) {
			last = f.End
		}
	}
	if last.IsZero() {
		return nil
	}
	rec := &history.Recovery{Healed: last, LoadEnded: d.loadEnded}
	rc := check.MeasureReconnection(c.clients, first, last)
	lag := check.MeasureLag(c.clients, first)
	rec.Bound, rec.BoundIs = check.LivenessBound(last.Sub(first), r.sh.Target.Lease, lag, rc)
	if c.err == nil {
		rec.CaughtUp = c.at
	}
	return rec
}

// judge stops the processes, observes what the run left, checks the
// invariants and the scenario's evidence against it, and draws the
// timeline, all into the run's result.
func (r *run) judge(ctx context.Context, s started, d driven, c converged) error {
	r.res.RecoveryMS = c.recoveryMS
	converged := result.Invariant{Name: check.Converged, OK: c.err == nil}
	if c.err != nil {
		// Not converged in time is not, by itself, a failure of the
		// pipeline's: the run is indeterminate unless an invariant is
		// broken otherwise (a lost event, a stuck row).
		converged.Unconverged = true
		converged.Detail = c.err.Error()
		converged.Violations = []result.Violation{{Kind: "not-converged", Message: c.err.Error()}}
	}

	r.startPhase(PhaseChecking)
	stopCtx, cancelStop := context.WithTimeout(ctx, 20*time.Second)
	_ = r.sup.StopAll(stopCtx)
	cancelStop()
	// A node a fault left down (a lost machine) still holds its consumers'
	// places in the queue and, for a queue that lived there only, the
	// queue itself: the end state is read from the whole cluster again.
	if c, ok := r.sh.Infra.(infra.Cluster); ok && r.clientNodes != nil {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		did, err := c.Restore(rctx)
		cancel()
		if err != nil {
			return fmt.Errorf("restore the cluster before reading the end state: %w", err)
		}
		if len(did) > 0 {
			r.sh.logf("%s: cluster restored before reading the end state: %s", r.sc.Name, strings.Join(did, "; "))
		}
	}
	ends := r.ends()
	ends.Unbound = unboundSpans(d.results)
	ends.OutageUnopened = unopenedOutage(d.results)
	ends.LogPaths = r.logPaths()
	// The processes have stopped: the queue can be read without taking
	// anything from a consumer.
	ends.Queued = true
	obs, err := s.watch.End(ctx, ends)
	if err != nil {
		return fmt.Errorf("observe: %w", err)
	}
	obs.Recovery = r.recovery(d, c)
	obs.Acknowledged, obs.AcknowledgedByID, obs.RequestsFailed = d.acknowledged, d.acknowledgedByID, d.requestsFailed
	obs.Traffic = d.traffic
	obs.Poisoned = poisoned(d.results)
	r.obs = obs
	checked, counts := check.Check(obs, r.plan.Scenario.Invariants)
	invs := append([]result.Invariant{converged}, checked...)
	evidence := check.Evaluate(obs, r.plan.Scenario.Evidence)
	if r.plan.Scenario.Expect != nil {
		ev, notes := r.plan.Scenario.Expect(obs, d.results, invs)
		evidence, invs = append(evidence, ev), result.Annotated(invs, notes)
	}
	r.res.Invariants = invs
	r.res.Evidence = evidence
	r.res.Counts = counts
	r.res.Timeline = check.BuildTimeline(obs, d.workloadStart, time.Now(), d.results, invs)
	r.markSupervised(r.res.Timeline, d.workloadStart)
	return nil
}
