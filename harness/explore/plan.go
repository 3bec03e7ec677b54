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

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/proxies"
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
	// Workload of every run; zero: Steady.
	Workload workload.Spec
	// Settings of every run (the target's knobs, name → value).
	Settings map[string]string
}

// Defaults of the enumeration.
const (
	DefaultHits   = 3
	DefaultCombos = 5000
)

// Timings of the faults, from the target's lease.
const (
	restartAfter = 200 * time.Millisecond // a killed process stays dead this long
	syncDelay    = 300 * time.Millisecond // a process waits at its window while a link fault lands
	plainAfter   = 20                     // orders before a link fault on its own
	syncAfter    = 10                     // orders before a link fault at a window
)

// FaultDeadline is how long an explored fault waits for its window: the
// workload's length and two leases. A window that has not opened by then
// will not open in the run, and waiting longer only costs time.
func FaultDeadline(w workload.Spec, lease time.Duration) time.Duration {
	return max(w.Pace+2*lease, 5*time.Second)
}

// Hold is how long a pause past the lease freezes a process: lease × 2.5.
func Hold(lease time.Duration) time.Duration { return lease * 5 / 2 }

// Item is one run of the plan: its faults, by its place in the enumeration.
type Item struct {
	Index  int           `json:"index"`
	Faults []fault.Fault `json:"-"`
	// Settings are the target's settings the run turns (a window that only
	// opens with one on); NoneFailed: the run's outage is one the target
	// says it rides out, so no row may end Failed.
	Settings   map[string]string `json:"settings,omitempty"`
	NoneFailed bool              `json:"none_failed,omitempty"`
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
type candidate struct {
	faults     []fault.Fault
	settings   map[string]string
	noneFailed bool
	depth      int
	keys       []string // a crash point of one instance, a link, the bindings: one per run
}

// Surface is what a target offers to attack, by role references.
type Surface struct {
	Roles *fault.Roles
	// Instances are the references of every instance ("relay-1",
	// "consumer"), in role then file order.
	Instances []Ref
	// Links are the references of every link a process uses.
	Links []LinkRef
	Lease time.Duration
	// Unroutable: the target's topology names the exchange and queue whose
	// bindings explore can take away.
	Unroutable bool
	// RidesOut is the target's timing.rides_out (0: not said).
	RidesOut time.Duration
	// Settings are, per window, the settings that open it (the target's
	// settings with explore.opens).
	Settings map[string]map[string]string
	// Watched are the tables faultline may watch from outside (the
	// target's observe section): fault.TableFacts, TableOutbox,
	// TableEffects.
	Watched []string
}

// Windows faultline opens from outside, with no crash point.
const (
	// WindowUnroutable: the queue's bindings taken away, so publishes come
	// back (and are retried, or end Failed).
	WindowUnroutable = "queue.unroutable"
)

// blackBoxTable is the watched table each role writes, and the status of
// the write (a claim, for the relays) whose commit opens its black-box
// window.
var blackBoxTable = map[string]struct{ table, status string }{
	protocol.Producer: {fault.TableFacts, ""},
	protocol.Relay:    {fault.TableOutbox, "Processing"},
	protocol.Consumer: {fault.TableEffects, ""},
}

// BlackBoxWindow names the black-box window at the commit of a write by
// the instance (reference "relay-1" or a role) to a watched table:
// blackbox.<role>.<table>[.<status>].
func BlackBoxWindow(instance, table, status string) string {
	role, _ := fault.ParseRef(instance)
	w := "blackbox." + role + "." + table
	if status != "" {
		w += "." + strings.ToLower(status)
	}
	return w
}

// Ref is one instance reference.
type Ref struct {
	Ref    string // "relay-2", or the role alone when it has one instance
	Name   string // the instance's name in a run, e.g. "relay-2", "inventory"
	Role   string
	N      int      // 1-based within its role
	Points []string // the windows it has a crash point at, in protocol order
}

// LinkRef is one link reference.
type LinkRef struct {
	Ref      string // "relay-1.pg"
	Instance Ref
	To       string // pg or amqp
}

// SurfaceOf resolves what a target offers: its instances through
// fault.NewRoles, as the runner does, their crash points and their links
// (a process has a link to PostgreSQL or RabbitMQ when its command or
// environment asks for the URL).
func SurfaceOf(t *target.Target) (Surface, error) {
	var ins []fault.Instance
	procOf := map[string]target.Process{}
	for _, role := range protocol.Roles() {
		for _, p := range t.Processes {
			if p.Role != role {
				continue
			}
			for _, name := range t.Instances(p) {
				ins = append(ins, fault.Instance{Name: name, Role: p.Role, Points: p.CrashPoints, EventLog: p.EventLog})
				procOf[name] = p
			}
		}
	}
	roles := fault.NewRoles(ins)
	s := Surface{Roles: roles, Lease: t.Lease, RidesOut: t.RidesOut, Settings: map[string]map[string]string{},
		Unroutable: t.Topology.Exchange != "" && t.Topology.Queue != ""}
	for _, w := range protocol.Windows() {
		if set := t.ExploreSettings(w.Name); set != nil {
			s.Settings[w.Name] = set
		}
	}
	for table, tt := range map[string]target.Table{fault.TableFacts: t.Observe.Facts, fault.TableOutbox: t.Observe.Outbox, fault.TableEffects: t.Observe.Effects} {
		if tt.Name != "" {
			s.Watched = append(s.Watched, table)
		}
	}
	slices.Sort(s.Watched)
	for _, role := range protocol.Roles() {
		n := roles.Count(role)
		for i := 1; i <= n; i++ {
			ref := fault.Ref(role, i)
			if n == 1 {
				ref = role
			}
			in, err := roles.Instance(ref)
			if err != nil {
				return Surface{}, fmt.Errorf("target %s: %w", t.Name, err)
			}
			r := Ref{Ref: ref, Name: in.Name, Role: role, N: i}
			for _, w := range protocol.Windows() {
				if _, err := roles.Point(ref, w.Name); err == nil {
					r.Points = append(r.Points, w.Name)
				}
			}
			s.Instances = append(s.Instances, r)
			p := procOf[in.Name]
			for _, link := range []struct{ to, placeholder string }{{"pg", "postgres"}, {"amqp", "amqp"}} {
				to := link.to
				if !p.Uses(link.placeholder) {
					continue
				}
				lr := LinkRef{Ref: ref + "." + to, Instance: r, To: to}
				if _, err := roles.Link(lr.Ref); err != nil {
					return Surface{}, fmt.Errorf("target %s: %w", t.Name, err)
				}
				s.Links = append(s.Links, lr)
			}
		}
	}
	return s, nil
}

// singles are every single fault the surface offers, in a fixed order:
// each crash point, each link fault (alone and while a process waits at
// one of its windows), and the queue's bindings taken away.
func (s Surface) singles(hits int) []candidate {
	hold := Hold(s.Lease)
	var out []candidate
	for _, in := range s.Instances {
		for _, w := range in.Points {
			open, ok := s.opener(in, w, "")
			if !ok {
				continue
			}
			for hit := 1; hit <= hits; hit++ {
				key := pointKey(in.Ref, w)
				depth := (hit - 1) + (in.N - 1)
				kill := fault.Crash{Process: in.Ref, Point: w, Action: crashpoint.Kill, Hit: int64(hit), RestartAfter: restartAfter, Trigger: open.trigger}
				pause := fault.Crash{Process: in.Ref, Point: w, Action: crashpoint.Pause, Hit: int64(hit), Hold: hold, Trigger: open.trigger}
				for _, f := range []fault.Fault{kill, pause} {
					out = append(out, open.candidate(f, depth, key))
				}
			}
		}
	}
	for _, l := range s.Links {
		for _, sync := range s.syncs(l) {
			depth := l.Instance.N - 1
			key := "link:" + l.Ref
			trigger := fault.Trigger{AfterOrders: plainAfter}
			open := opening{}
			if sync != nil {
				var ok bool
				if open, ok = s.opener(l.Instance, sync.Point, l.Ref); !ok {
					continue
				}
				depth++
				open.keys = append(open.keys, pointKey(sync.Process, sync.Point))
				trigger = fault.Trigger{AfterOrders: syncAfter}
			}
			for _, f := range s.linkFaults(l, trigger, sync) {
				out = append(out, open.candidate(f, depth, key))
			}
		}
	}
	out = append(out, s.blackBox(hits)...)
	if s.Unroutable {
		long := 3 * s.Lease / 2
		if s.RidesOut > 0 {
			long = 2 * s.RidesOut
		}
		out = append(out, candidate{faults: []fault.Fault{fault.Unbind{Trigger: fault.Trigger{AfterOrders: plainAfter}, Duration: long}}, keys: []string{keyUnbind}})
		if s.RidesOut > 0 {
			// An outage the target says it rides out: no row may end Failed.
			out = append(out, candidate{faults: []fault.Fault{fault.Unbind{Trigger: fault.Trigger{AfterOrders: plainAfter}, Duration: s.RidesOut}},
				noneFailed: true, keys: []string{keyUnbind}})
		}
	}
	return out
}

const keyUnbind = "unbind"

// blackBox are the black-box windows: for each instance whose role writes
// a watched table, at the commit of its 1st..hits-th write there, it is
// killed, frozen past the lease, or its database link is cut for a lease —
// with what holds the window open from outside: a producer's broker link
// down first (a publish after the commit cannot slip out before the
// kill), a relay's confirms slowed a little (the kill lands before it
// marks).
func (s Surface) blackBox(hits int) []candidate {
	var out []candidate
	for _, in := range s.Instances {
		bt, ok := blackBoxTable[in.Role]
		if !ok || !slices.Contains(s.Watched, bt.table) {
			continue
		}
		at := fault.Trigger{AfterOrders: syncAfter}
		after := fault.Trigger{AfterOrders: syncAfter, Delay: 300 * time.Millisecond}
		var open opening
		switch in.Role {
		case protocol.Producer:
			if l := in.Ref + ".amqp"; s.hasLink(l) {
				open.faults = []fault.Fault{fault.LinkDown{Link: l, Trigger: at, Duration: 2 * s.Lease}}
				open.keys = []string{"link:" + l}
			}
		case protocol.Relay:
			if l := in.Ref + ".amqp"; s.hasLink(l) {
				open.faults = []fault.Fault{fault.Toxic{Link: l, Toxic: proxies.Latency{Latency: 150 * time.Millisecond, Stream: proxies.Downstream}, Trigger: at, Duration: 4 * s.Lease}}
				open.keys = []string{"link:" + l}
			}
		}
		key := "commit:" + in.Ref
		for hit := 1; hit <= hits; hit++ {
			depth := (hit - 1) + (in.N - 1)
			c := fault.OnCommit{Process: in.Ref, Table: bt.table, Status: bt.status, Nth: hit, Trigger: after}
			kill, pause := c, c
			kill.Action, kill.RestartAfter = fault.ActKill, restartAfter
			pause.Action, pause.Hold = fault.ActPause, Hold(s.Lease)
			out = append(out, open.candidate(kill, depth, key), open.candidate(pause, depth, key))
			if l := in.Ref + ".pg"; s.hasLink(l) {
				cut := c
				cut.Action, cut.Cut, cut.CutFor = fault.ActNone, []string{l}, s.Lease
				out = append(out, open.candidate(cut, depth, key))
			}
		}
	}
	return out
}

func (s Surface) hasLink(ref string) bool {
	return slices.ContainsFunc(s.Links, func(l LinkRef) bool { return l.Ref == ref })
}

// syncs are the moments a link fault lands: on its own (nil), and while
// the link's process waits at each of its windows.
func (s Surface) syncs(l LinkRef) []*fault.Sync {
	at := []*fault.Sync{nil}
	for _, w := range l.Instance.Points {
		at = append(at, &fault.Sync{Process: l.Instance.Ref, Point: w, Delay: syncDelay})
	}
	return at
}

// opening is what a window needs around it to open at all: faults that go
// with the one at the window, the settings that turn it on, the trigger
// that arms them together, and what they take (keys).
type opening struct {
	faults   []fault.Fault
	settings map[string]string
	trigger  fault.Trigger
	keys     []string
}

func (o opening) candidate(f fault.Fault, depth int, key string) candidate {
	return candidate{faults: append([]fault.Fault{f}, o.faults...), settings: o.settings, depth: depth,
		keys: append([]string{key}, o.keys...)}
}

// opener is what the window w of instance in needs to open, from what the
// protocol says the window is (docs/protocol.md): a retry is written only
// after a publish failed, so relay.before-retry comes with the queue's
// bindings taken away (the publishes come back); a lease is renewed only
// while a batch's confirms take longer than the renewal interval, so
// relay.before-renew comes with the relay's broker answers slowed, and the
// target's settings that open it on. Every other window opens in a steady
// stream. ok is false when the window cannot be opened here: its opener
// needs the link taken (busy) or something the target does not offer.
func (s Surface) opener(in Ref, w, busy string) (o opening, ok bool) {
	o.settings = s.Settings[w]
	switch w {
	case protocol.RelayBeforeRetry:
		if !s.Unroutable {
			return o, true // the window may still open: on a nack, a send failure
		}
		o.trigger = fault.Trigger{AfterOrders: syncAfter}
		// The bindings stay away past the thaw of a pause there, so the rows
		// it held still bounce when its late retry write comes.
		o.faults = []fault.Fault{fault.Unbind{Trigger: o.trigger, Duration: Hold(s.Lease) + s.Lease}}
		o.keys = []string{keyUnbind}
	case protocol.RelayBeforeRenew:
		link := in.Ref + ".amqp"
		if !s.hasLink(link) {
			return o, true
		}
		if busy == link {
			return o, false
		}
		o.trigger = fault.Trigger{AfterOrders: syncAfter}
		slow := fault.Toxic{Link: link, Toxic: proxies.Latency{Latency: (s.Lease * 3 / 4).Round(time.Millisecond), Stream: proxies.Downstream},
			Trigger: o.trigger, Duration: s.Lease * 4}
		o.keys = []string{"link:" + link}
		if slices.Contains(in.Points, protocol.RelayAfterPublish) {
			// The slowing lands while the relay holds a published batch, so
			// it is connected and working: timed by the order count alone,
			// it once slowed a relay's first connection handshake on a
			// loaded machine, and the relay connected after the last order.
			slow.At = &fault.Sync{Process: in.Ref, Point: protocol.RelayAfterPublish, Delay: renewSyncDelay}
			o.keys = append(o.keys, pointKey(in.Ref, protocol.RelayAfterPublish))
		}
		o.faults = []fault.Fault{slow}
	}
	return o, true
}

// pointKey is what a fault at window w of instance ref takes: one run arms
// a crash point of an instance once.
func pointKey(ref, w string) string { return "point:" + ref + "@" + w }

// renewSyncDelay is how long a relay waits at relay.after-publish while the
// renewal window's slowing lands on its broker link.
const renewSyncDelay = 100 * time.Millisecond

// linkFaults are the link's three faults: latency past the lease, a
// timeout (nothing passes, for lease × 2.5), down (for a lease).
func (s Surface) linkFaults(l LinkRef, trigger fault.Trigger, at *fault.Sync) []fault.Fault {
	// On the database link the process's statements are slowed (as in
	// relay-db-slow-past-lease); on the broker link, what the broker sends
	// back: confirms, deliveries.
	stream := proxies.Downstream
	if l.To == "pg" {
		stream = proxies.Upstream
	}
	latency := (s.Lease * 3 / 2).Round(time.Millisecond)
	return []fault.Fault{
		fault.Toxic{Link: l.Ref, Toxic: proxies.Latency{Latency: latency, Stream: stream}, Trigger: trigger, Duration: s.Lease * 3, At: at},
		fault.Toxic{Link: l.Ref, Toxic: proxies.Timeout{}, Trigger: trigger, Duration: s.Lease * 5 / 2, At: at},
		fault.LinkDown{Link: l.Ref, Trigger: trigger, Duration: s.Lease, At: at},
	}
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
	slices.SortStableFunc(singles, func(a, b candidate) int { return a.depth - b.depth })

	items := make([]Item, 0, len(singles)+opts.Combos)
	for _, c := range singles {
		items = append(items, Item{Index: len(items), Faults: slices.Clone(c.faults), Settings: c.settings, NoneFailed: c.noneFailed, Size: 1, Depth: c.depth})
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
			it.Faults = append(it.Faults, singles[i].faults...)
			it.Depth = max(it.Depth, singles[i].depth)
			for k, v := range singles[i].settings {
				if it.Settings == nil {
					it.Settings = map[string]string{}
				}
				it.Settings[k] = v
			}
		}
		items = append(items, it)
		made++
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
		for _, k := range singles[i].keys {
			if taken[k] {
				return nil
			}
		}
		for _, k := range singles[i].keys {
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
