package fault

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/proxies"
)

// A window of the protocol is opened at its crash point where the target
// maps one there. Where it does not, some windows can still be opened from
// outside, by what faultline sees of them: the commit of the producer's
// fact or of the consumer's effect (the commit triggers on the watched
// tables), the producer's or the consumer's transaction held at its COMMIT
// (a deferred constraint trigger, then the process killed and its backend
// terminated), the consumer's deliveries held unacked (the broker's
// counters). OpenFromOutside swaps each fault at an unmapped crash point
// for its opener from outside; the fault's result says which opened it.

// Openers from outside, as `faultline list` and results name them.
const (
	OpenedAtCommit   = "the commit of its write (outside)"
	OpenedHeld       = "its transaction held at COMMIT, its backend terminated (outside)"
	OpenedUnacked    = "broker unacked count (outside)"
	OpenedAcksHeld   = "its acks held back, killed at the commit of its effect (outside)"
	OpenedCommitsCut = "its COMMIT held, its database link cut and its backend terminated (outside)"
)

// OutsideOpener says how the window f waits at is opened from outside on a
// target that maps no crash point there ("" and false: it is not).
func OutsideOpener(f Fault) (string, bool) {
	switch f := f.(type) {
	case Crash:
		switch f.Point {
		case protocol.ProducerAfterCommit:
			return OpenedAtCommit, f.Action != crashpoint.Delay
		case protocol.ProducerBeforeCommit, protocol.ConsumerBeforeCommit:
			return OpenedHeld, f.Action == crashpoint.Kill
		case protocol.ConsumerAfterReceive:
			return OpenedUnacked, f.Action != crashpoint.Delay
		case protocol.ConsumerAfterCommit:
			return OpenedAcksHeld, f.Action == crashpoint.Kill
		}
	case LinkDown:
		if f.At != nil && (f.At.Point == protocol.ProducerBeforeCommit || f.At.Point == protocol.ConsumerBeforeCommit) && f.Link == f.At.Process.DB() {
			return OpenedCommitsCut, true
		}
	}
	return "", false
}

// OpenFromOutside is faults with each one at a crash point the target does
// not map replaced by its opener from outside, where there is one; the
// others are as they were (and one at an unmapped point with no opener is
// refused by its Require, so the scenario is not run, saying why).
//
// hasLink reports whether the run will have the link ref ("producer.amqp"):
// an opener that takes a link down while it waits does so only where the
// process uses it.
// The windows it opened from outside are listed in windows.
func OpenFromOutside(env *Env, faults []Fault, hasLink func(ref history.Link) bool) (out []Fault, windows []string) {
	out = make([]Fault, 0, len(faults))
	for _, f := range faults {
		g := openFromOutside(env, f, hasLink)
		if o, ok := g.(interface{ from() outside }); ok {
			windows = append(windows, o.from().Window)
		}
		out = append(out, g)
	}
	return out, windows
}

func openFromOutside(env *Env, f Fault, hasLink func(history.Link) bool) Fault {
	opener, ok := OutsideOpener(f)
	if !ok {
		return f
	}
	switch f := f.(type) {
	case Crash:
		if _, err := env.Point(f.Process, f.Point); err == nil {
			return f
		}
		return crashFromOutside(f, opener, hasLink)
	case LinkDown:
		if _, err := env.Point(f.At.Process, f.At.Point); err == nil {
			return f
		}
		return cutFromOutside(f, opener)
	}
	return f
}

// crashFromOutside is the opener of c's window from outside. The crash
// point counts its hits from the process's start (or its trigger); a
// commit, a held transaction and the deliveries are counted from the
// fault's trigger, so the Hit-th of them is about as far into the run.
func crashFromOutside(c Crash, opener string, hasLink func(history.Link) bool) Fault {
	o := outside{Of: c, Window: c.Point, Opener: opener}
	nth := int(max(c.Hit, 1))
	switch c.Point {
	case protocol.ProducerAfterCommit:
		// As blackbox-producer-killed-at-commit: the producer's broker
		// link, where it has one, is down from the trigger on, so a
		// publish it makes after its commit cannot slip out before the
		// kill at the commit of a fact after it.
		at := c.Trigger
		if at == (Trigger{}) {
			at.AfterOrders = c.Hit
		}
		after := at
		if link := c.Process.Broker(); hasLink(link) {
			after.AfterLink = link
		}
		oc := OnCommit{Process: c.Process, Table: history.TableFacts, Nth: 1, Trigger: after, RestartAfter: c.RestartAfter, Hold: c.Hold, Action: ActKill}
		if c.Action == crashpoint.Pause {
			oc.Action = ActPause
		}
		o.Faults = []Fault{oc}
		if link := c.Process.Broker(); hasLink(link) {
			o.Faults = append(o.Faults, LinkDown{Link: link, Trigger: at, Duration: 4 * time.Second})
		}
		return outsideAtCommit{o}
	case protocol.ProducerBeforeCommit, protocol.ConsumerBeforeCommit:
		table := history.TableFacts
		if c.Point == protocol.ConsumerBeforeCommit {
			table = history.TableEffects
		}
		o.Faults = []Fault{HeldCommit{Process: c.Process, Table: table, Nth: nth, Trigger: c.Trigger, RestartAfter: c.RestartAfter, NoRestart: c.NoRestart}}
		return o
	case protocol.ConsumerAfterReceive:
		trigger := c.Trigger
		if trigger == (Trigger{}) {
			trigger.AfterOrders = c.Hit
		}
		action := ActKill
		if c.Action == crashpoint.Pause {
			action = ActPause
		}
		u := Unacked{Process: c.Process, Trigger: trigger, Action: action, Hold: c.Hold, RestartAfter: c.RestartAfter}
		// Nothing it receives from then on commits, so it holds what it
		// is delivered: a consumer that commits and acks within a
		// millisecond shows the broker no unacked delivery between two
		// statistics samples. A paused one gets its link back when it
		// resumes.
		if link := c.Process.DB(); hasLink(link) {
			u.Cut = link
		}
		o.Faults = []Fault{u}
		return o
	case protocol.ConsumerAfterCommit:
		// As blackbox-consumer-acks-dropped: what the consumer sends the
		// broker (its acks) is held back from the trigger on, and the
		// consumer is killed at the commit of an effect after it:
		// committed, never acked.
		at := c.Trigger
		if at == (Trigger{}) {
			at.AfterOrders = 10 + c.Hit
		}
		after := at
		after.AfterLink = c.Process.Broker()
		o.Faults = []Fault{
			Toxic{Link: c.Process.Broker(), Toxic: proxies.Timeout{Timeout: 0, Stream: proxies.Upstream}, Trigger: at, Duration: 2 * time.Second},
			OnCommit{Process: c.Process, Table: history.TableEffects, Nth: 1, Trigger: after, Action: ActKill, RestartAfter: c.RestartAfter},
		}
		return outsideAtCommit{o}
	}
	return c
}

// cutFromOutside is a cut of a process's database link at its COMMIT
// without a crash point: the process's first write after the trigger to
// the table it commits (the producer's facts, the consumer's effects) is
// held at its COMMIT, the link goes down for l's duration and the backend
// is terminated, so the COMMIT the process sent meets a dead connection
// and its outcome is unknown to it (it aborted).
func cutFromOutside(l LinkDown, opener string) Fault {
	o := outside{Of: l, Window: l.At.Point, Opener: opener}
	table := history.TableEffects
	if l.At.Point == protocol.ProducerBeforeCommit {
		table = history.TableFacts
	}
	o.Faults = []Fault{HeldCommit{Process: l.At.Process, Table: table, Nth: 1, Trigger: l.Trigger, Cut: l.Link, CutFor: l.Duration}}
	return o
}

// outside is the fault Of (at an unmapped crash point) as its opener from
// outside: Faults, injected together.
type outside struct {
	Of     Fault
	Window string // the window Of waits at
	Opener string
	Faults []Fault
}

func (o outside) from() outside { return o }

// outsideAtCommit is an outside opener timed by the commits faultline
// watches.
type outsideAtCommit struct{ outside }

// Observes implements Observer: the commit it acts at.
func (outsideAtCommit) Observes() []history.Source { return []history.Source{history.SourceCommits} }

// Describe implements Fault: the fault it stands for, opened from outside.
func (o outside) Describe() result.Fault {
	d := o.Of.Describe()
	d.Detail += "; no crash point there: opened from outside by " + o.Opener
	return d
}

// Require implements Requirer: what each of its faults requires.
func (o outside) Require(env *Env) error {
	var errs []error
	for _, f := range o.Faults {
		if r, ok := f.(Requirer); ok {
			errs = append(errs, r.Require(env))
		}
	}
	return errors.Join(errs...)
}

// Needs implements Needs.
func (o outside) Needs() []string {
	var out []string
	for _, f := range o.Faults {
		if n, ok := f.(Needs); ok {
			out = append(out, n.Needs()...)
		}
	}
	return out
}

// Inject implements Fault: its faults side by side, one result: it
// happened when every one of them did.
func (o outside) Inject(ctx context.Context, env *Env) result.Fault {
	results := make([]result.Fault, len(o.Faults))
	var wg sync.WaitGroup
	for i, f := range o.Faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = f.Inject(ctx, env)
		}()
	}
	wg.Wait()
	r := o.Describe()
	r.Hit = true
	var details, errs, undo []string
	for i, fr := range results {
		if i == 0 || fr.Start.Before(r.Start) {
			r.Start = fr.Start
		}
		if fr.End.After(r.End) {
			r.End = fr.End
		}
		r.Hit = r.Hit && fr.Hit
		details = append(details, fr.Kind+" "+fr.Target+": "+fr.Detail)
		if fr.Error != "" {
			errs = append(errs, fr.Error)
		}
		if fr.UndoError != "" {
			undo = append(undo, fr.UndoError)
		}
		r.EventIDs = append(r.EventIDs, fr.EventIDs...)
	}
	slices.Sort(r.EventIDs)
	r.EventIDs = slices.Compact(r.EventIDs)
	r.Detail += " — " + strings.Join(details, " | ")
	r.Error = strings.Join(errs, "; ")
	r.UndoError = strings.Join(undo, "; ")
	return r
}
