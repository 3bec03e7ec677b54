package check

import (
	"fmt"
	"time"
)

// Progress is what convergence is judged by: one sample of the pipeline.
type Progress struct {
	// Unsettled are the outbox events the relay has not settled: rows
	// Pending or Processing where the outbox query has a status, and the
	// pending query's events (0 with neither).
	Unsettled int
	// InboxPending are the events the consumer has taken in and not
	// applied yet (the contract's inbox_pending query; 0 without it).
	InboxPending int
	// Expected is how many effects the events the workload was answered
	// for call for (one each), where the target shows no backlog of its
	// relay (no status in its outbox, no pending query): with nothing else
	// to tell a relay still catching up from one done, the pipeline is not
	// settled with fewer events that have an effect (Effected: one event
	// with two effects is still one). 0 where the backlog is shown.
	Expected int
	Effects  int // effect rows
	Effected int // distinct events among the effect rows
	// SlotBehind are the committed outbox rows a log relay's slot has not
	// confirmed past (its relay has not told the server it is done with
	// them): 0 for other relays, and where the slot or the audit trail is
	// not there to read.
	SlotBehind int
	Ready      int
	Unacked    int
	Queue      string // the target's queue, which Ready and Unacked count
}

func (p Progress) settled() bool {
	return p.Unsettled == 0 && p.Ready == 0 && p.Unacked == 0 && p.InboxPending == 0 && p.Effected >= p.Expected && p.SlotBehind == 0
}

func (p Progress) String() string {
	inbox := ""
	if p.InboxPending > 0 {
		inbox = fmt.Sprintf(", %d events in the inbox not applied", p.InboxPending)
	}
	if p.SlotBehind > 0 {
		inbox += fmt.Sprintf(", %d outbox rows not yet confirmed past by the relay's slot", p.SlotBehind)
	}
	expected := ""
	if p.Expected > 0 {
		expected = fmt.Sprintf(" (%d events) of the %d the answered events call for", p.Effected, p.Expected)
	}
	return fmt.Sprintf("%d outbox events unsettled, %d messages ready and %d unacked in %s%s, %d effects%s",
		p.Unsettled, p.Ready, p.Unacked, p.Queue, inbox, p.Effects, expected)
}

// Settling judges convergence from samples of the pipeline's progress,
// taken one after another: it has converged once the outbox is settled,
// the queue drained, the inbox applied (where the contract names what it
// still holds) and the effects unchanged for quiet.
type Settling struct {
	quiet        time.Duration
	last         Progress
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
func (p Progress) same(q Progress) bool {
	return p.Unsettled == q.Unsettled && p.InboxPending == q.InboxPending && p.Effects == q.Effects && p.Effected == q.Effected && p.Ready == q.Ready && p.Unacked == q.Unacked && p.SlotBehind == q.SlotBehind
}

// Stalled says whether the pipeline, not settled, has shown no change at
// all for stall up to now: nothing settled in the outbox, nothing left or
// joined the queue or the inbox, no effect. A pipeline that is only slow
// moves, however slowly; one that stopped (rows claimed and never freed)
// does not. Samples that could not be read do not count as a change.
func (s *Settling) Stalled(now time.Time, stall time.Duration) bool {
	return stall > 0 && s.sampled && !s.last.settled() && now.Sub(s.changed) >= stall
}

// Sample takes one sample read at now (err: it could not be read, which
// breaks the quiet). Once the pipeline has stayed settled for the quiet
// window, it returns when that began, and true.
func (s *Settling) Sample(p Progress, err error, now time.Time) (time.Time, bool) {
	switch {
	case err != nil:
		s.lastErr, s.settledSince = err, time.Time{}
	case p.settled() && p.Effects == s.last.Effects:
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
		if !s.sampled || !p.same(s.last) {
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
