package explore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/workload"
)

// ScheduleSchema is the version of a schedule file.
const ScheduleSchema = "github.com/faultline-dev/faultline/schedule/v1"

// Schedule is one run as data: what explore ran, or shrank a failure to,
// and what `faultline run --schedule FILE` replays.
type Schedule struct {
	Target    string
	Variant   string // "" or "correct": the correct pipeline
	Seed      int64
	Workload  workload.Spec
	Settings  map[string]string
	Instances map[string]int
	// NoneFailed: the schedule's outage is one the target rides out, so no
	// row may end Failed (the none-gave-up check).
	NoneFailed bool
	Faults     []fault.Fault
	// Violation is the kind of violation the schedule fails with (a
	// finding's); empty for a schedule not known to fail.
	Violation string
	// Origin says where the schedule comes from, e.g. "explore run #12,
	// shrunk in 4 steps".
	Origin string
}

// scheduleFile is a Schedule as written.
type scheduleFile struct {
	Schema     string            `json:"schema"`
	Target     string            `json:"target"`
	Variant    string            `json:"variant"`
	Seed       int64             `json:"seed"`
	Workload   workloadSpec      `json:"workload"`
	Settings   map[string]string `json:"settings,omitempty"`
	Instances  map[string]int    `json:"instances,omitempty"`
	NoneFailed bool              `json:"none_failed,omitempty"`
	Faults     []Spec            `json:"faults"`
	Violation  string            `json:"violation,omitempty"`
	Origin     string            `json:"origin,omitempty"`
}

// workloadSpec is a workload.Spec as data.
type workloadSpec struct {
	Orders         int      `json:"orders"`
	Concurrency    int      `json:"concurrency,omitempty"`
	EventsPerOrder int      `json:"events_per_order,omitempty"`
	Pace           Duration `json:"pace,omitempty"`
	StepDelay      Duration `json:"step_delay,omitempty"`
}

// MarshalJSON implements json.Marshaler.
func (s Schedule) MarshalJSON() ([]byte, error) {
	specs, err := Specs(s.Faults)
	if err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	return json.Marshal(scheduleFile{
		Schema: ScheduleSchema, Target: s.Target, Variant: variantName(s.Variant), Seed: s.Seed,
		Workload: workloadSpec{Orders: s.Workload.Orders, Concurrency: s.Workload.Concurrency, EventsPerOrder: s.Workload.EventsPerOrder,
			Pace: Duration(s.Workload.Pace), StepDelay: Duration(s.Workload.StepDelay)},
		Settings: s.Settings, Instances: s.Instances, NoneFailed: s.NoneFailed, Faults: specs, Violation: s.Violation, Origin: s.Origin,
	})
}

// UnmarshalJSON implements json.Unmarshaler: unknown fields, another
// schema and faults that do not make sense are errors.
func (s *Schedule) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f scheduleFile
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	if f.Schema != ScheduleSchema {
		return fmt.Errorf("schedule: schema %q, want %q", f.Schema, ScheduleSchema)
	}
	if f.Target == "" {
		return fmt.Errorf("schedule: no target name")
	}
	if f.Workload.Orders < 1 {
		return fmt.Errorf("schedule: workload needs at least 1 order, got %d", f.Workload.Orders)
	}
	faults, err := Faults(f.Faults)
	if err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	*s = Schedule{Target: f.Target, Variant: f.Variant, Seed: f.Seed,
		Workload: workload.Spec{Orders: f.Workload.Orders, Concurrency: f.Workload.Concurrency, EventsPerOrder: f.Workload.EventsPerOrder,
			Pace: time.Duration(f.Workload.Pace), StepDelay: time.Duration(f.Workload.StepDelay)},
		Settings: f.Settings, Instances: f.Instances, NoneFailed: f.NoneFailed, Faults: faults, Violation: f.Violation, Origin: f.Origin}
	return nil
}

// WriteSchedule writes the schedule file at path.
func WriteSchedule(path string, s Schedule) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write schedule: %w", err)
	}
	return nil
}

// LoadSchedule reads the schedule file at path.
func LoadSchedule(path string) (Schedule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Schedule{}, fmt.Errorf("read schedule: %w", err)
	}
	var s Schedule
	if err := json.Unmarshal(data, &s); err != nil {
		return Schedule{}, fmt.Errorf("schedule %s: %w", path, err)
	}
	return s, nil
}

// Scenario is the schedule as a scenario the runner runs: its workload,
// settings and instances, and its faults, the same for every seed. It asks
// for no evidence: whether each fault happened is in the result.
func (s Schedule) Scenario(name string) runner.Scenario {
	faults := slices.Clone(s.Faults)
	exclusive := false
	for _, f := range faults {
		if n, ok := f.(fault.Needs); ok && slices.Contains(n.Needs(), fault.CapBrokerRestart) {
			exclusive = true // it restarts the shared broker: it runs alone
		}
	}
	window := "explored schedule"
	if s.Violation != "" {
		window += " (fails with " + s.Violation + ")"
	}
	desc := "A schedule written by faultline explore"
	if s.Origin != "" {
		desc += ": " + s.Origin
	}
	return runner.Scenario{
		Name: name, Window: window, Description: desc,
		Workload: s.Workload, Settings: s.Settings, Instances: s.Instances, Exclusive: exclusive, NoneFailed: s.NoneFailed,
		Faults: func(*rand.Rand) []fault.Fault { return slices.Clone(faults) },
	}
}

// key is the schedule's identity for the shrinker's memory: what it runs.
func (s Schedule) key() string {
	data, err := json.Marshal(struct {
		W workloadSpec
		S map[string]string
		N bool
		F []Spec
	}{S: s.Settings, N: s.NoneFailed, W: workloadSpec{s.Workload.Orders, s.Workload.Concurrency, s.Workload.EventsPerOrder, Duration(s.Workload.Pace), Duration(s.Workload.StepDelay)}, F: mustSpecs(s.Faults)})
	if err != nil {
		return fmt.Sprint(s.Workload, s.Faults)
	}
	return string(data)
}

func mustSpecs(faults []fault.Fault) []Spec {
	specs, err := Specs(faults)
	if err != nil {
		return nil
	}
	return specs
}

func variantName(v string) string {
	if v == "" {
		return "correct"
	}
	return v
}
