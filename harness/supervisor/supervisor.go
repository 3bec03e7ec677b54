// Package supervisor runs a target's processes (producer, relays,
// consumer: whatever commands its target file gives) as real OS processes
// for the harness: it starts them with their output in one folder, waits
// until each is ready (an HTTP URL answers 200, a TCP port accepts, or a
// line of its output matches), kills (SIGKILL), pauses (SIGSTOP), resumes,
// stops (the target's signal, then SIGKILL) and restarts them, arms their
// crash points over the protocol's HTTP endpoints, and never leaves one
// behind.
//
// Every child runs in its own process group and gets SIGKILL from the
// kernel if the test binary dies (Pdeathsig). A process that kills itself at
// a crash point is not an error here: it shows up as an exit with the reason
// "killed by SIGKILL", and the caller decides what that means.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/faultline-dev/faultline/protocol/crashpoint"

	"github.com/faultline-dev/faultline/harness/safe"
)

// ErrNotRunning is returned by operations that need a live process when the
// current incarnation has already exited.
var ErrNotRunning = errors.New("process not running")

// ErrStopped is returned by Start and Restart after StopAll.
var ErrStopped = errors.New("supervisor stopped")

// Spec says how to run one process.
type Spec struct {
	Name    string   // unique in the run: an instance name, e.g. "relay-2"
	Role    string   // producer, relay or consumer (informational)
	Command []string // the executable and its arguments
	Env     []string // extra environment, e.g. FAULTLINE_CRASHPOINTS=relay.after-confirm=kill@3
	Dir     string   // working directory; empty: the supervisor's folder
	// EventLog is the path the process writes its protocol event log to;
	// empty: it writes none.
	EventLog string
	// Control is the host:port of its protocol control endpoints
	// (/crashpoints); empty: it has none.
	Control string
	Ready   Ready
	Stop    Stop
	Restart Restart
}

// Ready says how to know a process is ready: exactly one of HTTP (a URL
// that must answer 200), TCP (an address that must accept) or Log (a line
// of its output that must match).
type Ready struct {
	HTTP    string
	TCP     string
	Log     *regexp.Regexp
	Timeout time.Duration // default 60 s
}

// Stop says how to stop a process gracefully: Signal (default SIGTERM),
// then SIGKILL after Timeout (default 3 s).
type Stop struct {
	Signal  syscall.Signal
	Timeout time.Duration
}

// Restart is what the supervisor does when a process exits by itself (not
// through Kill, Stop or StopAll, nor by SIGKILL at a kill crash point armed
// in it: a fault does those and restarts it, or not, itself): with Always
// it is started again after Backoff, as long as the supervisor runs, until
// maxFailedRestarts restarts in a row fail. By default nothing is.
type Restart struct {
	Always  bool
	Backoff time.Duration
}

// Supervisor starts and tracks the processes of one run. Its methods are
// safe for concurrent use.
type Supervisor struct {
	dir    string
	client *http.Client
	// mark is set as EnvRunMark in every process started here, so that
	// StopAll finds their descendants too, those that left the process
	// group (setsid) included.
	mark string

	logMu sync.Mutex
	log   io.Writer

	readyTimeout time.Duration // on top of the caller's context
	stopGrace    time.Duration // SIGTERM → SIGKILL
	reapTimeout  time.Duration // SIGKILL → reaped
	signalWait   time.Duration // SIGSTOP/SIGCONT → state seen in /proc

	// life ends with StopAll: restart policies wait and restart under it.
	life    context.Context
	endLife context.CancelFunc

	mu     sync.Mutex
	procs  map[string]*Process
	order  []string // names in start order
	closed bool
}

// New makes a supervisor that keeps event logs (<name>.events.jsonl) and
// output (<name>.out, stdout and stderr) in dir (also the children's working
// directory; created on the first Start), and writes one line per
// lifecycle action to log (nil: discarded).
func New(dir string, log io.Writer) *Supervisor {
	if log == nil {
		log = io.Discard
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // children run in dir: their paths must not be relative to ours
	}
	life, endLife := context.WithCancel(context.Background())
	return &Supervisor{
		life:    life,
		endLife: endLife,
		dir:     dir,
		log:     log,
		mark:    newMark(),
		client: &http.Client{
			Transport: &http.Transport{
				Proxy:             nil, // loopback only, never through a proxy
				DisableKeepAlives: true,
			},
			Timeout: 10 * time.Second,
		},
		readyTimeout: 60 * time.Second, // a bound: ready ends the wait
		stopGrace:    3 * time.Second,
		reapTimeout:  10 * time.Second,
		signalWait:   2 * time.Second,
		procs:        map[string]*Process{},
	}
}

// Dir is the folder holding the event logs and outputs.
func (s *Supervisor) Dir() string { return s.dir }

// Start starts spec's process and waits until it is ready (spec.Ready),
// bounded by ctx and the readiness timeout.
// If the process exits or is not ready in time, it is killed, forgotten, and
// the error carries the tail of its output.
func (s *Supervisor) Start(ctx context.Context, spec Spec) (*Process, error) {
	if err := validate(spec); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	spec.Command = slices.Clone(spec.Command)
	spec.Env = slices.Clone(spec.Env)
	if spec.Ready.Timeout <= 0 {
		spec.Ready.Timeout = s.readyTimeout
	}
	if spec.Stop.Signal == 0 {
		spec.Stop.Signal = syscall.SIGTERM
	}
	if spec.Stop.Timeout <= 0 {
		spec.Stop.Timeout = s.stopGrace
	}
	p := &Process{sup: s, spec: spec}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("start %s: %w", spec.Name, ErrStopped)
	}
	if _, dup := s.procs[spec.Name]; dup {
		s.mu.Unlock()
		return nil, fmt.Errorf("start %s: a process with that name already exists", spec.Name)
	}
	inc, err := p.spawnLocked(spec.Env)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.procs[spec.Name] = p
	s.order = append(s.order, spec.Name)
	s.mu.Unlock()

	if err := p.waitReady(ctx, inc); err != nil {
		p.abandon(inc)
		s.mu.Lock()
		if s.procs[spec.Name] == p {
			delete(s.procs, spec.Name)
			s.order = slices.DeleteFunc(s.order, func(n string) bool { return n == spec.Name })
		}
		s.mu.Unlock()
		return nil, err
	}
	p.markReady(inc)
	s.logf(spec.Name, "started pid %d", inc.pid)
	return p, nil
}

func validate(spec Spec) error {
	if spec.Name == "" || spec.Name == "." || spec.Name == ".." || strings.ContainsAny(spec.Name, `/\`) {
		return fmt.Errorf("start: process name %q: want a non-empty file name", spec.Name)
	}
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return fmt.Errorf("start %s: no command", spec.Name)
	}
	if n := readyKinds(spec.Ready); n != 1 {
		return fmt.Errorf("start %s: readiness: give exactly one of an HTTP URL, a TCP address or a log pattern (got %d)", spec.Name, n)
	}
	return nil
}

func readyKinds(r Ready) int {
	n := 0
	if r.HTTP != "" {
		n++
	}
	if r.TCP != "" {
		n++
	}
	if r.Log != nil {
		n++
	}
	return n
}

// Process returns the process with that name.
func (s *Supervisor) Process(name string) (*Process, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[name]
	return p, ok
}

// Processes returns every process, in start order.
func (s *Supervisor) Processes() []*Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Process, 0, len(s.order))
	for _, n := range s.order {
		out = append(out, s.procs[n])
	}
	return out
}

// EventLogPaths maps each process that writes an event log to its path.
func (s *Supervisor) EventLogPaths() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.procs))
	for n, p := range s.procs {
		if path := p.EventLogPath(); path != "" {
			out[n] = path
		}
	}
	return out
}

// StopAll stops every process at once (SIGCONT, SIGTERM, up to 3 s, then
// SIGKILL to its process group) and waits until all are reaped, then kills
// every process still carrying the supervisor's run mark (descendants that
// left the group with setsid, see EnvRunMark). Afterwards
// Start and Restart fail with ErrStopped. Calling it again is harmless.
func (s *Supervisor) StopAll(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.endLife() // no restart policy starts anything from now on
	procs := make([]*Process, 0, len(s.procs))
	for _, n := range s.order {
		procs = append(procs, s.procs[n])
	}
	s.mu.Unlock()

	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = safe.Do("stop "+p.Name(), func() error { return p.Stop(ctx) }) })
	}
	wg.Wait()
	s.client.CloseIdleConnections()
	// What the processes started and left behind, in their groups or
	// out of them (setsid), carries the mark: none outlives the run.
	sweep, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	killed, err := KillMarked(sweep, s.mark)
	if len(killed) > 0 {
		s.logf("supervisor", "killed %d leftover descendants (SIGKILL): pids %v", len(killed), killed)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("stop all: leftover descendants: %w", err))
	}
	return errors.Join(errs...)
}

// logf writes one lifecycle line: "15:04:05.000 relay-1 killed pid 123".
func (s *Supervisor) logf(name, format string, args ...any) {
	line := time.Now().Format("15:04:05.000") + " " + name + " " + fmt.Sprintf(format, args...) + "\n"
	s.logMu.Lock()
	defer s.logMu.Unlock()
	_, _ = io.WriteString(s.log, line)
}

// environ is the child's environment: ours without crash point arming,
// then extra, then the supervisor's run mark.
func (s *Supervisor) environ(extra []string) []string {
	return withMark(environ(extra), s.mark)
}

// environ is ours without crash point arming, then extra.
func environ(extra []string) []string {
	env := slices.DeleteFunc(os.Environ(), isCrashpointEnv)
	return append(env, extra...)
}

// Mark is the supervisor's run mark, the value of EnvRunMark in every
// process it starts.
func (s *Supervisor) Mark() string { return s.mark }

func isCrashpointEnv(kv string) bool {
	return strings.HasPrefix(kv, crashpoint.EnvVar+"=")
}

// EventLogPath is where the process name's event log goes in this
// supervisor's folder (what a runner hands the process).
func (s *Supervisor) EventLogPath(name string) string {
	return filepath.Join(s.dir, name+".events.jsonl")
}

func (s *Supervisor) outPath(name string) string {
	return filepath.Join(s.dir, name+".out")
}
