package target

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/faultline-dev/faultline/protocol"
	"go.yaml.in/yaml/v3"
)

var (
	databaseName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	// pipelineName is a slug that is one file name: no separator, and no
	// ".." (checked apart, as RE2 has no lookahead).
	pipelineName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	processName  = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	// scenarioName is the shape of a catalogue scenario's name; whether
	// the catalogue has it is checked where the catalogue is known (the
	// gate, list).
	scenarioName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,99}$`)
	yamlError    = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	// yamlParserError matches the errors of the YAML parser (not of its
	// scanner), whose line yaml.v3 reports counted from 0: the line where
	// the broken mapping, list or document starts.
	yamlParserError = regexp.MustCompile(`^(did not find expected (key|node content|'-' indicator|',' or '[\]}]'|<document start>|<stream-start>)|found (undefined tag handle|duplicate %YAML directive|duplicate %TAG directive|incompatible YAML document))$`)
)

// decode reads the whole file; nil when it cannot be read as a target
// file at all.
func (d *decoder) decode(data []byte) *Target {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		if m := yamlError.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			if yamlParserError.MatchString(m[2]) {
				line++
			}
			d.problem(line, "", "bad YAML: %s", m[2])
		} else {
			d.problem(0, "", "bad YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return nil
	}
	if len(doc.Content) == 0 {
		d.problem(1, "", "empty file: want a target file (faultline: %d, name, databases, ...)", Version)
		return nil
	}
	if !d.checkTree(&doc) {
		return nil
	}
	root := doc.Content[0]
	m, ok := d.mapping(val{n: root, line: root.Line}, "faultline", "name", "build", "databases", "schema",
		"processes", "relay", "timing", "workload", "topology", "contract", "observe", "settings", "variants", "known_findings")
	if !ok {
		return nil
	}
	if v, ok := d.require(m, "faultline", fmt.Sprintf("the format's version, %d", Version)); ok {
		if version, ok := d.integer(v); ok && version != Version {
			d.problem(v.line, v.field, "version %d is not supported (this faultline reads version %d)", version, Version)
			return nil
		}
	}

	t := &Target{}
	if v, ok := d.require(m, "name", "the pipeline's name"); ok {
		// The name names the report's folder under --out: a slug, never
		// a path.
		const what = "a pipeline name (lowercase letters, digits, ., _ and -, from a letter or digit, at most 63; no ..)"
		if name, ok := d.matching(v, pipelineName, what); ok {
			if strings.Contains(name, "..") {
				d.problem(v.line, v.field, "%q is not %s", name, what)
			} else {
				t.Name = name
			}
		}
	}
	if v, ok := m.get("build"); ok {
		t.Build = d.command(v)
	}
	t.Databases = d.decodeDatabases(m)
	t.Schema = d.decodeSchema(m)
	t.Processes = d.decodeProcesses(m)
	t.Lease = defaultLease
	if v, ok := m.get("timing"); ok {
		if tm, ok := d.mapping(v, "lease", "rides_out"); ok {
			t.Lease = d.optDuration(tm, "lease", defaultLease)
			t.RidesOut = d.optDuration(tm, "rides_out", 0)
		}
	}
	t.Relay = d.decodeRelay(m)
	t.Workload = d.decodeWorkload(m)
	t.Topology = d.decodeTopology(m)
	t.Contract = d.decodeContract(m, t.Relay.Model)
	t.Observe = d.decodeObserve(m, t.Contract, t.Relay.Model)
	d.checkRelay(t, m.vals["contract"].line)
	t.Settings = d.decodeSettings(m, t.Processes)
	t.Variants = d.decodeVariants(m)
	t.KnownFindings = d.decodeKnownFindings(m)
	return t
}

// command reads the build command.
func (d *decoder) command(v val) *Command {
	c := &Command{Timeout: defaultBuildTimeout, Line: v.line}
	m, ok := d.mapping(v, "command", "env", "timeout")
	if !ok {
		return c
	}
	if cv, ok := d.require(m, "command", "the program and its arguments"); ok {
		c.Args = d.args(cv, scopeBuild)
	}
	if ev, ok := m.get("env"); ok {
		c.Env = d.env(ev, scopeBuild)
	}
	c.Timeout = d.optDuration(m, "timeout", defaultBuildTimeout)
	return c
}

func (d *decoder) decodeDatabases(m *mapping) []string {
	v, ok := d.require(m, "databases", "the names of the pipeline's databases, e.g. [orders, inventory]")
	if !ok {
		return nil
	}
	items, ok := d.seq(v)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.problem(v.line, v.field, "must name at least one database")
		return nil
	}
	if len(items) > maxDatabases {
		d.problem(v.line, v.field, "%d databases: at most %d", len(items), maxDatabases)
		return nil
	}
	before := len(d.problems)
	first := map[string]int{}
	var names []string
	for _, item := range items {
		name, ok := d.matching(item, databaseName, "a database name (lowercase letters, digits and _, from a letter)")
		if !ok {
			continue
		}
		if line, dup := first[name]; dup {
			d.problem(item.line, item.field, "database %q given twice (first at line %d)", name, line)
			continue
		}
		first[name] = item.line
		names = append(names, name)
	}
	if len(d.problems) == before {
		d.databases = map[string]bool{}
		for _, name := range names {
			d.databases[name] = true
		}
		d.dbList = names
	}
	return names
}

// declared checks that a database name read from v is declared.
func (d *decoder) declared(line int, field, name string) bool {
	if d.databases == nil || d.databases[name] {
		return true
	}
	d.problem(line, field, "database %q is not declared in databases (databases: %s)", name, strings.Join(d.dbList, ", "))
	return false
}

func (d *decoder) decodeSchema(m *mapping) Schema {
	var s Schema
	v, ok := d.require(m, "schema", "how the tables are made: created_by: processes, commands or sql")
	if !ok {
		return s
	}
	sm, ok := d.mapping(v, "created_by", "commands", "sql")
	if !ok {
		return s
	}
	if len(sm.keys) != 1 {
		d.problem(v.line, v.field, "give exactly one of created_by, commands, sql")
	}
	if cv, ok := sm.get("created_by"); ok {
		if by, ok := d.str(cv); ok {
			if by == "processes" {
				s.CreatedByProcesses = true
			} else {
				d.problem(cv.line, cv.field, "want processes (the programs apply their own tables), got %q", by)
			}
		}
	}
	if cv, ok := sm.get("commands"); ok {
		if items, ok := d.seq(cv); ok {
			if len(items) == 0 {
				d.problem(cv.line, cv.field, "must list at least one command")
			}
			for _, item := range items {
				if args := d.args(item, scopeSchema); args != nil {
					s.Commands = append(s.Commands, args)
				}
			}
		}
	}
	if qv, ok := sm.get("sql"); ok {
		if qm, ok := d.mapping(qv); ok {
			if len(qm.keys) == 0 {
				d.problem(qv.line, qv.field, "must map at least one database to its .sql file")
			}
			s.SQL = map[string]string{}
			for _, db := range qm.keys {
				fv := qm.vals[db]
				if !d.declared(fv.line, fv.field, db) {
					continue
				}
				rel, ok := d.nonEmpty(fv)
				if !ok {
					continue
				}
				path := rel
				if !filepath.IsAbs(path) {
					path = filepath.Join(d.dir, path)
				}
				info, err := os.Stat(path)
				switch {
				case err != nil:
					d.problem(fv.line, fv.field, "%s: %v", rel, statError(err))
				case info.IsDir():
					d.problem(fv.line, fv.field, "%s is a folder, want a .sql file", rel)
				default:
					if err := d.inside(path); err != nil {
						d.problem(fv.line, fv.field, "%s: %v", rel, err)
						continue
					}
					s.SQL[db] = path
				}
			}
		}
	}
	return s
}

// inside checks that path, its symlinks resolved, lies inside the target
// file's folder (its symlinks resolved too): a target file names its own
// files, not the machine's.
func (d *decoder) inside(path string) error {
	dir, err := filepath.EvalSymlinks(d.dir)
	if err != nil {
		return fmt.Errorf("the target's folder: %w", statError(err))
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return statError(err)
	}
	rel, err := filepath.Rel(dir, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return fmt.Errorf("outside the target file's folder %s (it is %s): keep schema files beside the target file", d.dir, real)
	}
	return nil
}

// statError is err without the path, which the problem already names.
func statError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (d *decoder) decodeProcesses(m *mapping) []Process {
	v, ok := d.require(m, "processes", "the pipeline's programs")
	if !ok {
		return nil
	}
	items, ok := d.seq(v)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.problem(v.line, v.field, "must list at least one process")
		return nil
	}
	if len(items) > maxProcesses {
		d.problem(v.line, v.field, "%d processes: at most %d", len(items), maxProcesses)
		return nil
	}
	first := map[string]int{}
	rolesKnown := true
	var ps []Process
	for _, item := range items {
		p, nameLine := d.decodeProcess(item)
		if p.Role == "" {
			rolesKnown = false
		}
		if p.Name != "" {
			if line, dup := first[p.Name]; dup {
				d.problem(nameLine, join(item.field, "name"), "process %q given twice (first at line %d)", p.Name, line)
				continue
			}
			first[p.Name] = nameLine
		}
		ps = append(ps, p)
	}
	if all := allInstances(ps); all > maxAllInstances {
		d.problem(v.line, v.field, "%d instances in all: at most %d (each is a process of every run)", all, maxAllInstances)
	}
	if rolesKnown && !slices.ContainsFunc(ps, func(p Process) bool { return p.Role == protocol.Producer }) {
		d.problem(v.line, v.field, "no process has role %s: the workload needs one to send its requests to", protocol.Producer)
	}
	return ps
}

// allInstances is how many instances the processes have together.
func allInstances(ps []Process) int {
	n := 0
	for _, p := range ps {
		n += p.Instances
	}
	return n
}

// decodeProcess reads one process, and the line of its name.
func (d *decoder) decodeProcess(v val) (Process, int) {
	p := Process{Instances: 1, Line: v.line}
	p.Control = Template{Raw: defaultControl, Line: v.line, Field: join(v.field, "control")}
	p.HTTP = Template{Raw: defaultHTTP, Line: v.line, Field: join(v.field, "http")}
	p.Ready.Timeout = defaultReadyTimeout
	p.Stop = Stop{Signal: syscall.SIGTERM, Timeout: defaultStopTimeout}
	m, ok := d.mapping(v, "name", "role", "instances", "command", "env", "event_log",
		"control", "ready", "stop", "restart", "crashpoints", "http")
	if !ok {
		return p, 0
	}
	nameLine := 0
	if nv, ok := d.require(m, "name", ""); ok {
		if name, ok := d.matching(nv, processName, "a process name (lowercase letters, digits and -, from a letter)"); ok {
			p.Name, nameLine = name, nv.line
		}
	}
	if rv, ok := d.require(m, "role", strings.Join(protocol.Roles(), ", ")); ok {
		p.Role, _ = d.oneOf(rv, "role", protocol.Roles())
	}
	if iv, ok := m.get("instances"); ok {
		if n, ok := d.integer(iv); ok {
			switch {
			case n < 1:
				d.problem(iv.line, iv.field, "must be at least 1, got %d", n)
			case n > maxInstances:
				d.problem(iv.line, iv.field, "%d instances: at most %d", n, maxInstances)
			default:
				p.Instances = n
			}
		}
	}
	if cv, ok := d.require(m, "command", "the program and its arguments"); ok {
		p.Command = d.args(cv, scopeProcess)
	}
	if ev, ok := m.get("env"); ok {
		p.Env = d.env(ev, scopeProcess)
	}
	eventLogKnown := true
	if ev, ok := m.get("event_log"); ok {
		p.EventLog, eventLogKnown = d.boolean(ev)
		if p.EventLog && !usesAny(p.Command, p.Env, "event_log") {
			d.problem(ev.line, ev.field, "true, but neither command nor env hands the process {{event_log}}, the path to write it to")
		}
	}
	if cv, ok := m.get("control"); ok {
		p.Control = d.address(cv, p.Control)
	}
	if hv, ok := m.get("http"); ok {
		p.HTTP = d.address(hv, p.HTTP)
	}
	p.Ready = d.decodeReady(m)
	if sv, ok := m.get("stop"); ok {
		p.Stop = d.decodeStop(sv)
	}
	if rv, ok := m.get("restart"); ok {
		p.Restart = d.decodeRestart(rv)
	}
	if cv, ok := m.get("crashpoints"); ok {
		p.CrashPoints = d.decodeCrashPoints(cv, p.Role)
		if len(p.CrashPoints) > 0 && !p.EventLog && eventLogKnown {
			d.problem(cv.line, cv.field, "crash points need event_log: true (the hit is announced on the event log)")
		}
	}
	return p, nameLine
}

// Uses reports whether the process's command or environment calls the
// placeholder name: "postgres" (it talks to PostgreSQL), "amqp" (to
// RabbitMQ), "control_addr".
func (p Process) Uses(name string) bool { return usesAny(p.Command, p.Env, name) }

// UsesLink reports whether the process is handed the address of its link
// to ("pg" or "amqp"): {{postgres}} for the database; {{amqp}} or
// {{amqp_urls}} for the broker, whose every address is one of its links.
func (p Process) UsesLink(to string) bool {
	switch to {
	case "pg":
		return p.Uses("postgres")
	case "amqp":
		return p.Uses("amqp") || p.Uses("amqp_urls")
	}
	return false
}

// TakesBrokerNodes says why the target cannot be handed several broker
// nodes ("" if it can): every process that talks to the broker must take
// {{amqp_urls}}, or it would hold on to one node a cluster fault kills.
func (t *Target) TakesBrokerNodes() string {
	var not []string
	for _, p := range t.Processes {
		if p.Uses("amqp") && !p.Uses("amqp_urls") {
			not = append(not, p.Name)
		}
	}
	if len(not) == 0 {
		return ""
	}
	return fmt.Sprintf("the target file hands %s no {{amqp_urls}} (every node's address): it cannot use several broker nodes", strings.Join(not, ", "))
}

func usesAny(args []Template, env []EnvVar, name string) bool {
	for _, a := range args {
		if a.Uses(name) {
			return true
		}
	}
	for _, e := range env {
		if e.Value.Uses(name) {
			return true
		}
	}
	return false
}

// address reads a host:port template; def on a problem.
func (d *decoder) address(v val, def Template) Template {
	t, ok := d.template(v, scopeProcess)
	if !ok {
		return def
	}
	if t.Raw == "" {
		d.problem(v.line, v.field, "must not be empty (default %s)", def.Raw)
		return def
	}
	if addr, ok := d.render(t); ok {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			d.problem(v.line, v.field, "want host:port, e.g. {{control_addr}}; %q renders to %q", t.Raw, addr)
			return def
		}
	}
	return t
}

func (d *decoder) decodeReady(m *mapping) Ready {
	r := Ready{Timeout: defaultReadyTimeout}
	v, ok := d.require(m, "ready", "how faultline knows the process is up: http, tcp or log")
	if !ok {
		return r
	}
	rm, ok := d.mapping(v, "http", "tcp", "log", "timeout")
	if !ok {
		return r
	}
	given := 0
	for _, k := range []string{"http", "tcp", "log"} {
		if _, ok := rm.get(k); ok {
			given++
		}
	}
	if given != 1 {
		d.problem(v.line, v.field, "give exactly one of http, tcp, log")
	}
	if hv, ok := rm.get("http"); ok {
		if t, ok := d.template(hv, scopeProcess); ok {
			if s, ok := d.render(t); ok {
				if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					d.problem(hv.line, hv.field, "want an http:// URL, e.g. http://{{control_addr}}/healthz; %q renders to %q", t.Raw, s)
				} else {
					r.HTTP = t
				}
			}
		}
	}
	if tv, ok := rm.get("tcp"); ok {
		if t, ok := d.template(tv, scopeProcess); ok {
			if s, ok := d.render(t); ok {
				if _, _, err := net.SplitHostPort(s); err != nil {
					d.problem(tv.line, tv.field, "want host:port, e.g. {{http_addr}}; %q renders to %q", t.Raw, s)
				} else {
					r.TCP = t
				}
			}
		}
	}
	if lv, ok := rm.get("log"); ok {
		if s, ok := d.nonEmpty(lv); ok {
			re, err := regexp.Compile(s)
			if err != nil {
				d.problem(lv.line, lv.field, "bad regexp: %v", err)
			} else {
				r.Log = re
			}
		}
	}
	r.Timeout = d.optDuration(rm, "timeout", defaultReadyTimeout)
	return r
}

func (d *decoder) decodeStop(v val) Stop {
	s := Stop{Signal: syscall.SIGTERM, Timeout: defaultStopTimeout}
	m, ok := d.mapping(v, "signal", "timeout")
	if !ok {
		return s
	}
	if sv, ok := m.get("signal"); ok {
		if name, ok := d.oneOf(sv, "signal", signalNames()); ok {
			s.Signal = signals()[name]
		}
	}
	s.Timeout = d.optDuration(m, "timeout", defaultStopTimeout)
	return s
}

// decodeRestart reads a restart policy: {policy: never|always, backoff:
// duration}, the backoff only with always and at most maxRestartBackoff.
func (d *decoder) decodeRestart(v val) Restart {
	var r Restart
	m, ok := d.mapping(v, "policy", "backoff")
	if !ok {
		return r
	}
	policyKnown := false
	if pv, ok := d.require(m, "policy", RestartNever+" or "+RestartAlways); ok {
		var policy string
		if policy, policyKnown = d.oneOf(pv, "policy", []string{RestartNever, RestartAlways}); policyKnown {
			r.Always = policy == RestartAlways
		}
	}
	bv, given := m.get("backoff")
	if !given {
		if r.Always {
			r.Backoff = defaultRestartBackoff
		}
		return r
	}
	if !r.Always {
		if policyKnown { // else the policy's own problem says it
			d.problem(bv.line, bv.field, "a backoff needs policy: %s", RestartAlways)
		}
		return r
	}
	backoff, ok := d.duration(bv)
	switch {
	case !ok:
		r.Backoff = defaultRestartBackoff
	case backoff > maxRestartBackoff:
		d.problem(bv.line, bv.field, "%s: at most %s between restarts", backoff, maxRestartBackoff)
		r.Backoff = defaultRestartBackoff
	default:
		r.Backoff = backoff
	}
	return r
}

// decodeCrashPoints reads window → point name, checking each window is one
// of the role's (role "" when the role itself is wrong).
func (d *decoder) decodeCrashPoints(v val, role string) map[string]string {
	m, ok := d.mapping(v)
	if !ok {
		return nil
	}
	all := windowNames()
	var mine []string
	for _, w := range protocol.Windows() {
		if w.Role == role {
			mine = append(mine, w.Name)
		}
	}
	points := map[string]string{}
	windowOf := map[string]string{}
	for _, name := range m.keys {
		pv := m.vals[name]
		w, known := protocol.LookupWindow(name)
		switch {
		case !known:
			choices := all
			if role != "" {
				choices = mine
			}
			if s := suggest(name, choices); s != "" {
				d.problem(pv.line, v.field, "%q is not a window (did you mean %s?)", name, s)
			} else if role != "" {
				d.problem(pv.line, v.field, "%q is not a window (%s windows: %s)", name, role, strings.Join(mine, ", "))
			} else {
				d.problem(pv.line, v.field, "%q is not a window (windows: %s)", name, strings.Join(all, ", "))
			}
			continue
		case role != "" && w.Role != role:
			d.problem(pv.line, v.field, "%q is not a %s window (%s windows: %s)", name, role, role, strings.Join(mine, ", "))
			continue
		}
		point, ok := d.nonEmpty(pv)
		if !ok {
			continue
		}
		if other, dup := windowOf[point]; dup {
			d.problem(pv.line, pv.field, "point %q is already the one of window %s", point, other)
			continue
		}
		windowOf[point] = name
		points[name] = point
	}
	if len(points) == 0 {
		return nil
	}
	return points
}

func (d *decoder) decodeWorkload(m *mapping) Workload {
	var w Workload
	v, ok := d.require(m, "workload", "the requests that make one business fact")
	if !ok {
		return w
	}
	wm, ok := d.mapping(v, "create", "steps")
	if !ok {
		return w
	}
	createOK := false
	if cv, ok := d.require(wm, "create", "the request that creates one fact"); ok {
		w.Create, createOK = d.decodeRequest(cv, scopeCreate)
	}
	if sv, ok := wm.get("steps"); ok {
		items, ok := d.seq(sv)
		if ok && len(items) > maxSteps {
			d.problem(sv.line, sv.field, "%d steps: at most %d (they are sent for every fact)", len(items), maxSteps)
			ok = false
		}
		if ok {
			for _, item := range items {
				if r, ok := d.decodeRequest(item, scopeStep); ok {
					w.Steps = append(w.Steps, r)
				}
			}
		}
	}
	if createOK && w.Create.ID == "" {
		for _, s := range w.Steps {
			if s.Path.Uses("id") || s.Body.Uses("id") {
				d.problem(w.Create.Line, join(join(v.field, "create"), "id"),
					"required: steps use {{id}} (line %d); name the JSON field of create's answer that holds the fact's id", s.Line)
				break
			}
		}
	}
	return w
}

// decodeRequest reads one request; ok is false when it has a problem.
func (d *decoder) decodeRequest(v val, s scope) (Request, bool) {
	before := len(d.problems)
	r := Request{Method: "POST", OK: []int{200, 201}, Line: v.line}
	m, ok := d.mapping(v, "method", "path", "body", "headers", "id", "ok", "done")
	if !ok {
		return r, false
	}
	if mv, ok := m.get("method"); ok {
		if method, ok := d.nonEmpty(mv); ok {
			method = strings.ToUpper(method)
			if slices.Contains(methods(), method) {
				r.Method = method
			} else {
				d.problem(mv.line, mv.field, "%q is not a method (methods: %s)", method, strings.Join(methods(), ", "))
			}
		}
	}
	if pv, ok := d.require(m, "path", "the request's path, e.g. /orders"); ok {
		if t, ok := d.template(pv, s); ok {
			if strings.HasPrefix(t.Raw, "/") {
				r.Path = t
			} else {
				d.problem(pv.line, pv.field, "must start with /, got %q", t.Raw)
			}
		}
	}
	if bv, ok := m.get("body"); ok {
		r.Body, _ = d.template(bv, s)
	}
	if hv, ok := m.get("headers"); ok {
		if hm, ok := d.mapping(hv); ok {
			r.Headers = map[string]string{}
			for _, name := range hm.keys {
				if value, ok := d.str(hm.vals[name]); ok {
					r.Headers[name] = value
				}
			}
		}
	}
	if !r.Body.IsZero() && !hasHeader(r.Headers, "Content-Type") {
		if r.Headers == nil {
			r.Headers = map[string]string{}
		}
		r.Headers["Content-Type"] = "application/json"
	}
	if iv, ok := m.get("id"); ok {
		r.ID, _ = d.nonEmpty(iv)
	}
	if ov, ok := m.get("ok"); ok {
		if codes, ok := d.statuses(ov); ok {
			if len(codes) == 0 {
				d.problem(ov.line, ov.field, "must list at least one status")
			} else {
				r.OK = codes
			}
		}
	}
	if dv, ok := m.get("done"); ok {
		if codes, ok := d.statuses(dv); ok {
			for _, c := range codes {
				if slices.Contains(r.OK, c) {
					d.problem(dv.line, dv.field, "status %d is in ok too", c)
				}
			}
			r.Done = codes
		}
	}
	return r, len(d.problems) == before
}

func hasHeader(h map[string]string, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

func (d *decoder) statuses(v val) ([]int, bool) {
	items, ok := d.seq(v)
	if !ok {
		return nil, false
	}
	codes := []int{}
	good := true
	for _, item := range items {
		c, ok := d.integer(item)
		if !ok {
			good = false
			continue
		}
		if c < 100 || c > 599 {
			d.problem(item.line, item.field, "%d is not an HTTP status", c)
			good = false
			continue
		}
		codes = append(codes, c)
	}
	return codes, good
}

func (d *decoder) decodeTopology(m *mapping) Topology {
	var t Topology
	v, ok := d.require(m, "topology", "the broker's exchange, queue and routing keys")
	if !ok {
		return t
	}
	tm, ok := d.mapping(v, "exchange", "queue", "dead_letter_queue", "routing_keys", "event_id")
	if !ok {
		return t
	}
	if ev, ok := d.require(tm, "exchange", "the exchange the relays publish to"); ok {
		t.Exchange, _ = d.nonEmpty(ev)
	}
	if qv, ok := d.require(tm, "queue", "the queue the consumers read"); ok {
		t.Queue, _ = d.nonEmpty(qv)
	}
	if qv, ok := tm.get("dead_letter_queue"); ok {
		t.DeadLetterQueue, _ = d.nonEmpty(qv)
	}
	if ev, ok := tm.get("event_id"); ok {
		if s, ok := d.nonEmpty(ev); ok {
			kind, name, _ := strings.Cut(s, ":")
			switch {
			case s == "message_id":
			case kind == "header" && name != "":
				t.EventID.Header = name
			case kind == "body" && name != "" && !slices.Contains(strings.Split(name, "."), ""):
				t.EventID.Body = name
			default:
				d.problem(ev.line, ev.field, "%q: want message_id, header:NAME or body:PATH (a dotted path into the JSON body, e.g. body:data.id)", s)
			}
		}
	}
	if rv, ok := d.require(tm, "routing_keys", "the events' routing keys"); ok {
		if items, ok := d.seq(rv); ok {
			if len(items) == 0 {
				d.problem(rv.line, rv.field, "must list at least one routing key")
			}
			first := map[string]int{}
			for _, item := range items {
				key, ok := d.nonEmpty(item)
				if !ok {
					continue
				}
				if line, dup := first[key]; dup {
					d.problem(item.line, item.field, "routing key %q given twice (first at line %d)", key, line)
					continue
				}
				first[key] = item.line
				t.RoutingKeys = append(t.RoutingKeys, key)
			}
		}
	}
	return t
}

func (d *decoder) decodeContract(m *mapping, model string) Contract {
	var c Contract
	cv, present := m.get("contract")
	var cm *mapping
	if present {
		var ok bool
		if cm, ok = d.mapping(cv, "facts", "effects", "outbox", "inbox", "held_back", "payload", "inbox_expire", "pending", "inbox_pending"); !ok {
			return c
		}
	}
	// read returns the query the file gives for key (nil when it is
	// broken), and whether it gives one.
	read := func(key string) (*Query, bool) {
		if cm == nil {
			return nil, false
		}
		qv, ok := cm.get(key)
		if !ok {
			return nil, false
		}
		return d.decodeQuery(qv), true
	}

	// needs maps each defaulted query to the database its default reads.
	type need struct{ query, database string }
	var needs []need
	if q, given := read("facts"); given {
		if q != nil {
			c.Facts = *q
		}
	} else {
		c.Facts = Query{Database: defaultFactsDatabase, SQL: defaultFactsSQL, Default: true}
		needs = append(needs, need{"contract.facts", defaultFactsDatabase})
	}
	if q, given := read("effects"); given {
		if q != nil {
			c.Effects = *q
		}
	} else {
		c.Effects = Query{Database: defaultEffectsDatabase, SQL: defaultEffectsSQL, Default: true}
		needs = append(needs, need{"contract.effects", defaultEffectsDatabase})
	}
	if d.databases != nil {
		var missing, queries []string
		for _, n := range needs {
			if !d.databases[n.database] {
				missing, queries = append(missing, n.database), append(queries, n.query)
			}
		}
		if len(missing) > 0 {
			line := cv.line
			if !present {
				line = m.vals["databases"].line
			}
			noun, pronoun := "database", "it"
			if len(missing) > 1 {
				noun, pronoun = "databases", "them"
			}
			d.problem(line, "contract", "the contract defaults need %s %s (declared: %s); declare %s, or write %s",
				noun, strings.Join(missing, " and "), strings.Join(d.dbList, ", "), pronoun, strings.Join(queries, " and "))
		}
	}

	// optional reads an optional query; def, when given, is its default
	// SQL, in database db.
	optional := func(key, db, def string) *Query {
		if q, given := read(key); given {
			return q
		}
		if def == "" || db == "" {
			return nil
		}
		return &Query{Database: db, SQL: def, Default: true}
	}
	c.Outbox = optional("outbox", c.Facts.Database, defaultOutbox(model))
	c.Inbox = optional("inbox", c.Effects.Database, defaultInboxSQL)
	c.HeldBack = optional("held_back", "", "")
	c.Payload = optional("payload", c.Facts.Database, defaultPayloadSQL)
	c.InboxExpire = optional("inbox_expire", c.Effects.Database, defaultInboxExpireSQL)
	c.Pending = optional("pending", "", "")
	c.InboxPending = optional("inbox_pending", "", "")
	return c
}

// decodeQuery reads one query of the contract; nil on a problem.
func (d *decoder) decodeQuery(v val) *Query {
	before := len(d.problems)
	q := &Query{Line: v.line}
	m, ok := d.mapping(v, "database", "sql")
	if !ok {
		return nil
	}
	if dv, ok := d.require(m, "database", "the database the query reads"); ok {
		if db, ok := d.nonEmpty(dv); ok && d.declared(dv.line, dv.field, db) {
			q.Database = db
		}
	}
	if sv, ok := d.require(m, "sql", ""); ok {
		q.SQL, _ = d.nonEmpty(sv)
	}
	if len(d.problems) > before {
		return nil
	}
	return q
}

func (d *decoder) decodeSettings(m *mapping, ps []Process) map[string]Setting {
	v, ok := m.get("settings")
	if !ok {
		return nil
	}
	sm, ok := d.mapping(v)
	if !ok {
		return nil
	}
	roles := map[string]bool{}
	rolesKnown := true
	for _, p := range ps {
		roles[p.Role] = true
		rolesKnown = rolesKnown && p.Role != ""
	}
	settings := map[string]Setting{}
	for _, name := range sm.keys {
		sv := sm.vals[name]
		s := Setting{Name: name, Line: sv.line}
		m, ok := d.mapping(sv, "role", "args", "env", "explore")
		if !ok {
			continue
		}
		if xv, ok := m.get("explore"); ok {
			s.Explore = d.settingExplore(xv)
		}
		if rv, ok := d.require(m, "role", "the role of the processes it applies to"); ok {
			if role, ok := d.oneOf(rv, "role", protocol.Roles()); ok {
				s.Role = role
				if rolesKnown && !roles[role] {
					d.problem(rv.line, rv.field, "no process has role %s", role)
				}
			}
		}
		av, hasArgs := m.get("args")
		if hasArgs {
			s.Args = d.args(av, scopeSetting)
		}
		ev, hasEnv := m.get("env")
		if hasEnv {
			s.Env = d.env(ev, scopeSetting)
		}
		if !hasArgs && !hasEnv {
			d.problem(sv.line, sv.field, "give args or env: how the setting reaches the processes")
		}
		settings[name] = s
	}
	return settings
}

func windowNames() []string {
	var names []string
	for _, w := range protocol.Windows() {
		names = append(names, w.Name)
	}
	return names
}

// settingExplore reads a setting's explore: {value, opens}.
func (d *decoder) settingExplore(v val) *SettingExplore {
	m, ok := d.mapping(v, "value", "opens")
	if !ok {
		return nil
	}
	x := &SettingExplore{}
	if vv, ok := d.require(m, "value", "the value explore turns the setting to"); ok {
		x.Value, _ = d.nonEmpty(vv)
	}
	if ov, ok := d.require(m, "opens", "the windows the setting opens"); ok {
		items, _ := d.seq(ov)
		if ov.n != nil && ov.n.Kind == yaml.SequenceNode && len(items) == 0 {
			d.problem(ov.line, ov.field, "name at least one window")
		}
		for _, item := range items {
			if w, ok := d.oneOf(item, "window", windowNames()); ok {
				x.Opens = append(x.Opens, w)
			}
		}
	}
	return x
}

// entries reads key of m, when given, as a list of mappings of the known
// fields; an item that is not such a mapping is reported and left out.
func (d *decoder) entries(m *mapping, key string, known ...string) []*mapping {
	v, ok := m.get(key)
	if !ok {
		return nil
	}
	items, ok := d.seq(v)
	if !ok {
		return nil
	}
	var out []*mapping
	for _, item := range items {
		if e, ok := d.mapping(item, known...); ok {
			out = append(out, e)
		}
	}
	return out
}

func (d *decoder) decodeVariants(m *mapping) []Variant {
	first := map[string]int{}
	var vs []Variant
	for _, m := range d.entries(m, "variants", "name", "guard", "expect", "caught_by", "env") {
		vr := Variant{Line: m.v.line}
		if nv, ok := d.require(m, "name", ""); ok {
			if name, ok := d.nonEmpty(nv); ok {
				switch line, dup := first[name]; {
				case name == "correct":
					d.problem(nv.line, nv.field, `"correct" names the pipeline without a variant; pick another name`)
				case dup:
					d.problem(nv.line, nv.field, "variant %q given twice (first at line %d)", name, line)
				default:
					first[name] = nv.line
					vr.Name = name
				}
			}
		}
		if gv, ok := d.require(m, "guard", "the guard the variant removes"); ok {
			vr.Guard, _ = d.nonEmpty(gv)
		}
		if ev, ok := d.require(m, "expect", "the violation its missing guard causes"); ok {
			vr.Expect, _ = d.oneOf(ev, "violation kind", expects())
		}
		if cv, ok := d.require(m, "caught_by", "the scenarios that must catch it"); ok {
			if names, ok := d.seq(cv); ok {
				if len(names) == 0 {
					d.problem(cv.line, cv.field, "must name at least one scenario")
				}
				for _, n := range names {
					if s, ok := d.nonEmpty(n); ok {
						vr.CaughtBy = append(vr.CaughtBy, s)
					}
				}
			}
		}
		if ev, ok := m.get("env"); ok {
			vr.Env = d.env(ev, scopeProcess)
		}
		if vr.Name != "" {
			vs = append(vs, vr)
		}
	}
	return vs
}

// maxCause bounds a known finding's cause: a sentence or a short
// paragraph, printed in the gate's summary and the report.
const maxCause = 2000

func (d *decoder) decodeKnownFindings(m *mapping) []KnownFinding {
	first := map[string]int{}
	var out []KnownFinding
	for _, m := range d.entries(m, "known_findings", "scenario", "violations", "cause") {
		k := KnownFinding{Line: m.v.line}
		if sv, ok := d.require(m, "scenario", "the scenario that shows the finding"); ok {
			const what = "a scenario name (lowercase letters, digits and -, from a letter, at most 100)"
			if name, ok := d.matching(sv, scenarioName, what); ok {
				if line, dup := first[name]; dup {
					d.problem(sv.line, sv.field, "known finding of scenario %q given twice (first at line %d): list every kind it shows in one entry", name, line)
				} else {
					first[name] = sv.line
					k.Scenario = name
				}
			}
		}
		if vv, ok := d.require(m, "violations", "the violation kinds the finding shows"); ok {
			k.Violations = d.kinds(vv)
		}
		if cv, ok := d.require(m, "cause", "the behaviour of the pipeline or its library the finding comes from"); ok {
			k.Cause = d.cause(cv)
		}
		if k.Scenario != "" && len(k.Violations) > 0 && k.Cause != "" {
			out = append(out, k)
		}
	}
	return out
}

// kinds reads a non-empty list of violation kinds, each once.
func (d *decoder) kinds(v val) []string {
	items, ok := d.seq(v)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.problem(v.line, v.field, "must name at least one violation kind (%s)", strings.Join(expects(), ", "))
		return nil
	}
	var kinds []string
	bad := false
	for _, item := range items {
		kind, ok := d.oneOf(item, "violation kind", expects())
		switch {
		case !ok:
			bad = true
		case slices.Contains(kinds, kind):
			d.problem(item.line, item.field, "violation kind %q given twice", kind)
			bad = true
		default:
			kinds = append(kinds, kind)
		}
	}
	if bad {
		return nil
	}
	return kinds
}

// cause reads a known finding's cause: text for a person, bounded, without
// control characters (it is printed on a terminal), its spaces trimmed.
func (d *decoder) cause(v val) string {
	s, ok := d.nonEmpty(v)
	if !ok {
		return ""
	}
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		d.problem(v.line, v.field, "must not be empty")
		return ""
	case len(s) > maxCause:
		d.problem(v.line, v.field, "%d bytes: at most %d (say the cause in a sentence or two; the details belong in the pipeline's README)", len(s), maxCause)
		return ""
	case !utf8.ValidString(s):
		d.problem(v.line, v.field, "not valid UTF-8")
		return ""
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		d.problem(v.line, v.field, "control character %U at byte %d: the cause is printed on a terminal", r, i)
		return ""
	}
	return s
}
