// Package observe watches a run's target from outside and reads what it
// left: the triggers faultline installs in the run's databases (a
// notification of each committed write, the outbox's audit trail), the
// commit stream fed from them, the tap queue, the broker's counters, the
// messages left in the queue, the target's tables through its contract
// queries, and the processes' event logs. It hands the checker plain data
// (a history.Record, progress samples); the checker judges and reads
// nothing itself, and observe imports no checker: the runner waits for
// convergence by handing observe's samples to check. Data flows one way:
// observe → runner → check.
//
// One file per source, each declaring its source as a value (sources.go:
// what it needs of the target file, when it is read, how it installs and
// what it records): triggers.go (the triggers), commits.go (the commit
// stream), audit.go (the audit trail), tap.go (the tap queue), relay.go
// (the live tap, an offset relay's position), probe.go (broker counters),
// queued.go (the queue after the processes stopped, the dead-letter
// queue), contract.go (the contract queries), logs.go (event logs),
// converge.go (progress samples), end.go (the end
// state).
package observe

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/safe"
	"github.com/faultline-dev/faultline/harness/target"
)

// Run is the run a Watch looks at.
type Run struct {
	Infra  infra.Infra
	VHost  string // the run's vhost
	Target *target.Target
	// DB maps each of the target's databases (by its name in the target
	// file) to a pool on the run's copy of it, and DBName to the copy's
	// name.
	DB     map[string]*pgxpool.Pool
	DBName map[string]string
	// OnPanic is told a panic of a goroutine of the watch (a LISTEN loop).
	OnPanic func(*safe.PanicError)
}

// Watch is what faultline has watching one run's target from outside:
// triggers on the observed tables (an audit trail of every outbox write
// with its writer, and a notification of each write when its transaction
// commits), a listener per database feeding the commits to the faults, the
// tap queue, and a probe of the broker's queues. Close stops it.
type Watch struct {
	run     Run
	commits *history.Commits
	// audit is set once the outbox's audit trigger is in place.
	audit bool
	// leased is set once the audit trail copies each write's lease
	// (observe.outbox.lease).
	leased bool
	// position is set once an offset relay's position table is watched.
	position bool
	// effects is set once the effects table is watched.
	effects bool
	tapErr  error    // why the tap queue is not bound (nil: it is)
	why     []string // what could not be installed
	probe   *queueProbe
	// failed are the sources that could not be installed, and why.
	failed map[history.Source]error
	// recorders write what the installed sources watched (installNeeded).
	recorders []recorder
	// routed are the firehose's copies, by eventId (SourceRouted).
	routed routedTimes

	mu      sync.Mutex
	closers []func() // the listeners' stops
	// withStatus: whether the outbox query returns a status column, once
	// asked.
	withStatus *bool
}

// errNotInstalled: Install has not run yet.
var errNotInstalled = errors.New("not installed yet")

// New watches run; the commits its triggers notify go to commits.
// Nothing is installed until Install.
func New(run Run, commits *history.Commits) *Watch {
	return &Watch{run: run, commits: commits, probe: &queueProbe{infra: run.Infra, vhost: run.VHost}, tapErr: errNotInstalled, failed: map[history.Source]error{}}
}

// Close stops the listeners and closes the probe's connection.
func (w *Watch) Close() {
	w.mu.Lock()
	closers := w.closers
	w.closers = nil
	w.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
	w.probe.close()
}

func (w *Watch) onClose(stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closers = append(w.closers, stop)
}

// Audited reports whether the outbox's audit trigger is in place.
func (w *Watch) Audited() bool { return w.audit }

// Tapped reports whether the tap queue is bound.
func (w *Watch) Tapped() bool { return w.tapErr == nil }

// Missing is what could not be installed, one sentence each.
func (w *Watch) Missing() []string { return w.why }

// Unobservable says why a scenario that watches the target from outside
// cannot run ("" if it can): a source it needs failed to install (Install
// records each failure against its source).
func (w *Watch) Unobservable(need map[history.Source]bool) string { return w.uninstalled(need) }

// Queue asks the broker about a queue of the run's vhost.
func (w *Watch) Queue(ctx context.Context, queue string) (history.QueueInfo, error) {
	return w.probe.queue(ctx, queue)
}
