package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
)

// backlogPoll is how often a held relay's backlog (the facts the workload
// had acknowledged) is measured; consumerBacklogPoll a held consumer's,
// which asks the management API, whose counts change once a statistics
// interval (500 ms on faultline's brokers).
const (
	backlogPoll         = 20 * time.Millisecond
	consumerBacklogPoll = 100 * time.Millisecond
)

// backlog holds a role back (every instance frozen) while the traffic
// piles up its work, and releases it once the backlog is seen and every
// fault that acts over the backlog has ended.
type backlog struct {
	hold  workload.Hold
	procs []*supervisor.Process
	// seen is closed once the backlog is seen (fault.Env.Backlog);
	// released once the role runs again.
	seen, released chan struct{}
	// measured is the backlog when the role was released (0: never seen
	// as much as wanted); err why the hold ended without it.
	measured int
	err      error
	// queue, if not nil, reads the held consumer's queue; atFreeze and
	// atThaw are what it read once every instance was frozen and just
	// before the thaw (nil: not read, or the read failed).
	queue            func() (history.QueueInfo, error)
	atFreeze, atThaw *history.QueueInfo
}

// holdBack freezes every instance of the role h holds, before the
// workload starts; queue, if not nil, reads a held consumer's queue, at
// the freeze and at the thaw.
func (r *run) holdBack(h workload.Hold, queue func() (history.QueueInfo, error)) (*backlog, error) {
	b := &backlog{hold: h, seen: make(chan struct{}), released: make(chan struct{}), queue: queue}
	for _, p := range r.sup.Processes() {
		if p.Role() == h.Role {
			b.procs = append(b.procs, p)
		}
	}
	if len(b.procs) == 0 {
		return nil, fmt.Errorf("traffic holds the %s back, and the target runs none", h.Role)
	}
	for i, p := range b.procs {
		if err := p.Pause(); err != nil {
			b.thaw(b.procs[:i])
			return nil, fmt.Errorf("hold the %s back: %w", h.Role, err)
		}
	}
	b.atFreeze = b.readQueue()
	r.sh.logf("%s: %d %s instances frozen until %d of their work waits", r.sc.Name, len(b.procs), h.Role, h.Backlog)
	return b, nil
}

// readQueue reads the held consumer's queue now (nil: not read, or the
// read failed).
func (b *backlog) readQueue() *history.QueueInfo {
	if b.queue == nil {
		return nil
	}
	q, err := b.queue()
	if err != nil {
		return nil
	}
	return &q
}

// traffic writes what the hold saw into t.
func (b *backlog) traffic(t *history.Traffic) {
	t.Held, t.Want, t.Backlog = b.hold.Role, b.hold.Backlog, b.measured
	if q := b.atFreeze; q != nil {
		t.ConsumersAtFreeze = &q.Consumers
	}
	if q := b.atThaw; q != nil {
		t.ConsumersAtThaw, t.ReadyAtThaw, t.UnackedAtThaw = &q.Consumers, &q.Ready, &q.Unacked
	}
}

// thaw resumes procs; a process that exited meanwhile (killed by a fault
// over the backlog) has nothing to resume.
func (b *backlog) thaw(procs []*supervisor.Process) error {
	var errs []error
	for _, p := range procs {
		if err := p.Resume(); err != nil && !errors.Is(err, supervisor.ErrNotRunning) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// release waits, within bound, until measure reports the backlog, tells
// the faults over it (seen), waits for those to end (over), and thaws the
// role; it always thaws, and records what it saw.
func (b *backlog) release(ctx context.Context, bound time.Duration, measure func() (int, error), over []<-chan struct{}) {
	defer close(b.released)
	last, err := b.wait(ctx, bound, measure)
	if err == nil {
		b.measured = last
		close(b.seen)
		for _, done := range over {
			select {
			case <-done:
			case <-ctx.Done():
			}
		}
	} else {
		b.err = fmt.Errorf("the backlog never showed: %d of %d within %s: %w", last, b.hold.Backlog, bound, err)
	}
	b.atThaw = b.readQueue()
	if terr := b.thaw(b.procs); terr != nil {
		b.err = errors.Join(b.err, terr)
	}
}

// wait polls measure until it reports the backlog, ctx ends or bound
// passes; it returns the last measure.
func (b *backlog) wait(ctx context.Context, bound time.Duration, measure func() (int, error)) (int, error) {
	last := 0
	every := backlogPoll
	if b.hold.Role == protocol.Consumer {
		every = consumerBacklogPoll
	}
	err := poll.Until(ctx, bound, every, func() (bool, error) {
		n, err := measure()
		if err == nil {
			last = n
		}
		return err == nil && n >= b.hold.Backlog, err
	})
	return last, err
}

// overBacklog is what the release waits for of the faults that act over
// the backlog (fault.Trigger.OverBacklog): each one's end, or its acting
// where it goes on past the release (fault.ReleaseAfter).
func overBacklog(faults []fault.Fault, done []<-chan struct{}, landings *fault.Landings) []<-chan struct{} {
	var out []<-chan struct{}
	for i, f := range faults {
		if k, ok := fault.KindOf(f); ok && k.Trigger(f).OverBacklog {
			out = append(out, fault.ReleaseAfter(f, done[i], landings))
		}
	}
	return out
}

// trafficEvidence is what shows that the traffic's shape happened: a held
// role released to its backlog (for the relays, a full claim besides,
// where the audit trail shows claims), a burst's requests in flight at
// once. A run whose shape never showed is indeterminate, like one whose
// window did not open.
// sustainHeld is the part of a sustained profile's rate the clients must
// have held: the producer answering slower than the pipeline carried
// leaves the load short of it, and the run shows no sustained load.
const sustainHeld = 0.75

func trafficEvidence(spec workload.Spec) []check.Evidence {
	var out []check.Evidence
	if spec.Hold != nil {
		out = append(out, check.BacklogReleased())
		if spec.Hold.Role == protocol.Relay {
			out = append(out, check.FullClaim())
		}
	}
	if spec.ProfileName() == workload.Burst {
		out = append(out, check.ManyInFlight(int64(spec.Concurrency/2)))
	}
	if u := spec.Sustain; u != nil {
		out = append(out, check.SustainedLoad(u.Share*sustainHeld))
	}
	return out
}
