package explore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/workload"
)

// Candidate is one smaller schedule the shrinker tries, and what changed.
type Candidate struct {
	Change   string
	Schedule Schedule
}

// minOrders is the fewest orders the shrinker goes down to.
const minOrders = 10

// Candidates are the schedules one step smaller than s, the biggest
// reductions first: each fault dropped (while more than one is left),
// fewer orders (half, three quarters, at the same rate, and at least
// minOrders after the last fault's trigger), then per fault
// its hit earlier (1, half, one less), its trigger earlier (half the
// orders, no delay), and its holds and toxics shorter (half, three
// quarters: pause hold, restart delay, toxic or outage duration, latency,
// jitter, broker downtime, poison count; a black-box window's commit
// earlier, its hold, cut and toxic shorter).
func Candidates(s Schedule) []Candidate {
	var out []Candidate
	add := func(change string, c Schedule) { out = append(out, Candidate{Change: change, Schedule: c}) }
	n := len(s.Faults)
	if n > 1 {
		for i, f := range s.Faults {
			c := s.with()
			c.Faults = slices.Delete(c.Faults, i, i+1)
			add(fmt.Sprintf("drop fault %d (%s)", i+1, Describe(f)), c)
		}
	}
	if s.Workload.ProfileName() != workload.Paced {
		// The trickle first: a failure it still shows needs no load.
		c := s.with()
		c.Workload = workload.Steady()
		if int64(c.Workload.Orders) >= lastTrigger(s.Faults)+minOrders {
			add(fmt.Sprintf("traffic %s → %s", s.Workload.ProfileName(), workload.Paced), c)
		}
	}
	last := lastTrigger(s.Faults)
	for _, orders := range fault.Fewer(s.Workload.Orders, minOrders) {
		if int64(orders) < last+minOrders {
			// A fault would wait for orders that never come, or land on
			// the workload's last few: a schedule shrunk to 11 orders with
			// a trigger at 10 left a relay nothing to hold when its window
			// came, and failed only sometimes when replayed.
			continue
		}
		c := s.with()
		c.Workload.Orders = orders
		c.Workload.Pace = (s.Workload.Pace * time.Duration(orders) / time.Duration(s.Workload.Orders)).Round(time.Millisecond)
		if h := s.Workload.Hold; h != nil {
			// The backlog shrinks with the orders, in proportion: it is
			// still most of them, and never more.
			c.Workload.Hold = &workload.Hold{Role: h.Role, Backlog: max(1, h.Backlog*orders/s.Workload.Orders)}
		}
		add(fmt.Sprintf("orders %d → %d", s.Workload.Orders, orders), c)
	}
	for i, f := range s.Faults {
		for _, m := range mutations(f) {
			c := s.with()
			c.Faults[i] = m.f
			add(fmt.Sprintf("fault %d: %s", i+1, m.change), c)
		}
	}
	return out
}

// with is a copy of s whose fault list may be changed.
func (s Schedule) with() Schedule {
	s.Faults = slices.Clone(s.Faults)
	return s
}

type mutation struct {
	change string
	f      fault.Fault
}

// mutations are the fault made smaller in one way each, as its kind
// shrinks it.
func mutations(f fault.Fault) []mutation {
	k, ok := fault.KindOf(f)
	if !ok {
		return nil
	}
	var out []mutation
	for _, sm := range k.Shrink(f) {
		out = append(out, mutation{sm.Change, sm.Fault})
	}
	return out
}

// lastTrigger is the most orders any fault waits for (read from its data,
// which holds every kind's trigger).
func lastTrigger(faults []fault.Fault) int64 {
	var n int64
	for _, spec := range mustSpecs(faults) {
		n = max(n, spec.trigger().AfterOrders)
	}
	return n
}

// Fails decides whether a schedule still fails the same way. A real
// decision runs the schedule (twice where a result can vary); a test's is
// a pure function.
type Fails func(ctx context.Context, s Schedule) bool

// ShrinkOptions bound and report a shrink.
type ShrinkOptions struct {
	// Batch is how many candidates are tried at once (at least 1). The
	// first of a batch, in candidate order, that fails is taken.
	Batch int
	// Deadline: no batch starts after it (zero: none).
	Deadline time.Time
	Now      func() time.Time
	// Tried is told each candidate tried, whether it failed, and whether it
	// was taken (the first failing one of its batch); may be nil.
	Tried func(c Candidate, failed, taken bool)
}

// Step is one reduction the shrinker kept.
type Step struct {
	Change string `json:"change"`
	Faults int    `json:"faults"` // after the change
	Orders int    `json:"orders"`
	// Schedule is the schedule after the change, so a minimal schedule
	// that does not hold up can fall back a step.
	Schedule Schedule `json:"-"`
}

// Shrunk is what a shrink ended with.
type Shrunk struct {
	Minimal Schedule
	Steps   []Step
	Tried   int // candidates tried
	// Complete: no smaller candidate fails (rather than the budget or the
	// context ending the shrink).
	Complete bool
}

// Shrink reduces a failing schedule greedily: it tries the candidates one
// step smaller, keeps the first that still fails, and starts again from
// it, until no candidate fails or the deadline passes. A schedule is never
// tried twice.
func Shrink(ctx context.Context, s Schedule, fails Fails, opts ShrinkOptions) Shrunk {
	if opts.Batch < 1 {
		opts.Batch = 1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	out := Shrunk{Minimal: s}
	tried := map[string]bool{s.key(): true}
	for {
		var cands []Candidate
		round := map[string]bool{}
		for _, c := range Candidates(out.Minimal) {
			if k := c.Schedule.key(); !tried[k] && !round[k] {
				round[k] = true
				cands = append(cands, c)
			}
		}
		accepted := -1
		for start := 0; start < len(cands) && accepted < 0; start += opts.Batch {
			if ctx.Err() != nil || (!opts.Deadline.IsZero() && !opts.Now().Before(opts.Deadline)) {
				return out
			}
			batch := cands[start:min(start+opts.Batch, len(cands))]
			failed := make([]bool, len(batch))
			var wg sync.WaitGroup
			for i, c := range batch {
				wg.Go(func() { failed[i] = fails(ctx, c.Schedule) })
			}
			wg.Wait()
			for i, c := range batch {
				tried[c.Schedule.key()] = true
				out.Tried++
				taken := failed[i] && accepted < 0
				if taken {
					accepted = start + i
				}
				if opts.Tried != nil {
					opts.Tried(c, failed[i], taken)
				}
			}
		}
		if accepted < 0 {
			out.Complete = ctx.Err() == nil
			return out
		}
		c := cands[accepted]
		out.Minimal = c.Schedule
		out.Steps = append(out.Steps, Step{Change: c.Change, Faults: len(c.Schedule.Faults), Orders: c.Schedule.Workload.Orders, Schedule: c.Schedule})
	}
}
