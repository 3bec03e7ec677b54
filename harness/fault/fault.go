// Package fault holds the faults a scenario injects. A fault is a value
// with a description and an Inject; each kind is one small file. Inject
// waits for its trigger, does its damage, undoes it where that is part of
// the fault (restart, resume, toxic removed), and reports what happened.
//
// The same file declares the kind's Kind (kind.go) — its name and
// parameters as a schedule file writes them, the window it opens, how
// explore enumerates it on a target and how the shrinker makes it
// smaller — and registers it in the table Kinds, which explore and
// `faultline list` read. Adding a kind is adding its file (and the
// scenarios that use it).
package fault

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/proxies"
)

// Fault is one injected fault.
type Fault interface {
	// Describe says what the fault will do, before it happens.
	Describe() result.Fault
	// Inject waits for the trigger, injects, recovers, and reports.
	Inject(ctx context.Context, env *Env) result.Fault
}

// StartArmer is a fault armed in a process's environment at start: at the
// crash point window of the instance ref, with arming (e.g. "kill@3").
type StartArmer interface {
	StartArming() (ref history.Ref, window, arming string, ok bool)
}

// Needs is a fault that needs a capability of the infrastructure.
type Needs interface {
	Needs() []string
}

// Observer is a fault that reads sources watched from outside while it
// acts: the commits it is timed by (history.SourceCommits: it cannot run
// without them), the commits it reads its outcome against where they can
// be watched (SourceCommitsSeen), the outbox's audit trail (SourceAudit),
// the publishes as they are routed (SourcePublishes, the live tap told
// through the commit feed as history.TablePublish).
type Observer interface {
	Observes() []history.Source
}

// ObservedBy are the sources the faults read while they act.
func ObservedBy(faults []Fault) map[history.Source]bool {
	out := map[history.Source]bool{}
	for _, f := range faults {
		if o, ok := f.(Observer); ok {
			for _, s := range o.Observes() {
				out[s] = true
			}
		}
	}
	return out
}

// Requirer is a fault that needs something of the target (an instance, a
// crash point, a contract query); Require says what is missing, and the
// scenario is not run on that target.
type Requirer interface {
	Require(env *Env) error
}

// Capabilities a fault may need.
const (
	CapBrokerRestart = "broker-restart"
	// CapCluster: a clustered broker (infra.Cluster); the run goes to
	// one, where the provider can start it.
	CapCluster = "broker-cluster"
	// CapStandby: a database with a promotable asynchronous standby
	// (infra.Replicated); CapStandbySync: a synchronous one.
	CapStandby     = "database-standby"
	CapStandbySync = "database-standby-sync"
	// CapDatabaseRestart: a PostgreSQL server the run may crash and start
	// again (infra.DatabaseRestarter), of its own: the run is exclusive.
	CapDatabaseRestart = "database-restart"
)

// NeedsOf lists the capabilities a schedule's faults need (Needs), in
// schedule order: what the infrastructure of its run must give.
func NeedsOf(faults []Fault) []string {
	var out []string
	for _, f := range faults {
		if n, ok := f.(Needs); ok {
			out = append(out, n.Needs()...)
		}
	}
	return out
}

// Env is what a fault may touch: the scenario's processes, links, broker,
// the target's databases and what its target file says of them.
type Env struct {
	Roles     *Roles
	Processes *supervisor.Supervisor
	Links     map[string]*proxies.Link // by run link name: instance.pg, instance.amqp
	Infra     infra.Infra
	VHost     string
	// DB are the run's databases by their names in the target file.
	DB       map[string]*pgxpool.Pool
	Contract target.Contract
	Topology target.Topology
	// Observe names the target's tables a fault may act on from outside.
	Observe target.Observe
	// Commits tells the commits of writes to the target's watched tables.
	Commits *history.Commits
	// Tap is the queue faultline bound to the exchange ("" if none): a
	// fault that unbinds the target's queue unbinds it too, so an
	// unroutable message stays unroutable.
	Tap string
	// Audit reads the outbox's audit trail from faultline's triggers, the
	// rows with an id above after, in trail order (nil: none installed).
	Audit func(ctx context.Context, after int64) ([]history.AuditRow, error)
	// Routed tells when faultline received the broker's firehose copies
	// of the publishes of each of ids so far (nil: the run's firehose is
	// off).
	Routed func(ids []string) map[string][]time.Time
	// Acknowledged reports how many orders the workload has had answered.
	Acknowledged func() int64
	// ClientNodes maps an instance to the index of the broker node its
	// broker link goes to, on a clustered broker (infra.Cluster); nil on one
	// node.
	ClientNodes map[string]int
	// Deadline bounds how long a fault waits for its window to open.
	Deadline time.Duration
	// Lease is the relays' claim lease (the target's timing.lease): a fault
	// that waits for a takeover waits some leases for it, never a fixed
	// time sized on one target's lease.
	Lease time.Duration
	// RelayModel is how the target's relays take work from the outbox
	// (history.ModelClaim, ModelOffset, ModelLog).
	RelayModel string
	// Landings tells when a fault on a link has landed (Trigger.AfterLink).
	Landings *Landings
	// Backlog is closed once the backlog the run's traffic piles up is
	// seen waiting (Trigger.OverBacklog); nil when the traffic piles up
	// none.
	Backlog <-chan struct{}
	// Released is closed once the role the traffic held back runs again
	// (Trigger.AfterRelease); nil when the traffic holds none back.
	Released <-chan struct{}
	Logf     func(format string, args ...any)
}

// Trigger says when a fault fires: after the workload has had AfterOrders
// orders acknowledged, with OverBacklog once the backlog the traffic piles
// up is seen (the held role stays held until the fault has ended), with
// AfterRelease once the held role was let go to its backlog, and,
// with AfterLink, once a fault of the same run on that link
// ("producer.amqp") has landed, plus Delay. AfterLink orders two faults by
// what happened, where a delay would only make the order likely.
type Trigger struct {
	AfterOrders int64
	OverBacklog bool
	// PastRelease, with OverBacklog, releases the held role once the
	// fault has acted (ActedKey on the run's Landings), not once it has
	// ended: the fault goes on while the role works off its backlog.
	PastRelease bool
	// AfterRelease fires once the role the traffic held back runs again,
	// its backlog waiting for it.
	AfterRelease bool
	AfterLink    history.Link
	Delay        time.Duration
}

func (t Trigger) String() string {
	s := fmt.Sprintf("after %d orders", t.AfterOrders)
	switch {
	case t.OverBacklog && t.AfterOrders == 0:
		s = "over the backlog"
	case t.OverBacklog:
		s += ", over the backlog"
	}
	if t.PastRelease {
		s += " (the held role released once it acted)"
	}
	switch {
	case t.AfterRelease && t.AfterOrders == 0 && !t.OverBacklog:
		s = "once released to the backlog"
	case t.AfterRelease:
		s += ", once released to the backlog"
	}
	if t.AfterLink != "" {
		s += fmt.Sprintf(", once %s is faulted", t.AfterLink)
	}
	if t.Delay > 0 {
		s += " + " + t.Delay.String()
	}
	return s
}

// Wait blocks until the trigger fires.
func (env *Env) Wait(ctx context.Context, t Trigger) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for env.Acknowledged() < t.AfterOrders {
		select {
		case <-ctx.Done():
			return fmt.Errorf("trigger %s: %w", t, ctx.Err())
		case <-tick.C:
		}
	}
	for _, held := range []struct {
		want        bool
		ch          <-chan struct{}
		none, never string
	}{
		{t.OverBacklog, env.Backlog, "the run's traffic piles up no backlog", "the backlog never showed"},
		{t.AfterRelease, env.Released, "the run's traffic holds no role back", "the held role was never released"},
	} {
		if !held.want {
			continue
		}
		if held.ch == nil {
			return fmt.Errorf("trigger %s: %s", t, held.none)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("trigger %s: %s: %w", t, held.never, ctx.Err())
		case <-held.ch:
		}
	}
	if t.AfterLink != "" {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if env.Deadline > 0 {
			wctx, cancel = context.WithTimeout(ctx, env.Deadline)
		}
		err := env.Landings.wait(wctx, string(t.AfterLink))
		cancel()
		if err != nil {
			return fmt.Errorf("trigger %s: %w", t, err)
		}
	}
	return pause(ctx, t.Delay)
}

// pause waits d — a scheduled duration of a fault, not a stand-in for a
// condition.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Process finds the process instance ref ("relay-2", "consumer").
func (env *Env) Process(ref history.Ref) (*supervisor.Process, error) {
	in, err := env.Roles.Instance(ref)
	if err != nil {
		return nil, err
	}
	p, ok := env.Processes.Process(in.Name)
	if !ok {
		return nil, fmt.Errorf("no process %q (%s) in this run", in.Name, ref)
	}
	return p, nil
}

// Link finds the link ref ("relay-1.pg", "consumer.amqp").
func (env *Env) Link(ref history.Link) (*proxies.Link, error) {
	name, err := env.Roles.Link(ref)
	if err != nil {
		return nil, err
	}
	l, ok := env.Links[name]
	if !ok {
		return nil, fmt.Errorf("no link %q (%s) in this run", name, ref)
	}
	return l, nil
}

// Point is the own name of the crash point at window of the instance ref.
func (env *Env) Point(ref history.Ref, window string) (string, error) {
	return env.Roles.Point(ref, window)
}

// Query is the contract query q (named name, for messages) with a pool on
// the run's copy of its database, or an error saying the target's contract
// has none.
func (env *Env) Query(q *target.Query, name string) (target.Query, *pgxpool.Pool, error) {
	if q == nil {
		return target.Query{}, nil, fmt.Errorf("the target's contract has no %s query", name)
	}
	pool, ok := env.DB[q.Database]
	if !ok {
		return *q, nil, fmt.Errorf("contract %s: no database %q in this run", name, q.Database)
	}
	return *q, pool, nil
}

// WaitLog polls a process's event log until an entry matches, up to the
// fault deadline.
func (env *Env) WaitLog(ctx context.Context, process history.Ref, match func(eventlog.Entry) bool) (eventlog.Entry, error) {
	return env.waitLog(ctx, process, env.Deadline, match)
}

// waitLog is WaitLog up to within.
func (env *Env) waitLog(ctx context.Context, process history.Ref, within time.Duration, match func(eventlog.Entry) bool) (eventlog.Entry, error) {
	return env.waitLogFrom(ctx, process, 0, within, match)
}

// waitLogFrom is waitLog over the lines from offset on.
func (env *Env) waitLogFrom(ctx context.Context, process history.Ref, offset int64, within time.Duration, match func(eventlog.Entry) bool) (eventlog.Entry, error) {
	p, err := env.Process(process)
	if err != nil {
		return eventlog.Entry{}, err
	}
	var found eventlog.Entry
	// A log not written yet is read again, from where the last read ended.
	err = poll.Until(ctx, within, 25*time.Millisecond, func() (bool, error) {
		entries, next, err := readFrom(p.EventLogPath(), offset)
		if err != nil {
			return false, nil
		}
		offset = next
		for _, e := range entries {
			if match(e) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return eventlog.Entry{}, fmt.Errorf("no matching line in %s's event log within %s", process, within)
	}
	return found, nil
}

// findLog looks once through a process's event log for an entry that
// matches.
func (env *Env) findLog(process history.Ref, match func(eventlog.Entry) bool) (eventlog.Entry, bool, error) {
	p, err := env.Process(process)
	if err != nil {
		return eventlog.Entry{}, false, err
	}
	entries, _, err := readFrom(p.EventLogPath(), 0)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return eventlog.Entry{}, false, fmt.Errorf("read %s's event log: %w", process, err)
	}
	for _, e := range entries {
		if match(e) {
			return e, true, nil
		}
	}
	return eventlog.Entry{}, false, nil
}

// readFrom reads whole lines of an event log from offset.
func readFrom(path string, offset int64) ([]eventlog.Entry, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, offset, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return nil, offset, err
	}
	var out []eventlog.Entry
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break // a partial last line is read next time
		}
		offset += int64(len(line))
		entries, perr := eventlog.Read(strings.NewReader(line))
		if perr == nil {
			out = append(out, entries...)
		}
	}
	return out, offset, nil
}

// Admin opens an AMQP channel straight to the scenario's vhost (not through
// a proxy) for faults that change the topology or publish themselves.
// The broker may be restarting (another fault of the same schedule): the
// dial is retried until the fault deadline.
func (env *Env) Admin(ctx context.Context) (*amqp.Connection, *amqp.Channel, error) {
	deadline := time.Now().Add(env.Deadline)
	var conn *amqp.Connection
	var err error
	for {
		conn, err = amqp.DialConfig(env.Infra.AMQPURL(env.VHost), infra.OwnAMQPConfig(5*time.Second))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("admin connection: %w", err)
		}
		if perr := pause(ctx, 200*time.Millisecond); perr != nil {
			return nil, nil, fmt.Errorf("admin connection: %w (last error: %v)", perr, err)
		}
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("admin channel: %w", err)
	}
	return conn, ch, ctx.Err()
}

// notUndone is r with the error of an undo that failed: what the fault did
// is still in place, and the run shows nothing about the pipeline.
func notUndone(r result.Fault, err error) result.Fault {
	r.UndoError = err.Error()
	return r
}

// recorder is record for a fault that names the events it acted on: the
// result of f from *start (read when it is called, so a fault that starts
// its clock again is timed from there), with ids.
func recorder(f Fault, start *time.Time) func(hit bool, err error, ids ...string) result.Fault {
	return func(hit bool, err error, ids ...string) result.Fault {
		res := record(f, *start, hit, err)
		res.EventIDs = ids
		return res
	}
}

// record fills the common fields of a fault's result.
func record(f Fault, start time.Time, hit bool, err error) result.Fault {
	r := f.Describe()
	r.Start, r.End, r.Hit = start, time.Now(), hit
	if err != nil {
		r.Error = err.Error()
	}
	return r
}
