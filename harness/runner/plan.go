package runner

import (
	"errors"
	"fmt"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/target"
)

// Plan is a scenario compiled for one target, one seed and what the
// infrastructure can do: what a run executes. The catalogue's scenario is
// never changed; the run reads its plan.
type Plan struct {
	// Scenario is the scenario as it runs on the target: its traffic the
	// seed's, its settings resolved, its window re-timed for the target's
	// relay, the evidence its traffic's shape needs first.
	Scenario Scenario
	// Fitted says how the scenario was fitted to the target ("" as written).
	Fitted string
	// Faults is the seed's schedule, in order.
	Faults []fault.Fault
	// Needs are what the faults need of the infrastructure (fault.Cap...).
	Needs []string
	// NotOffered are the faults of a scenario whose faults are optional
	// that the target does not offer, left out of Faults.
	NotOffered []result.Fault
	// Observe are the sources the run watches from outside: what its
	// faults are timed by and its evidence is read from.
	Observe map[history.Source]bool

	instances []instance // the run's process instances, in start order
	// env is what the target file and the infrastructure give a fault
	// (its roles, the instances' cluster nodes, the contract, ...): what
	// Compile judged the faults against, and what the run's environment
	// starts from.
	env fault.Env
}

// Capabilities are what the run's infrastructure can do, as Compile needs
// them.
type Capabilities struct {
	// Provider names the infrastructure's provider (local, docker, ...).
	Provider string
	// BrokerRestart and DatabaseRestart: the provider can restart the
	// broker, a database server.
	BrokerRestart, DatabaseRestart bool
	// Apart says why the run got no infrastructure of its own where its
	// faults need one (a clustered broker, a database with a standby);
	// nil when it got one, or needs none.
	Apart error
	// Infra is the run's infrastructure, which the faults' requirements
	// are checked against (its nodes, its standby); nil: one broker node,
	// no standby. Compile only asks it what it is.
	Infra infra.Infra
}

// scheduleNeeds are what the schedule of sc, as it runs on t at seed,
// needs of the infrastructure: the plan's needs, compiled as if the
// infrastructure could do anything, so that the infrastructure a run is
// given follows the faults fitted to the target, not the catalogue's. A
// scenario the target cannot run at all needs what its catalogue
// schedule does (provision says why it is not run).
func scheduleNeeds(sc Scenario, t *target.Target, seed int64) []string {
	p, err := Compile(sc, t, Capabilities{Provider: "any", BrokerRestart: true, DatabaseRestart: true}, seed)
	if err != nil {
		return needs(sc.Schedule(seed))
	}
	return p.Needs
}

// NotRunError is Compile's answer for a scenario the target or the
// infrastructure cannot run: not a failure of the scenario, a reason
// ("not run on target ...: ...", "not run: needs ...").
type NotRunError struct{ Why string }

func (e *NotRunError) Error() string { return e.Why }

// notRun is a NotRunError, formatted.
func notRun(format string, args ...any) error {
	return &NotRunError{Why: fmt.Sprintf(format, args...)}
}

// IsNotRun reports whether err says the scenario is not run.
func IsNotRun(err error) bool {
	var nr *NotRunError
	return errors.As(err, &nr)
}

// Compile compiles sc for the target t, the seed's draws and the
// infrastructure's capabilities caps. It does no I/O. An error is a
// NotRunError where the target or the infrastructure cannot run the
// scenario, and a fault of the scenario itself otherwise.
func Compile(sc Scenario, t *target.Target, caps Capabilities, seed int64) (Plan, error) {
	if err := check.ValidateOptional(sc.Invariants); err != nil {
		return Plan{}, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	drawn := sc
	drawn.Workload, drawn.Also = sc.TrafficFor(seed), nil
	on, how, err := drawn.On(t)
	if err != nil {
		return Plan{}, notRun("not run on target %s: %v", t.Name, err)
	}
	if err := on.Workload.Validate(); err != nil {
		return Plan{}, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	on.Evidence = append(trafficEvidence(on.Workload), on.Evidence...)
	p := Plan{Scenario: on, Fitted: how, Faults: on.Schedule(seed)}
	if err := fault.CheckOrder(p.Faults); err != nil {
		return Plan{}, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	p.Needs = needs(p.Faults)
	for _, need := range p.Needs {
		switch {
		case need == fault.CapBrokerRestart && !caps.BrokerRestart:
			return Plan{}, notRun("not run: needs a broker restart, which the %s provider cannot do", caps.Provider)
		case need == fault.CapDatabaseRestart && !caps.DatabaseRestart:
			return Plan{}, notRun("not run: needs a database restart, which the %s provider cannot do", caps.Provider)
		case (need == fault.CapStandby || need == fault.CapStandbySync) && caps.Apart != nil:
			return Plan{}, notRun("not run: needs a database with a standby, which the %s provider does not give: %v", caps.Provider, caps.Apart)
		case need == fault.CapCluster:
			if why := t.TakesBrokerNodes(); why != "" {
				return Plan{}, notRun("not run on target %s: needs a clustered broker, and %s", t.Name, why)
			}
			if caps.Apart != nil {
				return Plan{}, notRun("not run: needs a clustered broker, which the %s provider does not give: %v", caps.Provider, caps.Apart)
			}
		}
	}
	// The schedule as the target can show it, judged by what the target
	// file gives (its processes, crash points, links, contract): no
	// process runs yet.
	p.instances = planInstances(t, on.Instances)
	p.env = fault.Env{Roles: fault.NewRoles(faultInstances(p.instances)), Infra: caps.Infra, ClientNodes: nodesOf(caps.Infra, p.instances),
		Contract: t.Contract, Topology: t.Topology, Observe: t.Observe, Lease: t.Lease, RelayModel: t.RelayModel()}
	env := &p.env
	logs := logRoles(env.Roles, p.instances)
	p.Faults, p.Scenario.Evidence = forTarget(t, env, p.instances, logs, p.Faults, p.Scenario.Evidence)
	if on.FaultsOptional {
		p.Faults, p.NotOffered = offered(env, p.Faults)
	}
	if why := unsupported(t, p.Scenario, env, p.Faults, logs); why != "" {
		return Plan{}, notRun("not run on target %s: %s", t.Name, why)
	}
	p.Observe = observeNeeds(p.Scenario.Evidence, p.Faults)
	return p, nil
}
