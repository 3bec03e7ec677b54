package check

import (
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
)

// Settling judges convergence from samples of the pipeline's progress,
// taken one after another: it has converged once the outbox is settled,
// the queue drained, the inbox applied (where the contract names what it
// still holds) and the effects unchanged for quiet.
type Settling struct {
	quiet        time.Duration
	last         history.Progress
	lastErr      error
	settledSince time.Time
	// changed is when a sample last differed from the one before it (the
	// first sample counts as a change).
	changed time.Time
	sampled bool
}

// NewSettling judges convergence with a quiet window of quiet.
func NewSettling(quiet time.Duration) *Settling { return &Settling{quiet: quiet} }

// same says whether two samples show the pipeline in the same place.
func same(p history.Progress, q history.Progress) bool {
	return p.Unsettled == q.Unsettled && p.InboxPending == q.InboxPending && p.Effects == q.Effects && p.Effected == q.Effected && p.Ready == q.Ready && p.Unacked == q.Unacked && p.SlotBehind == q.SlotBehind
}

// Stalled says whether the pipeline, not settled, has shown no change at
// all for stall up to now: nothing settled in the outbox, nothing left or
// joined the queue or the inbox, no effect. A pipeline that is only slow
// moves, however slowly; one that stopped (rows claimed and never freed)
// does not. Samples that could not be read do not count as a change.
func (s *Settling) Stalled(now time.Time, stall time.Duration) bool {
	return stall > 0 && s.sampled && !settled(s.last) && now.Sub(s.changed) >= stall
}

// Sample takes one sample read at now (err: it could not be read, which
// breaks the quiet). Once the pipeline has stayed settled for the quiet
// window, it returns when that began, and true.
func (s *Settling) Sample(p history.Progress, err error, now time.Time) (time.Time, bool) {
	switch {
	case err != nil:
		s.lastErr, s.settledSince = err, time.Time{}
	case settled(p) && p.Effects == s.last.Effects:
		if s.settledSince.IsZero() {
			s.settledSince = now
		}
		if now.Sub(s.settledSince) >= s.quiet {
			return s.settledSince, true
		}
	default:
		s.settledSince = time.Time{}
	}
	if err == nil {
		if !s.sampled || !same(p, s.last) {
			s.changed = now
		}
		s.last, s.lastErr, s.sampled = p, nil, true
	}
	return time.Time{}, false
}

// NotConvergedStalled says what had not converged when the wait ended
// because nothing changed for stall.
func (s *Settling) NotConvergedStalled(stall time.Duration) error {
	return fmt.Errorf("not converged: nothing changed for %s: %s", stall, s.last)
}

// NotConverged says what had not converged when the wait ended after
// timeout: the last sample, or why the last one could not be read.
func (s *Settling) NotConverged(timeout time.Duration) error {
	if s.lastErr != nil {
		return fmt.Errorf("not converged after %s: %w", timeout, s.lastErr)
	}
	return fmt.Errorf("not converged after %s: %s", timeout, s.last)
}

// settled reports whether the sample shows the pipeline settled.
func settled(p history.Progress) bool {
	return p.Unsettled == 0 && p.Ready == 0 && p.Unacked == 0 && p.InboxPending == 0 && p.Effected >= p.Expected && p.SlotBehind == 0
}
