package runner

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/observe"
	"github.com/faultline-dev/faultline/harness/ports"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/proxies"
)

// instance is one process instance of the target in a run.
type instance struct {
	proc target.Process
	name string // e.g. relay-2
	// control and http are the loopback addresses handed to it
	// ({{control_addr}}, {{http_addr}}), the same across restarts.
	control, http string
}

// startOrder is the order roles start in: the consumers declare the queue.
var startOrder = []string{protocol.Consumer, protocol.Relay, protocol.Producer}

// planInstances lists a run's instances on t, consumers first, then
// relays, then producers, each role in the target file's order. A scenario
// may run a role with another instance count than the file's (counts).
func planInstances(t *target.Target, counts map[string]int) []instance {
	var out []instance
	for _, role := range startOrder {
		for _, p := range t.Processes {
			if p.Role != role {
				continue
			}
			if n, ok := counts[role]; ok && n > 0 {
				p.Instances = n
			}
			for _, name := range t.Instances(p) {
				out = append(out, instance{proc: p, name: name})
			}
		}
	}
	return out
}

// addresses picks the loopback addresses the instance keeps across its
// restarts, from the shared allocator (never a port another run's process
// or link may be given).
func (in *instance) addresses(alloc *ports.Allocator) error {
	var err error
	if in.control, err = alloc.Addr(); err != nil {
		return err
	}
	in.http, err = alloc.Addr()
	return err
}

// logRoles are the roles every instance of which writes an event log.
func (r *run) logRoles() map[string]bool { return logRoles(r.roles, r.instances) }

// logRoles are the roles every one of the instances of which writes an
// event log.
func logRoles(roles *fault.Roles, instances []instance) map[string]bool {
	out := map[string]bool{}
	for _, role := range protocol.Roles() {
		all := roles.Count(role) > 0
		for _, in := range instances {
			if in.proc.Role == role && !in.proc.EventLog {
				all = false
			}
		}
		out[role] = all
	}
	return out
}

// faultInstances are the instances as the faults name them.
func faultInstances(instances []instance) []fault.Instance {
	out := make([]fault.Instance, 0, len(instances))
	for _, in := range instances {
		out = append(out, fault.Instance{Name: in.name, Role: in.proc.Role, Points: in.proc.CrashPoints, EventLog: in.proc.EventLog})
	}
	return out
}

// unsupported says why the scenario cannot run on this target ("" if it
// can): a crash point, instance, link, setting, query or event log it needs
// and the target does not give. Such a scenario is not run — never passed.
func unsupported(t *target.Target, sc Scenario, env *fault.Env, faults []fault.Fault, logs map[string]bool) string {
	var why []string
	for _, f := range faults {
		if req, ok := f.(fault.Requirer); ok {
			if err := req.Require(env); err != nil {
				why = append(why, err.Error())
			}
		}
	}
	for name := range sc.Settings {
		if _, ok := t.Settings[name]; !ok {
			why = append(why, fmt.Sprintf("the target offers no setting %q", name))
		}
	}
	if steps := sc.Workload.EventsPerOrder - 1; steps > len(t.Workload.Steps) {
		why = append(why, fmt.Sprintf("the workload needs %d follow-up steps per fact, the target file gives %d", steps, len(t.Workload.Steps)))
	}
	for _, e := range sc.Evidence {
		if e.Optional {
			continue // not checked where the target does not give its needs
		}
		for _, need := range e.Needs {
			// The sources a run reads at its end; the ones watched while
			// it runs are refused at its start if they cannot be installed.
			if observe.WhenRead(need) == observe.AtEnd && !observe.Offers(t, logs, need) {
				why = append(why, fmt.Sprintf("evidence %q needs %s", e.Name, need))
			}
		}
	}
	slices.Sort(why)
	return strings.Join(slices.Compact(why), "; ")
}

// values are what the run hands the instance.
func (r *run) values(in *instance) target.Values {
	t := r.sh.Target
	variant := r.opts.Variant
	if variant == "" {
		variant = "correct"
	}
	pgLink, amqpLink := r.links[fault.DBLink(in.name)], r.links[fault.BrokerLink(in.name)]
	eventLog := os.DevNull // what the process writes there is not read
	if in.proc.EventLog && r.sup != nil {
		eventLog = r.sup.EventLogPath(in.name)
	}
	return target.Values{
		Postgres: func(db string) (string, error) {
			run, ok := r.dbs[db]
			if !ok {
				return "", fmt.Errorf("no database %q in the target file", db)
			}
			return viaLink(r.sh.Infra.PostgresURL(run), pgLink, in.name), nil
		},
		AMQP:        viaLink(r.sh.Infra.AMQPURL(r.id), amqpLink, ""),
		AMQPURLs:    r.amqpURLs(in.name, amqpLink),
		ControlAddr: in.control,
		HTTPAddr:    in.http,
		Instance:    in.name,
		EventLog:    eventLog,
		Variant:     variant,
		BuildDir:    r.sh.BuildDir,
		TargetDir:   t.Dir,
		Slot:        r.slot(),
		Publication: r.publication(),
	}
}

// amqpURLs are the run's vhost on every broker node, through the
// instance's links, its own node first; "" on one node ({{amqp_urls}} is
// then {{amqp}}).
func (r *run) amqpURLs(instance string, own *proxies.Link) string {
	c, ok := r.sh.Infra.(infra.Cluster)
	if !ok || r.clientNodes == nil {
		return ""
	}
	urls := []string{viaLink(r.sh.Infra.AMQPURL(r.id), own, "")}
	for k := range c.Nodes() {
		if k == r.clientNodes[instance] {
			continue
		}
		if l, ok := r.links[fault.NodeLink(instance, k)]; ok {
			urls = append(urls, viaLink(c.AMQPURLOf(k, r.id), l, ""))
		}
	}
	return strings.Join(urls, ",")
}

// spec renders the instance's supervisor spec: its command, environment
// (the variant's, the scenario's settings, crash points armed at start),
// readiness and stop.
func (r *run) spec(in instance, faults []fault.Fault) (supervisor.Spec, error) {
	t := r.sh.Target
	var err error
	vals := r.values(&in)
	render := func(tpl target.Template) (string, error) {
		out, err := tpl.Render(vals)
		if err != nil {
			return "", fmt.Errorf("%s: %w", in.name, err)
		}
		return out, nil
	}
	spec := supervisor.Spec{Name: in.name, Role: in.proc.Role, Dir: t.Dir,
		Ready:   supervisor.Ready{Log: in.proc.Ready.Log, Timeout: in.proc.Ready.Timeout},
		Stop:    supervisor.Stop{Signal: in.proc.Stop.Signal, Timeout: in.proc.Stop.Timeout},
		Restart: supervisor.Restart{Always: in.proc.Restart.Always, Backoff: in.proc.Restart.Backoff}}
	for _, a := range in.proc.Command {
		s, err := render(a)
		if err != nil {
			return spec, err
		}
		spec.Command = append(spec.Command, s)
	}
	addEnv := func(vars []target.EnvVar, v target.Values) error {
		for _, e := range vars {
			s, err := e.Value.Render(v)
			if err != nil {
				return fmt.Errorf("%s: %w", in.name, err)
			}
			spec.Env = append(spec.Env, e.Name+"="+s)
		}
		return nil
	}
	if err := addEnv(in.proc.Env, vals); err != nil {
		return spec, err
	}
	if v, ok := t.Variant(r.opts.Variant); ok {
		if err := addEnv(v.Env, vals); err != nil {
			return spec, err
		}
	}
	names := make([]string, 0, len(r.plan.Scenario.Settings))
	for name := range r.plan.Scenario.Settings {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		set := t.Settings[name]
		if set.Role != in.proc.Role {
			continue
		}
		sv := vals
		sv.Value = r.plan.Scenario.Settings[name]
		for _, a := range set.Args {
			s, err := a.Render(sv)
			if err != nil {
				return spec, fmt.Errorf("%s: setting %s: %w", in.name, name, err)
			}
			spec.Command = append(spec.Command, s)
		}
		if err := addEnv(set.Env, sv); err != nil {
			return spec, err
		}
	}
	var arms []string
	for _, f := range faults {
		a, ok := f.(fault.StartArmer)
		if !ok {
			continue
		}
		ref, window, arming, ok := a.StartArming()
		if !ok {
			continue
		}
		target, err := r.roles.Instance(ref)
		if err != nil || target.Name != in.name {
			continue
		}
		own, err := r.roles.Point(ref, window)
		if err != nil {
			return spec, err
		}
		arms = append(arms, own+"="+arming)
	}
	if len(arms) > 0 {
		spec.Env = append(spec.Env, protocol.EnvCrashPoints+"="+strings.Join(arms, ","))
	}
	if in.proc.EventLog {
		spec.EventLog = vals.EventLog
	}
	if len(in.proc.CrashPoints) > 0 {
		if spec.Control, err = render(in.proc.Control); err != nil {
			return spec, err
		}
	}
	if !in.proc.Ready.HTTP.IsZero() {
		if spec.Ready.HTTP, err = render(in.proc.Ready.HTTP); err != nil {
			return spec, err
		}
	}
	if !in.proc.Ready.TCP.IsZero() {
		if spec.Ready.TCP, err = render(in.proc.Ready.TCP); err != nil {
			return spec, err
		}
	}
	return spec, nil
}

// producerAddr is where the workload sends its next request: the
// producers' HTTP addresses in turn, skipping one that is down; "" while
// none runs.
func (r *run) producerAddr() func() string {
	type producer struct {
		name, addr string
	}
	var ps []producer
	for _, in := range r.instances {
		if in.proc.Role != protocol.Producer {
			continue
		}
		addr, err := in.proc.HTTP.Render(r.values(&in))
		if err != nil {
			continue
		}
		ps = append(ps, producer{in.name, addr})
	}
	var next atomic.Uint64
	return func() string {
		for range len(ps) {
			p := ps[int(next.Add(1)-1)%len(ps)]
			if proc, ok := r.sup.Process(p.name); ok && proc.Running() {
				return p.addr
			}
		}
		return ""
	}
}

// applySchema makes the target's tables in the run's fresh databases:
// nothing when its processes create them, else its SQL files or its
// commands (with direct, unproxied URLs).
func applySchema(ctx context.Context, t *target.Target, pools map[string]*pgxpool.Pool, vals target.Values) error {
	if t.Schema.CreatedByProcesses {
		return nil
	}
	dbs := make([]string, 0, len(t.Schema.SQL))
	for db := range t.Schema.SQL {
		dbs = append(dbs, db)
	}
	slices.Sort(dbs)
	for _, db := range dbs {
		path := t.Schema.SQL[db]
		sql, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("schema of %s: %w", db, err)
		}
		if _, err := pools[db].Exec(ctx, string(sql)); err != nil {
			return fmt.Errorf("schema of %s (%s): %w", db, path, err)
		}
	}
	for i, cmd := range t.Schema.Commands {
		var args []string
		for _, a := range cmd {
			s, err := a.Render(vals)
			if err != nil {
				return fmt.Errorf("schema command %d: %w", i+1, err)
			}
			args = append(args, s)
		}
		if err := runCommand(ctx, t.Dir, args, nil, 2*time.Minute); err != nil {
			return fmt.Errorf("schema command %d: %w", i+1, err)
		}
	}
	return nil
}

// runCommand runs args in dir and fails with its output. The timeout
// holds whatever the command leaves behind (supervisor.RunCommand: its
// process group is killed, its output pipe not waited on, its descendants
// found by their run mark).
func runCommand(ctx context.Context, dir string, args, env []string, timeout time.Duration) error {
	return supervisor.RunCommand(ctx, supervisor.Command{Args: args, Env: env, Dir: dir, Timeout: timeout})
}

// Build runs the target's build step into buildDir (its {{build_dir}}).
func Build(ctx context.Context, t *target.Target, buildDir string) error {
	if t.Build == nil {
		return nil
	}
	vals := target.Values{BuildDir: buildDir, TargetDir: t.Dir}
	var args, env []string
	for _, a := range t.Build.Args {
		s, err := a.Render(vals)
		if err != nil {
			return fmt.Errorf("build: %w", err)
		}
		args = append(args, s)
	}
	for _, e := range t.Build.Env {
		s, err := e.Value.Render(vals)
		if err != nil {
			return fmt.Errorf("build: %w", err)
		}
		env = append(env, e.Name+"="+s)
	}
	if err := runCommand(ctx, t.Dir, args, env, t.Build.Timeout); err != nil {
		return fmt.Errorf("build target %s: %w", t.Name, err)
	}
	return nil
}
