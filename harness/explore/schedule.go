package explore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
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
	// Invariants are the optional invariants the run is judged by besides
	// the always-on ones (none-gave-up: the schedule's outage is one the
	// target rides out, so no row may end Failed).
	Invariants []string
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
	Invariants []string          `json:"invariants,omitempty"`
	// NoneFailed is how files written before Invariants said none-gave-up:
	// read, never written.
	NoneFailed bool   `json:"none_failed,omitempty"`
	Faults     []Spec `json:"faults"`
	Violation  string `json:"violation,omitempty"`
	Origin     string `json:"origin,omitempty"`
}

// workloadSpec is a workload.Spec as data.
type workloadSpec struct {
	Orders         int      `json:"orders"`
	Concurrency    int      `json:"concurrency,omitempty"`
	EventsPerOrder int      `json:"events_per_order,omitempty"`
	Pace           Duration `json:"pace,omitempty"`
	StepDelay      Duration `json:"step_delay,omitempty"`
	AfterFaults    int      `json:"after_faults,omitempty"`
	// Profile and Hold are the traffic's profile and the backlog it piles
	// up (workload.Spec): a backlog's schedule runs under its backlog.
	Profile string       `json:"profile,omitempty"`
	Hold    *holdSpec    `json:"hold,omitempty"`
	Sustain *sustainSpec `json:"sustain,omitempty"`
}

// sustainSpec is a workload.Sustain as data.
type sustainSpec struct {
	Share float64  `json:"share"`
	For   Duration `json:"for"`
}

// holdSpec is a workload.Hold as data.
type holdSpec struct {
	Role    string `json:"role"`
	Backlog int    `json:"backlog"`
}

// MarshalJSON implements json.Marshaler.
func (s Schedule) MarshalJSON() ([]byte, error) {
	specs, err := Specs(s.Faults)
	if err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	return json.Marshal(scheduleFile{
		Schema: ScheduleSchema, Target: s.Target, Variant: variantName(s.Variant), Seed: s.Seed,
		Workload: workloadData(s.Workload),
		Settings: s.Settings, Instances: s.Instances, Invariants: s.Invariants, Faults: specs, Violation: s.Violation, Origin: s.Origin,
	})
}

// UnmarshalJSON implements json.Unmarshaler: unknown fields, another
// schema and faults that do not make sense are errors.
func (s *Schedule) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	// The faults are read one by one, so an error names the fault.
	var f struct {
		scheduleFile
		Faults []json.RawMessage `json:"faults"`
	}
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
	specs := make([]Spec, len(f.Faults))
	for i, raw := range f.Faults {
		if err := json.Unmarshal(raw, &specs[i]); err != nil {
			return fmt.Errorf("schedule: fault %d: %w", i+1, err)
		}
	}
	faults, err := Faults(specs)
	if err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	if err := fault.CheckOrder(faults); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	invariants := f.Invariants
	if f.NoneFailed && !slices.Contains(invariants, check.NoneGaveUp) {
		invariants = append(invariants, check.NoneGaveUp)
	}
	if err := check.ValidateOptional(invariants); err != nil {
		return fmt.Errorf("schedule: invariants: %w", err)
	}
	wl := workload.Spec{Orders: f.Workload.Orders, Concurrency: f.Workload.Concurrency, EventsPerOrder: f.Workload.EventsPerOrder,
		Pace: time.Duration(f.Workload.Pace), StepDelay: time.Duration(f.Workload.StepDelay), AfterFaults: f.Workload.AfterFaults,
		Profile: f.Workload.Profile}
	if h := f.Workload.Hold; h != nil {
		wl.Hold = &workload.Hold{Role: h.Role, Backlog: h.Backlog}
	}
	if u := f.Workload.Sustain; u != nil {
		wl.Sustain = &workload.Sustain{Share: u.Share, For: time.Duration(u.For)}
	}
	if err := wl.Validate(); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	*s = Schedule{Target: f.Target, Variant: f.Variant, Seed: f.Seed,
		Workload: wl,
		Settings: f.Settings, Instances: f.Instances, Invariants: invariants, Faults: faults, Violation: f.Violation, Origin: f.Origin}
	return nil
}

// workloadData is w as data.
func workloadData(w workload.Spec) workloadSpec {
	d := workloadSpec{Orders: w.Orders, Concurrency: w.Concurrency, EventsPerOrder: w.EventsPerOrder,
		Pace: Duration(w.Pace), StepDelay: Duration(w.StepDelay), AfterFaults: w.AfterFaults, Profile: w.Profile}
	if w.Hold != nil {
		d.Hold = &holdSpec{Role: w.Hold.Role, Backlog: w.Hold.Backlog}
	}
	if w.Sustain != nil {
		d.Sustain = &sustainSpec{Share: w.Sustain.Share, For: Duration(w.Sustain.For)}
	}
	return d
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
		if n, ok := f.(fault.Needs); ok && (slices.Contains(n.Needs(), fault.CapBrokerRestart) || slices.Contains(n.Needs(), fault.CapDatabaseRestart)) {
			exclusive = true // it restarts the shared broker or database: it runs alone
		}
	}
	// The schedule opens the window of its first fault that opens one.
	window := ""
	for _, f := range faults {
		if k, ok := fault.KindOf(f); ok {
			if _, w := k.Window(f); w != "" {
				window = w
				break
			}
		}
	}
	desc := "A schedule written by faultline explore"
	if s.Origin != "" {
		desc += ": " + s.Origin
	}
	if s.Violation != "" {
		desc += " (fails with " + s.Violation + ")"
	}
	return runner.Scenario{
		Name: name, Window: window, Description: desc,
		Workload: s.Workload, Settings: s.Settings, Instances: s.Instances, Exclusive: exclusive, Invariants: s.Invariants,
		Faults: func(*rand.Rand) []fault.Fault { return slices.Clone(faults) },
	}
}

// key is the schedule's identity for the shrinker's memory: what it runs.
func (s Schedule) key() string {
	data, err := json.Marshal(struct {
		W workloadSpec
		S map[string]string
		I []string
		F []Spec
	}{S: s.Settings, I: s.Invariants, W: workloadData(s.Workload), F: mustSpecs(s.Faults)})
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
