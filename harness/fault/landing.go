package fault

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
)

// Landings tells the faults of one run when a fault on a link has landed,
// so that a fault which must act after another (a kill at a commit once
// the link the process would publish on is down) waits for that landing,
// not for a head start of a few milliseconds.
type Landings struct {
	mu    sync.Mutex
	links map[string]*landing
}

type landing struct {
	done chan struct{}
	err  error     // set before done is closed
	at   time.Time // when it landed (landAt), set likewise
}

// NewLandings is an empty record of landings, one per run.
func NewLandings() *Landings { return &Landings{links: map[string]*landing{}} }

func (l *Landings) of(link string) *landing {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.links[link]
	if !ok {
		g = &landing{done: make(chan struct{})}
		l.links[link] = g
	}
	return g
}

// land records that a fault on link landed (err nil) or ended without
// landing (err says why); only the first call for a link counts. Nil
// Landings record nothing.
func (l *Landings) land(link string, err error) { l.landAt(link, time.Now(), err) }

// landAt is land, saying when the fault landed.
func (l *Landings) landAt(link string, at time.Time, err error) {
	if l == nil {
		return
	}
	g := l.of(link)
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-g.done:
		return
	default:
	}
	g.err, g.at = err, at
	close(g.done)
}

// wait blocks until a fault on link has landed, and returns the error of
// one that ended without landing.
func (l *Landings) wait(ctx context.Context, link string) error {
	_, err := l.waitAt(ctx, link)
	return err
}

// waitAt is wait, and says when the fault landed.
func (l *Landings) waitAt(ctx context.Context, link string) (time.Time, error) {
	if l == nil {
		return time.Time{}, fmt.Errorf("waits for a fault on %s, and this run records no landings", link)
	}
	g := l.of(link)
	select {
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("no fault landed on %s: %w", link, ctx.Err())
	case <-g.done:
		return g.at, g.err
	}
}

// ActedKey is the key on a run's Landings under which a fault triggered
// over the backlog with PastRelease says it has acted: the held role is
// released then (ReleaseAfter).
const ActedKey = "over-backlog:acted"

// ReleaseAfter is what the release of a held role waits for of fault f,
// whose injection closes done when it ends: that end, or, for a trigger
// that goes past the release, its acting (or its end, if it never acted).
func ReleaseAfter(f Fault, done <-chan struct{}, l *Landings) <-chan struct{} {
	k, ok := KindOf(f)
	if !ok || !k.Trigger(f).PastRelease || l == nil {
		return done
	}
	acted := l.of(ActedKey).done
	out := make(chan struct{})
	go func() {
		defer close(out)
		select {
		case <-acted:
		case <-done:
		}
	}()
	return out
}

// actor is a fault that lands ActedKey once it has acted, for a trigger's
// PastRelease.
type actor interface{ landsActed() }

func (Unbind) landsActed() {}

// notLanded is what a link fault that ended before it acted leaves its
// followers.
func notLanded(link history.Link) error {
	return fmt.Errorf("the fault on %s ended before it landed", link)
}

// lander is a fault that lands on a link (a toxic, a cut), for a trigger's
// AfterLink to wait for.
type lander interface{ landsOn() history.Link }

func (t Toxic) landsOn() history.Link    { return t.Link }
func (l LinkDown) landsOn() history.Link { return l.Link }

// CheckOrder refuses a schedule in which a fault waits for a landing on a
// link (its trigger's AfterLink) that no toxic or cut of the same schedule
// lands on, or for the thaw of a process (Unbind.UntilThawed) that no
// crash of it freezes until a takeover: it would wait until the fault
// deadline.
func CheckOrder(faults []Fault) error {
	landed := map[history.Link]bool{}
	thawed := map[history.Ref]bool{}
	for _, f := range faults {
		if l, ok := f.(lander); ok {
			landed[l.landsOn()] = true
		}
		if c, ok := f.(Crash); ok && c.Action == crashpoint.Pause && c.UntilTakeover {
			thawed[c.Process] = true
		}
	}
	var errs []error
	pastRelease := false
	for i, f := range faults {
		k, ok := KindOf(f)
		if !ok {
			continue
		}
		if link := k.Trigger(f).AfterLink; link != "" && !landed[link] {
			errs = append(errs, fmt.Errorf("fault %d (%s): after_link %q: no toxic or link-down of this schedule lands on that link", i+1, k.Name(), link))
		}
		if t := k.Trigger(f); t.PastRelease {
			_, acts := f.(actor)
			switch {
			case !t.OverBacklog:
				errs = append(errs, fmt.Errorf("fault %d (%s): past_release: only a fault triggered over_backlog holds a role's release", i+1, k.Name()))
			case !acts:
				errs = append(errs, fmt.Errorf("fault %d (%s): past_release: this kind never says it has acted, so the role would wait for its end", i+1, k.Name()))
			case pastRelease:
				errs = append(errs, fmt.Errorf("fault %d (%s): past_release: one fault per schedule releases the held role once it acted", i+1, k.Name()))
			}
			pastRelease = true
		}
		if u, ok := f.(Unbind); ok && u.UntilThawed != "" && !thawed[u.UntilThawed] {
			errs = append(errs, fmt.Errorf("fault %d (%s): until_thawed %q: no crash of this schedule freezes that process until a takeover", i+1, k.Name(), u.UntilThawed))
		}
	}
	return errors.Join(errs...)
}
