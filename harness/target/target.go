// Package target loads, validates and renders target files
// (faultline.yaml): the description of one team's outbox → RabbitMQ →
// inbox pipeline, which is all faultline knows of it besides the protocol.
//
// A target file names the pipeline's databases, how their tables are made,
// its processes (how to start each, when it is ready, how to stop it, which
// protocol windows its crash points sit in), the workload that makes its
// business facts, its broker topology, the contract as SQL over its own
// tables, the knobs a scenario may turn and its broken variants. Strings
// faultline fills in are templates in Go text/template syntax:
// {{postgres "orders"}}, {{amqp}}, {{control_addr}}, and in the workload
// {{n}}, {{id}} and {{random 1 500}}.
//
// Load reports every problem of a file, each with its line, as *Errors.
package target

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"time"
)

// Version is the version of the format this package reads (faultline: 1).
const Version = 1

// Target is a loaded, checked target file, with its defaults applied.
type Target struct {
	Path, Dir string // absolute path of the file and its folder
	Name      string
	Build     *Command // nil if none
	Databases []string
	Schema    Schema
	Processes []Process
	Lease     time.Duration // the relays' claim lease (timing.lease)
	// RidesOut (timing.rides_out) is the longest outage of the queue's
	// bindings the relays ride out: an unroutable spell no longer than this
	// must leave no row Failed. 0: not said, and not checked.
	RidesOut time.Duration
	Relay    Relay // how the relay takes work from the outbox
	Workload Workload
	Topology Topology
	Contract Contract
	Observe  Observe
	Settings map[string]Setting
	Variants []Variant
	// KnownFindings are weaknesses of the pipeline as built (of a library
	// it uses) that the gate finds and the file declares: the gate passes
	// when a scenario shows exactly its finding, and fails when it no
	// longer does.
	KnownFindings []KnownFinding
}

// Command is a program to run, in the target file's folder.
type Command struct {
	Args    []Template
	Env     []EnvVar
	Timeout time.Duration
	Line    int
}

// EnvVar is one environment variable of a process or command.
type EnvVar struct {
	Name  string
	Value Template
}

// Schema says how the run's fresh databases get their tables: exactly one
// of the fields is set.
type Schema struct {
	CreatedByProcesses bool              // every program applies its own tables at start
	Commands           [][]Template      // commands to run, in order ({{postgres "db"}} renders a direct URL)
	SQL                map[string]string // database → absolute path of a .sql file
}

// Process is one program of the pipeline.
type Process struct {
	Name      string
	Role      string // protocol.Producer, protocol.Relay or protocol.Consumer
	Instances int
	Command   []Template
	Env       []EnvVar // in file order
	EventLog  bool     // writes protocol event-log lines to {{event_log}}
	Control   Template // host:port of its /crashpoints endpoints
	HTTP      Template // host:port the workload sends requests to
	Ready     Ready
	Stop      Stop
	Restart   Restart
	// CrashPoints maps a protocol window to the process's own point name.
	CrashPoints map[string]string
	Line        int
}

// Ready says how faultline knows a process is up: exactly one of HTTP
// (a URL answering 200), TCP (host:port accepting) and Log (a line of its
// output matching) is set.
type Ready struct {
	HTTP, TCP Template
	Log       *regexp.Regexp
	Timeout   time.Duration
}

// Stop says how a process is stopped gracefully: the signal, then SIGKILL
// after the timeout.
type Stop struct {
	Signal  syscall.Signal
	Timeout time.Duration
}

// Restart is what is done when the process exits by itself (not killed,
// stopped or crashed at an armed crash point by faultline), as production's
// supervisor (systemd, Kubernetes) would: with Always it is started again
// after Backoff, for as long as the run lasts; by default nothing is.
type Restart struct {
	Always  bool
	Backoff time.Duration
}

// Restart policies of the target file.
const (
	RestartNever  = "never"
	RestartAlways = "always"
)

// Workload is what makes one business fact: a create request, then the
// follow-up steps of the same aggregate.
type Workload struct {
	Create Request
	Steps  []Request
}

// Request is one HTTP request of the workload.
type Request struct {
	Method     string
	Path, Body Template
	Headers    map[string]string
	ID         string // JSON field of the answer holding the fact's id (create)
	OK, Done   []int  // statuses meaning success, and "already done" (a retried step)
	Line       int
}

// Topology is the broker's side of the pipeline.
type Topology struct {
	Exchange, Queue, DeadLetterQueue string
	RoutingKeys                      []string
	// EventID is where a message carries its event's id
	// (topology.event_id).
	EventID MessageID
}

// Contract is what faultline reads to judge a run, as SQL over the
// pipeline's own tables. Facts and Effects are always set; the others are
// nil when the file leaves them out and they have no default.
type Contract struct {
	Facts, Effects                                Query
	Outbox, Inbox, HeldBack, Payload, InboxExpire *Query
	// Pending lists (column event_id) the committed outbox events the
	// relay has not settled yet: for an offset relay, those beyond its
	// committed position.
	Pending *Query
	// InboxPending lists (column event_id) the events the consumer has
	// taken in but not applied yet: a consumer that stores each delivery
	// in its inbox and applies it later (a poller working off the inbox)
	// has work pending while this returns rows.
	InboxPending *Query
}

// Query is one query of the contract.
type Query struct {
	Database, SQL string
	Default       bool // the article's default, not written in the file
	Line          int
}

// Setting is a knob a scenario may turn, as the pipeline's own arguments
// or environment for the processes of one role.
type Setting struct {
	Name, Role string
	Args       []Template // may use {{value}}
	Env        []EnvVar
	// Explore, if set, is the value faultline explore turns the setting
	// to when it attacks one of the windows the setting opens.
	Explore *SettingExplore
	Line    int
}

// SettingExplore is how faultline explore uses a setting: a window that
// only opens with the setting on (a lease renewal: relay.before-renew) is
// explored with the setting at Value.
type SettingExplore struct {
	Value string
	Opens []string // protocol windows
}

// ExploreSettings are the settings (name → value) under which explore
// attacks a window: those whose explore.opens names it.
func (t *Target) ExploreSettings(window string) map[string]string {
	var out map[string]string
	for name, s := range t.Settings {
		if s.Explore != nil && slices.Contains(s.Explore.Opens, window) {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = s.Explore.Value
		}
	}
	return out
}

// Variant is a broken build of the pipeline (a negative control): one
// guard removed, which the gate must catch.
type Variant struct {
	Name, Guard, Expect string
	CaughtBy            []string // scenario names
	Env                 []EnvVar // added to every process
	Line                int
}

// KnownFinding is a weakness the gate finds in the pipeline as built,
// declared so that it does not fail the gate: the scenario that shows it,
// the violation kinds it shows (a run of that scenario on the correct
// pipeline failing with these kinds only is the finding; any other kind
// still fails), and the behaviour of the pipeline or its library it comes
// from.
type KnownFinding struct {
	Scenario   string
	Violations []string // violation kinds, each once, in file order
	Cause      string
	Line       int
}

// KnownFinding returns the known finding of that scenario.
func (t *Target) KnownFinding(scenario string) (KnownFinding, bool) {
	for _, k := range t.KnownFindings {
		if k.Scenario == scenario {
			return k, true
		}
	}
	return KnownFinding{}, false
}

// Load reads, parses and checks the target file at path, and applies its
// defaults. A file with mistakes gives *Errors, one Problem per mistake.
func Load(path string) (*Target, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load target: %w", err)
	}
	defer f.Close()
	// One byte past the bound is enough to refuse the file: a target
	// path that names /dev/zero or a huge file is not read whole.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("load target: %w", err)
	}
	return Parse(path, data)
}

// Parse is Load with the file's content given; relative paths in it (sql
// files) resolve against path's folder.
func Parse(path string, data []byte) (*Target, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("load target %s: %w", path, err)
	}
	d := &decoder{file: path, dir: filepath.Dir(abs)}
	var t *Target
	if len(data) > MaxFileSize {
		d.problem(0, "", "the file is over %d bytes (1 MiB): a target file is a page or two", MaxFileSize)
	} else {
		t = d.decode(data)
	}
	if len(d.problems) > 0 {
		errs := d.problems
		slices.SortStableFunc(errs, func(a, b Problem) int { return cmp.Compare(a.Line, b.Line) })
		return nil, &errs
	}
	t.Path, t.Dir = abs, d.dir
	return t, nil
}

// Instances returns the names of p's instances: its name when it has one,
// else name-1 … name-N.
func (t *Target) Instances(p Process) []string {
	if p.Instances <= 1 {
		return []string{p.Name}
	}
	names := make([]string, p.Instances)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", p.Name, i+1)
	}
	return names
}

// ByRole returns the processes of a role, in file order.
func (t *Target) ByRole(role string) []Process {
	var ps []Process
	for _, p := range t.Processes {
		if p.Role == role {
			ps = append(ps, p)
		}
	}
	return ps
}

// Variant returns the variant of that name.
func (t *Target) Variant(name string) (Variant, bool) {
	for _, v := range t.Variants {
		if v.Name == name {
			return v, true
		}
	}
	return Variant{}, false
}

// Windows returns, for each protocol window the pipeline offers, the names
// of the processes with a crash point there, in file order.
func (t *Target) Windows() map[string][]string {
	windows := map[string][]string{}
	for _, p := range t.Processes {
		for w := range p.CrashPoints {
			windows[w] = append(windows[w], p.Name)
		}
	}
	return windows
}

// WithoutEventLogs is the target as if none of its processes wrote an
// event log (and so offered no crash point, whose hits are announced
// there): what faultline can still judge of a pipeline that speaks none of
// the protocol. Their {{event_log}} is the null device.
func (t *Target) WithoutEventLogs() *Target {
	c := *t
	c.Processes = make([]Process, len(t.Processes))
	for i, p := range t.Processes {
		p.EventLog = false
		p.CrashPoints = nil
		c.Processes[i] = p
	}
	return &c
}
