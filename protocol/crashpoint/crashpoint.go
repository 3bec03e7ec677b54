// Package crashpoint lets faultline crash, freeze or slow a pipeline
// process at a named place in its code, or hold the goroutine that got
// there while the rest of the process goes on (docs/protocol.md, "Crash
// points").
//
// A call site is one line, `points.Hit("relay.after-confirm")`;
// arming lives elsewhere: in FAULTLINE_CRASHPOINTS at start, or at run time
// through the HTTP handler every process serves on its control address.
// An unarmed point costs one atomic load.
//
// gofail (go.etcd.io/gofail) does the same job for etcd, but its runtime keeps
// its registry in package-level state armed from GOFAIL_* variables, needs
// code generation for its call sites, has no pause, and its panic action runs
// deferred code. A crash here must be a real SIGKILL and a freeze a real
// SIGSTOP, with the hit in the event log first, so this package is a small
// equivalent of gofail's runtime with those actions.
//
// Kill and pause need Linux, where faultline runs a target's processes: the
// signal goes to the calling thread (tgkill). The package builds on every
// OS so that a service importing it builds on a developer's macOS or
// Windows too; there, Arm refuses kill and pause with an error wrapping
// errors.ErrUnsupported, and delay works as on Linux.
package crashpoint

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// EnvVar arms crash points at process start, e.g.
// FAULTLINE_CRASHPOINTS="relay.after-confirm=kill@3,relay.after-claim=delay:200ms@*".
const EnvVar = protocol.EnvCrashPoints

// Action kinds.
const (
	Kill  = "kill"
	Pause = "pause"
	Delay = "delay"
	// Hold stops only the goroutine (thread) that hit the point, until
	// faultline disarms the point: the rest of the process goes on (its
	// client libraries keep reading their sockets), and faultline ends
	// the hold when it has seen what the window waits for, never after a
	// set time.
	Hold = "hold"
)

// Arming says what a point does and on which hit.
type Arming struct {
	Action string        `json:"action"`          // kill, pause, delay or hold
	Delay  time.Duration `json:"delay,omitempty"` // for delay
	Hit    int64         `json:"hit"`             // fire on this hit (1-based) counted from arming; 0 = every hit
}

// String renders the arming in the form ParseArming reads.
func (a Arming) String() string {
	s := a.Action
	if a.Action == Delay {
		s += ":" + a.Delay.String()
	}
	if a.Hit == 0 {
		return s + "@*"
	}
	return s + "@" + strconv.FormatInt(a.Hit, 10)
}

// ParseArming reads "kill", "kill@3", "pause@2", "delay:200ms@*", "hold@2".
func ParseArming(spec string) (Arming, error) {
	spec = strings.TrimSpace(spec)
	action, hit, hasHit := strings.Cut(spec, "@")
	a := Arming{Hit: 1}
	if hasHit {
		if hit == "*" {
			a.Hit = 0
		} else {
			n, err := strconv.ParseInt(hit, 10, 64)
			if err != nil || n < 1 {
				return Arming{}, fmt.Errorf("crash point arming %q: hit must be a number >= 1 or *", spec)
			}
			a.Hit = n
		}
	}
	kind, arg, hasArg := strings.Cut(action, ":")
	switch kind {
	case Kill, Pause, Hold:
		if hasArg {
			return Arming{}, fmt.Errorf("crash point arming %q: %s takes no argument", spec, kind)
		}
	case Delay:
		d, err := time.ParseDuration(arg)
		if err != nil || d <= 0 {
			return Arming{}, fmt.Errorf("crash point arming %q: delay needs a positive duration, e.g. delay:200ms", spec)
		}
		a.Delay = d
	default:
		return Arming{}, fmt.Errorf("crash point arming %q: unknown action %q (want kill, pause, delay:DURATION or hold)", spec, kind)
	}
	a.Action = kind
	return a, nil
}

// ParseList reads the FAULTLINE_CRASHPOINTS form: name=arming, comma separated.
func ParseList(s string) (map[string]Arming, error) {
	out := map[string]Arming{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, spec, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("crash point %q: want name=action[@hit]", item)
		}
		a, err := ParseArming(spec)
		if err != nil {
			return nil, err
		}
		out[strings.TrimSpace(name)] = a
	}
	return out, nil
}

// Set holds the crash points of one process.
type Set struct {
	process string
	log     *eventlog.Log
	points  map[string]*point
	// act performs kill and pause; canAct says whether act can perform
	// an action on this OS. Tests replace both.
	act    func(action string)
	canAct func(action string) error
}

type point struct {
	name  string
	armed atomic.Bool
	mu    sync.Mutex
	arm   Arming
	hits  int64 // hits since arming
	fired int64 // times it acted
	// release is closed when the point is disarmed or armed again: a
	// hold that fired waits for it (nil: no hold waits).
	release chan struct{}
}

// releaseHolds lets every hold waiting at p go on; p.mu is held.
func (p *point) releaseHolds() {
	if p.release != nil {
		close(p.release)
		p.release = nil
	}
}

// NewSet makes the crash points named (the ones this process has call
// sites for) of process, logging each hit to log. Names are the process's
// own; its target file maps the protocol's windows to them.
func NewSet(process string, log *eventlog.Log, names ...string) *Set {
	s := &Set{process: process, log: log, points: map[string]*point{}, act: selfSignal,
		canAct: func(action string) error { return actionSupported(runtime.GOOS, action) }}
	for _, n := range names {
		s.points[n] = &point{name: n}
	}
	return s
}

// ArmFromEnv arms the points listed in FAULTLINE_CRASHPOINTS.
func (s *Set) ArmFromEnv() error {
	return s.ArmList(os.Getenv(EnvVar))
}

// ArmList arms every point in a FAULTLINE_CRASHPOINTS-style list.
func (s *Set) ArmList(list string) error {
	arms, err := ParseList(list)
	if err != nil {
		return err
	}
	for name, a := range arms {
		if err := s.Arm(name, a); err != nil {
			return err
		}
	}
	return nil
}

// Names lists this process's points.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.points))
	for n := range s.points {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Arm arms the named point; its hit count starts again from zero, and a
// hold waiting at it goes on. An
// action this OS cannot perform (kill or pause outside Linux) is refused
// with an error wrapping errors.ErrUnsupported.
func (s *Set) Arm(name string, a Arming) error {
	p, ok := s.points[name]
	if !ok {
		return fmt.Errorf("unknown crash point %q for process %s (known: %s)", name, s.process, strings.Join(s.Names(), ", "))
	}
	if err := s.canAct(a.Action); err != nil {
		return fmt.Errorf("crash point %q for process %s: %w", name, s.process, err)
	}
	p.mu.Lock()
	p.releaseHolds()
	p.arm, p.hits = a, 0
	p.armed.Store(true)
	p.mu.Unlock()
	return nil
}

// Disarm disarms the named point and lets a hold waiting at it go on.
func (s *Set) Disarm(name string) error {
	p, ok := s.points[name]
	if !ok {
		return fmt.Errorf("unknown crash point %q for process %s", name, s.process)
	}
	p.mu.Lock()
	p.armed.Store(false)
	p.releaseHolds()
	p.mu.Unlock()
	return nil
}

// Status of one point.
type Status struct {
	Name   string `json:"name"`
	Armed  bool   `json:"armed"`
	Arming string `json:"arming,omitempty"`
	Hits   int64  `json:"hits"`
	Fired  int64  `json:"fired"`
}

// Statuses reports every point of this process.
func (s *Set) Statuses() []Status {
	var out []Status
	for _, n := range s.Names() {
		p := s.points[n]
		p.mu.Lock()
		st := Status{Name: n, Armed: p.armed.Load(), Hits: p.hits, Fired: p.fired}
		if st.Armed {
			st.Arming = p.arm.String()
		}
		p.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// Hit is the crash point's call site. Unarmed, it returns at once. Armed, it
// counts the hit and, on the armed hit, writes the hit to the event log and
// then kills, pauses or delays this process, or holds the caller until the
// point is disarmed.
func (s *Set) Hit(name string) {
	p := s.points[name]
	if p == nil || !p.armed.Load() {
		return
	}
	p.mu.Lock()
	p.hits++
	hit, a := p.hits, p.arm
	fire := a.Hit == 0 || hit == a.Hit
	var release chan struct{}
	if fire {
		p.fired++
		if a.Hit != 0 {
			p.armed.Store(false) // one-shot
		}
		if a.Action == Hold {
			// Made before the hit is logged: a disarm that answers the
			// log line lets this hold go even if it comes first.
			if p.release == nil {
				p.release = make(chan struct{})
			}
			release = p.release
		}
	}
	p.mu.Unlock()
	if !fire {
		return
	}
	s.log.Log(eventlog.Entry{Event: eventlog.CrashPoint, Point: name, Hit: hit, Action: a.Action})
	s.log.Sync()
	switch a.Action {
	case Delay:
		time.Sleep(a.Delay)
	case Hold:
		<-release
	default:
		s.act(a.Action)
	}
}

// actionSupported says whether a process on goos can perform action:
// delay and hold everywhere, kill and pause on Linux only (selfSignal).
func actionSupported(goos, action string) error {
	if action == Delay || action == Hold || goos == "linux" {
		return nil
	}
	return fmt.Errorf("action %s is not supported on %s: kill and pause need Linux, where a crash point signals its own thread (tgkill); only delay and hold work here: %w",
		action, goos, errors.ErrUnsupported)
}
