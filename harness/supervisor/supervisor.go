// Package supervisor runs the pipeline's programs (order service, relays,
// inventory consumer) as real OS processes for the harness: it builds them
// once, starts them with their event logs in one folder, waits until each
// is ready (its control line is in its event log and /healthz answers),
// kills (SIGKILL), pauses (SIGSTOP), resumes, stops and restarts them, arms
// their crash points over HTTP, and never leaves one behind.
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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/protocol/crashpoint"
)

// ErrNotRunning is returned by operations that need a live process when the
// current incarnation has already exited.
var ErrNotRunning = errors.New("process not running")

// ErrStopped is returned by Start and Restart after StopAll.
var ErrStopped = errors.New("supervisor stopped")

// Spec says how to run one process.
type Spec struct {
	Name   string   // unique in the run: "order", "relay-1", "relay-2", "inventory"
	Kind   string   // "order", "relay", "inventory"
	Binary string   // path of the executable
	Args   []string // flags; the supervisor adds --event-log, and --listen / --control-addr 127.0.0.1:0 unless given
	Env    []string // extra environment, e.g. FAULTLINE_CRASHPOINTS=relay.after-confirm=kill@3
}

// Supervisor starts and tracks the processes of one run. Its methods are
// safe for concurrent use.
type Supervisor struct {
	dir    string
	client *http.Client

	logMu sync.Mutex
	log   io.Writer

	readyTimeout time.Duration // on top of the caller's context
	stopGrace    time.Duration // SIGTERM → SIGKILL
	reapTimeout  time.Duration // SIGKILL → reaped
	signalWait   time.Duration // SIGSTOP/SIGCONT → state seen in /proc

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
	return &Supervisor{
		dir: dir,
		log: log,
		client: &http.Client{
			Transport: &http.Transport{
				Proxy:             nil, // loopback only, never through a proxy
				DisableKeepAlives: true,
			},
			Timeout: 10 * time.Second,
		},
		readyTimeout: 15 * time.Second,
		stopGrace:    3 * time.Second,
		reapTimeout:  10 * time.Second,
		signalWait:   2 * time.Second,
		procs:        map[string]*Process{},
	}
}

// Dir is the folder holding the event logs and outputs.
func (s *Supervisor) Dir() string { return s.dir }

// Start starts spec's process and waits until it is ready: a new control
// line in its event log and /healthz answering 200, bounded by ctx and 15 s.
// If the process exits or is not ready in time, it is killed, forgotten, and
// the error carries the tail of its output.
func (s *Supervisor) Start(ctx context.Context, spec Spec) (*Process, error) {
	if err := validate(spec); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	spec.Args = slices.Clone(spec.Args)
	spec.Env = slices.Clone(spec.Env)
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
	s.logf(spec.Name, "started pid %d, control %s", inc.pid, inc.control)
	return p, nil
}

func validate(spec Spec) error {
	if spec.Name == "" || spec.Name == "." || spec.Name == ".." || strings.ContainsAny(spec.Name, `/\`) {
		return fmt.Errorf("start: process name %q: want a non-empty file name", spec.Name)
	}
	switch spec.Kind {
	case KindOrder, KindRelay, KindInventory:
	default:
		return fmt.Errorf("start %s: unknown kind %q (want order, relay or inventory)", spec.Name, spec.Kind)
	}
	if spec.Binary == "" {
		return fmt.Errorf("start %s: no binary", spec.Name)
	}
	if hasFlag(spec.Args, "event-log") {
		return fmt.Errorf("start %s: --event-log is set by the supervisor; remove it from Args", spec.Name)
	}
	return nil
}

// hasFlag reports whether args set the flag name (-name, --name, -name=v, --name=v).
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
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

// EventLogPaths maps each process name to its event log.
func (s *Supervisor) EventLogPaths() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.procs))
	for n, p := range s.procs {
		out[n] = p.EventLogPath()
	}
	return out
}

// StopAll stops every process at once (SIGCONT, SIGTERM, up to 3 s, then
// SIGKILL to its process group) and waits until all are reaped. Afterwards
// Start and Restart fail with ErrStopped. Calling it again is harmless.
func (s *Supervisor) StopAll(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	procs := make([]*Process, 0, len(s.procs))
	for _, n := range s.order {
		procs = append(procs, s.procs[n])
	}
	s.mu.Unlock()

	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.Stop(ctx) })
	}
	wg.Wait()
	s.client.CloseIdleConnections()
	return errors.Join(errs...)
}

// logf writes one lifecycle line: "15:04:05.000 relay-1 killed pid 123".
func (s *Supervisor) logf(name, format string, args ...any) {
	line := time.Now().Format("15:04:05.000") + " " + name + " " + fmt.Sprintf(format, args...) + "\n"
	s.logMu.Lock()
	defer s.logMu.Unlock()
	_, _ = io.WriteString(s.log, line)
}

// environ is the child's environment: ours without crash point arming, then extra.
func environ(extra []string) []string {
	env := slices.DeleteFunc(os.Environ(), isCrashpointEnv)
	return append(env, extra...)
}

func isCrashpointEnv(kv string) bool {
	return strings.HasPrefix(kv, crashpoint.EnvVar+"=")
}

func (s *Supervisor) eventLogPath(name string) string {
	return filepath.Join(s.dir, name+".events.jsonl")
}

func (s *Supervisor) outPath(name string) string {
	return filepath.Join(s.dir, name+".out")
}
