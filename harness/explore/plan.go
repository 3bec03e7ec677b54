// Package explore finds the bugs nobody wrote a scenario for: it
// enumerates every fault a target offers (each crash point it honours ×
// hit 1..k × kill or pause past the lease × each instance; each link ×
// latency past the lease, timeout, down, alone or while its process waits
// at one of its windows; each black-box window at an instance's commits;
// the queue's bindings taken away), each with what its window needs
// around it to open at all (a retry window with the bindings gone, a
// renewal window with slow confirms and the target's setting that turns
// renewal on), runs them one at a time and then in random
// combinations of two and three on the shared infrastructure until a
// budget runs out, counts per window how many runs opened it, and shrinks
// each failing schedule to a minimal one that still fails the same way,
// written as a schedule file that `faultline run --schedule` replays.
//
// The enumeration is a pure function of the target and a seed, so the
// same seed gives the same ordered list of runs, and a shard (i of n) is
// every n-th run of it: shards partition the list, and their explore.json
// files merge into one report.
package explore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
)

// Options of the enumeration.
type Options struct {
	Seed int64
	// Hits is k: each crash point is armed at hit 1..k (default 3).
	Hits int
	// Combos bounds the random combinations of two and three faults that
	// follow the single faults (default 5000; in practice the budget ends
	// the exploration long before).
	Combos int
	// Profiles are the traffic profiles the runs are drawn from, one per
	// item, by the seed (Item.Profile); fewer than two: every run sends
	// the exploration's own traffic. The draw comes after the faults', so
	// the faults of the plan are the same with and without it.
	Profiles []string
}

// Defaults of the enumeration.
const (
	DefaultHits   = 3
	DefaultCombos = 5000
)

// FaultDeadline is how long an explored fault waits for its window: the
// workload's length (its pace, or the time a sustained load is held) and
// two leases. A window that has not opened by then
// will not open in the run, and waiting longer only costs time.
func FaultDeadline(w workload.Spec, lease time.Duration) time.Duration {
	long := w.Pace
	if w.Sustain != nil {
		long = max(long, w.Sustain.For)
	}
	return max(long+2*lease, 5*time.Second)
}

// Hold is how long a pause past the lease freezes a process: lease × 2.5.
func Hold(lease time.Duration) time.Duration { return fault.Hold(lease) }

// Item is one run of the plan: its faults, by its place in the enumeration.
type Item struct {
	Index  int           `json:"index"`
	Faults []fault.Fault `json:"-"`
	// Profile is the traffic profile the run sends (workload.ProfileNamed),
	// "" for the exploration's own.
	Profile string `json:"profile,omitempty"`
	// Settings are the target's settings the run turns (a window that only
	// opens with one on); Invariants: the optional invariants it is judged
	// by too (none-gave-up: the run's outage is one the target
	// says it rides out, so no row may end Failed.
	Settings   map[string]string `json:"settings,omitempty"`
	Invariants []string          `json:"invariants,omitempty"`
	// Size is the number of windows attacked (1: a single fault, with what
	// its window needs to open); Depth orders the single faults (higher: a
	// later hit, a later instance, a link fault at a window).
	Size  int `json:"size"`
	Depth int `json:"depth"`
}

// Name is the run's name: explore-<index>.
func (it Item) Name() string { return fmt.Sprintf("explore-%04d", it.Index) }

// Describe is the run's faults in one line.
func (it Item) Describe() string {
	parts := make([]string, len(it.Faults))
	for i, f := range it.Faults {
		parts[i] = Describe(f)
	}
	return strings.Join(parts, " + ")
}

// candidate is one single fault — with what its window needs around it to
// open at all — and what makes two of them collide.
type candidate = fault.Candidate

// Surface is what a target offers to attack, by role references.
type Surface struct{ fault.Surface }

// Ref is one instance reference.
type Ref = fault.SurfaceInstance

// LinkRef is one link reference.
type LinkRef = fault.SurfaceLink

// Windows faultline opens from outside, with no crash point.
const (
	WindowUnroutable  = protocol.QueueUnroutable
	WindowCommitOrder = protocol.OutboxCommitOrder
)

// BlackBoxWindow names the black-box window at the commit of a write by
// the instance (reference "relay-1" or a role) to a watched table:
// blackbox.<role>.<table>[.<status>].
func BlackBoxWindow(instance, table, status string) string {
	return fault.BlackBoxWindow(history.Ref(instance), table, status)
}

// SurfaceOf resolves what a target offers (fault.SurfaceOf).
func SurfaceOf(t *target.Target) (Surface, error) {
	s, err := fault.SurfaceOf(t)
	return Surface{s}, err
}

// singles are every single fault the surface offers: each kind's of
// fault.Kinds, in the table's order.
func (s Surface) singles(hits int) []candidate {
	var out []candidate
	for _, k := range fault.Kinds() {
		out = append(out, k.Enumerate(&s.Surface, hits)...)
	}
	return out
}

// Enumerate is the plan for a target: every single fault it offers, the
// shallowest first (hit 1 of the first instance before later hits and
// instances) and in a seeded order within a depth, then random
// combinations of two and three single faults that do not collide (not
// two arms of one crash point, not two faults on one link), two pairs to a
// triple. The same target, options and seed give the same list.
func Enumerate(t *target.Target, opts Options) ([]Item, error) {
	s, err := SurfaceOf(t)
	if err != nil {
		return nil, err
	}
	return s.Enumerate(opts)
}

// Enumerate is the plan over the surface; see the function Enumerate.
func (s Surface) Enumerate(opts Options) ([]Item, error) {
	if opts.Hits <= 0 {
		opts.Hits = DefaultHits
	}
	if opts.Combos < 0 {
		opts.Combos = 0
	} else if opts.Combos == 0 {
		opts.Combos = DefaultCombos
	}
	singles := s.singles(opts.Hits)
	if len(singles) == 0 {
		return nil, fmt.Errorf("the target offers nothing to explore: no crash point, and no process with a database or broker URL")
	}
	seed := uint64(opts.Seed)
	rng := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1))
	rng.Shuffle(len(singles), func(i, j int) { singles[i], singles[j] = singles[j], singles[i] })
	slices.SortStableFunc(singles, func(a, b candidate) int { return a.Depth - b.Depth })

	items := make([]Item, 0, len(singles)+opts.Combos)
	for _, c := range singles {
		items = append(items, Item{Index: len(items), Faults: slices.Clone(c.Faults), Settings: c.Settings, Invariants: judgedBy(c), Size: 1, Depth: c.Depth})
	}
	seen := map[string]bool{}
	for made, attempts := 0, 0; made < opts.Combos && attempts < 20*opts.Combos; attempts++ {
		size := 2
		if made%3 == 2 {
			size = 3
		}
		if size > len(singles) {
			break
		}
		picked := pick(rng, singles, size)
		if picked == nil {
			continue
		}
		key := fmt.Sprint(picked)
		if seen[key] {
			continue
		}
		seen[key] = true
		it := Item{Index: len(items), Size: size}
		for _, i := range picked {
			it.Faults = append(it.Faults, singles[i].Faults...)
			it.Depth = max(it.Depth, singles[i].Depth)
			for k, v := range singles[i].Settings {
				if it.Settings == nil {
					it.Settings = map[string]string{}
				}
				it.Settings[k] = v
			}
		}
		items = append(items, it)
		made++
	}
	if len(opts.Profiles) > 1 {
		for _, name := range opts.Profiles {
			if _, ok := workload.ProfileNamed(name); !ok {
				return nil, fmt.Errorf("no traffic profile %q", name)
			}
		}
		draw := rand.New(rand.NewPCG(seed^0x70726f66696c6573, seed+2))
		for i := range items {
			items[i].Profile = opts.Profiles[draw.IntN(len(opts.Profiles))]
		}
	}
	return items, nil
}

// pick draws size distinct singles that do not collide, as sorted
// indices; nil if the draw collided.
func pick(rng *rand.Rand, singles []candidate, size int) []int {
	taken := map[string]bool{}
	var out []int
	for len(out) < size {
		i := rng.IntN(len(singles))
		if slices.Contains(out, i) {
			return nil
		}
		for _, k := range singles[i].Keys {
			if taken[k] {
				return nil
			}
		}
		for _, k := range singles[i].Keys {
			taken[k] = true
		}
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// Shard is the i-th (1-based) of n disjoint slices of a plan: every run
// whose index is i-1 modulo n. The zero Shard is the whole plan.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// ParseShard reads "i/n" with 1 ≤ i ≤ n.
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("--shard %q: want i/n, e.g. 1/2", s)
	}
	if n < 1 || i < 1 || i > n {
		return Shard{}, fmt.Errorf("--shard %q: want 1 ≤ i ≤ n", s)
	}
	return Shard{Index: i, Count: n}, nil
}

// All reports whether the shard is the whole plan.
func (s Shard) All() bool { return s.Count <= 1 }

func (s Shard) String() string {
	if s.All() {
		return "all"
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Of is the shard's slice of the plan, in plan order.
func (s Shard) Of(items []Item) []Item {
	if s.All() {
		return items
	}
	var out []Item
	for _, it := range items {
		if it.Index%s.Count == s.Index-1 {
			out = append(out, it)
		}
	}
	return out
}

// judgedBy are the optional invariants a candidate's run is judged by.
func judgedBy(c fault.Candidate) []string {
	if c.RidesOut {
		return []string{check.NoneGaveUp}
	}
	return nil
}
