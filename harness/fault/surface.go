package fault

import (
	"fmt"
	"slices"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/proxies"
)

// Surface is what a target offers to attack, by role references: what
// each kind's Enumerate and Offered read.
type Surface struct {
	Roles *Roles
	// Instances are every instance ("relay-1", "consumer"), in role then
	// file order.
	Instances []SurfaceInstance
	// Links are every link a process uses.
	Links []SurfaceLink
	Lease time.Duration
	// Cluster: the runs can go to a clustered broker, so the cluster
	// faults are explored.
	Cluster bool
	// Standby: the target has a database a failover can take from it.
	Standby bool
	// Unroutable: the target's topology names the exchange and queue whose
	// bindings explore can take away.
	Unroutable bool
	// RidesOut is the target's timing.rides_out (0: not said).
	RidesOut time.Duration
	// Settings are, per window, the settings that open it (the target's
	// settings with explore.opens).
	Settings map[string]map[string]string
	// Watched are the tables faultline may watch from outside (the
	// target's observe section): history.TableFacts, TableOutbox, TableEffects.
	Watched []string
	// Processes are the target file's process names, by role.
	Processes map[string][]string
	// relayMark is the watched write that opens a relay's black-box window
	// on this target's relay model (none: ok false).
	relayMark relayMark
}

// SurfaceInstance is one instance reference.
type SurfaceInstance struct {
	Ref    history.Ref // "relay-2", or the role alone when it has one instance
	Name   string      // the instance's name in a run, e.g. "relay-2", "inventory"
	Role   string
	N      int      // 1-based within its role
	Points []string // the windows it has a crash point at, in protocol order
}

// SurfaceLink is one link reference.
type SurfaceLink struct {
	Ref      history.Link // "relay-1.pg"
	Instance SurfaceInstance
	To       string // pg or amqp
}

// SurfaceOf resolves what a target offers: its instances through
// NewRoles, as the runner does, their crash points and their links (a
// process has a link to PostgreSQL or RabbitMQ when its command or
// environment asks for the URL).
func SurfaceOf(t *target.Target) (Surface, error) {
	var ins []Instance
	procOf := map[string]target.Process{}
	for _, role := range protocol.Roles() {
		for _, p := range t.Processes {
			if p.Role != role {
				continue
			}
			for _, name := range t.Instances(p) {
				ins = append(ins, Instance{Name: name, Role: p.Role, Points: p.CrashPoints, EventLog: p.EventLog})
				procOf[name] = p
			}
		}
	}
	roles := NewRoles(ins)
	s := Surface{Roles: roles, Lease: t.Lease, RidesOut: t.RidesOut, Settings: map[string]map[string]string{},
		Unroutable: t.Topology.Exchange != "" && t.Topology.Queue != "", Processes: map[string][]string{},
		// The cluster faults are explored where the target can be handed
		// several nodes; a provider that starts no cluster leaves them not
		// run, saying so.
		Cluster: t.TakesBrokerNodes() == "" && t.Topology.Queue != "",
		Standby: len(t.Databases) > 0}
	for _, p := range t.Processes {
		s.Processes[p.Role] = append(s.Processes[p.Role], p.Name)
	}
	for _, w := range protocol.Windows() {
		if set := t.ExploreSettings(w.Name); set != nil {
			s.Settings[w.Name] = set
		}
	}
	for table, tt := range map[string]target.Table{history.TableFacts: t.Observe.Facts, history.TableOutbox: t.Observe.Outbox, history.TableEffects: t.Observe.Effects} {
		if tt.Name != "" {
			s.Watched = append(s.Watched, table)
		}
	}
	s.relayMark = relayMarkOf(t)
	if s.relayMark.table == history.TablePosition {
		s.Watched = append(s.Watched, history.TablePosition)
	}
	slices.Sort(s.Watched)
	for _, role := range protocol.Roles() {
		n := roles.Count(role)
		for i := 1; i <= n; i++ {
			ref := history.RefOf(role, i)
			if n == 1 {
				ref = history.Ref(role)
			}
			in, err := roles.Instance(ref)
			if err != nil {
				return Surface{}, fmt.Errorf("target %s: %w", t.Name, err)
			}
			r := SurfaceInstance{Ref: ref, Name: in.Name, Role: role, N: i}
			for _, w := range protocol.Windows() {
				if _, err := roles.Point(ref, w.Name); err == nil {
					r.Points = append(r.Points, w.Name)
				}
			}
			s.Instances = append(s.Instances, r)
			p := procOf[in.Name]
			for _, to := range []string{history.ToDB, history.ToBroker} {
				if !p.UsesLink(to) {
					continue
				}
				lr := SurfaceLink{Ref: history.Link(string(ref) + "." + to), Instance: r, To: to}
				if _, err := roles.Link(lr.Ref); err != nil {
					return Surface{}, fmt.Errorf("target %s: %w", t.Name, err)
				}
				s.Links = append(s.Links, lr)
			}
		}
	}
	return s, nil
}

// Timings of explored faults, from the target's lease.
const (
	RestartAfter = 200 * time.Millisecond // a killed process stays dead this long
	PlainAfter   = 20                     // orders before a fault on its own
	SyncAfter    = 10                     // orders before a fault at a window
)

// Hold is how long a pause past the lease freezes a process: lease × 2.5.
func Hold(lease time.Duration) time.Duration { return lease * 5 / 2 }

// Keys of what a candidate takes, one per run.
const (
	KeyUnbind = "unbind"
)

// PointKey is what a fault at window w of instance ref takes: one run arms
// a crash point of an instance once.
func PointKey(ref history.Ref, w string) string { return "point:" + string(ref) + "@" + w }

// LinkKey is what a fault on the link ref takes: one fault a link a run.
func LinkKey(ref history.Link) string { return "link:" + string(ref) }

// Watches reports whether faultline watches the table.
func (s *Surface) Watches(table string) bool { return slices.Contains(s.Watched, table) }

// HasLink reports whether some process uses the link ref.
func (s *Surface) HasLink(ref history.Link) bool {
	return slices.ContainsFunc(s.Links, func(l SurfaceLink) bool { return l.Ref == ref })
}

// Opening is what a window needs around it to open at all: faults that go
// with the one at the window, the settings that turn it on, the trigger
// that arms them together, and what they take (keys).
type Opening struct {
	Faults   []Fault
	Settings map[string]string
	Trigger  Trigger
	Keys     []string
}

// Candidate is f with what its window needs, taking key.
func (o Opening) Candidate(f Fault, depth int, key string) Candidate {
	return Candidate{Faults: append([]Fault{f}, o.Faults...), Settings: o.Settings, Depth: depth,
		Keys: append([]string{key}, o.Keys...)}
}

// Opener is what the window w of instance in needs to open, from what the
// protocol says the window is (docs/protocol.md): a retry is written only
// after a publish failed, so relay.before-retry comes with the queue's
// bindings taken away (the publishes come back); a lease is renewed only
// while a batch's confirms take longer than the renewal interval, so
// relay.before-renew comes with the relay's broker answers slowed, and the
// target's settings that open it on. Every other window opens in a steady
// stream. ok is false when the window cannot be opened here: its opener
// needs the link taken (busy) or something the target does not offer.
func (s *Surface) Opener(in SurfaceInstance, w string, busy history.Link) (o Opening, ok bool) {
	o.Settings = s.Settings[w]
	switch w {
	case protocol.RelayBeforeRetry:
		if !s.Unroutable {
			return o, true // the window may still open: on a nack, a send failure
		}
		o.Trigger = Trigger{AfterOrders: SyncAfter}
		// The bindings stay away past the thaw of a pause there, so the rows
		// it held still bounce when its late retry write comes.
		o.Faults = []Fault{Unbind{Trigger: o.Trigger, Duration: Hold(s.Lease) + s.Lease}}
		o.Keys = []string{KeyUnbind}
	case protocol.RelayBeforeRenew:
		link := in.Ref.Broker()
		if !s.HasLink(link) {
			return o, true
		}
		if busy == link {
			return o, false
		}
		o.Trigger = Trigger{AfterOrders: SyncAfter}
		slow := Toxic{Link: link, Toxic: proxies.Latency{Latency: (s.Lease * 3 / 4).Round(time.Millisecond), Stream: proxies.Downstream},
			Trigger: o.Trigger, Duration: s.Lease * 4}
		o.Keys = []string{LinkKey(link)}
		if slices.Contains(in.Points, protocol.RelayAfterPublish) {
			// The slowing lands while the relay holds a published batch, so
			// it is connected and working: an order count alone says
			// nothing of the relay, which may still be in its first
			// connection handshake.
			slow.At = &Sync{Process: in.Ref, Point: protocol.RelayAfterPublish}
			o.Keys = append(o.Keys, PointKey(in.Ref, protocol.RelayAfterPublish))
		}
		o.Faults = []Fault{slow}
	}
	return o, true
}

// LinkMoment is one moment a link fault lands: on its own (At nil) or
// while the link's process waits at one of its windows, with what that
// window needs to open.
type LinkMoment struct {
	Link    SurfaceLink
	At      *Sync
	Trigger Trigger
	Open    Opening
	Depth   int
}

// Candidate is the link fault f at the moment, taking its link.
func (m LinkMoment) Candidate(f Fault) Candidate {
	return m.Open.Candidate(f, m.Depth, LinkKey(m.Link.Ref))
}

// LinkMoments are, for each link, the moments a link fault lands: on its
// own, and while the link's process waits at each of its windows that can
// be opened with the link taken.
func (s *Surface) LinkMoments() []LinkMoment {
	var out []LinkMoment
	for _, l := range s.Links {
		out = append(out, LinkMoment{Link: l, Trigger: Trigger{AfterOrders: PlainAfter}, Depth: l.Instance.N - 1})
		for _, w := range l.Instance.Points {
			open, ok := s.Opener(l.Instance, w, l.Ref)
			if !ok {
				continue
			}
			open.Keys = append(open.Keys, PointKey(l.Instance.Ref, w))
			out = append(out, LinkMoment{Link: l, At: &Sync{Process: l.Instance.Ref, Point: w},
				Trigger: Trigger{AfterOrders: SyncAfter}, Open: open, Depth: l.Instance.N})
		}
	}
	return out
}

// BlackBoxWindow names the black-box window at the commit of a write by
// the instance (reference "relay-1" or a role) to a watched table
// (protocol.BlackBoxWindow).
func BlackBoxWindow(instance history.Ref, table, status string) string {
	return protocol.BlackBoxWindow(instance.Role(), table, status)
}

// BlackBoxTable is the watched table the role writes, and the status of
// the write (a claim, for the relays) whose commit opens its black-box
// window; ok is false for a role that writes none.
func BlackBoxTable(role string) (table, status string, ok bool) {
	switch role {
	case protocol.Producer:
		return history.TableFacts, "", true
	case protocol.Relay:
		return history.TableOutbox, "Processing", true
	case protocol.Consumer:
		return history.TableEffects, "", true
	}
	return "", "", false
}
