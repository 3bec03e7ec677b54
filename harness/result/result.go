// Package result is the data a scenario run leaves behind: plain values
// with JSON tags, rendered by reports/ and aggregated by the gate. Nothing
// here runs anything.
package result

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Schema is the version of the results.json contract.
const Schema = "github.com/faultline-dev/faultline/results/v1"

// Verdicts of a run, as Jepsen's checkers give them (valid true / false /
// unknown).
const (
	// Pass: every fault happened and every invariant held.
	Pass = "pass"
	// Fail: an invariant was violated.
	Fail = "fail"
	// Indeterminate: the run shows nothing about the pipeline — a fault
	// never happened or its window did not show, the infrastructure died,
	// faultline itself erred, or the run was interrupted. Never a pass; the
	// gate runs it again.
	Indeterminate = "indeterminate"
	// NotRun: the target does not offer what the scenario needs.
	NotRun = "not-run"
)

// Interrupted is the reason of a run cut short by an interrupt.
const Interrupted = "interrupted"

// Scenario is the outcome of one scenario on one variant with one seed.
type Scenario struct {
	Name       string      `json:"name"`
	Variant    string      `json:"variant"`
	Seed       int64       `json:"seed"`
	Window     string      `json:"window,omitempty"`
	Verdict    string      `json:"verdict"`
	Reason     string      `json:"reason,omitempty"` // why it failed or was not run, in one line
	Counts     Counts      `json:"counts"`
	Faults     []Fault     `json:"faults"`
	Evidence   []Evidence  `json:"evidence"`
	Invariants []Invariant `json:"invariants"`
	RecoveryMS int64       `json:"recovery_ms"` // -1: never converged
	DurationMS int64       `json:"duration_ms"`
	Started    time.Time   `json:"started"`
	Dir        string      `json:"dir,omitempty"` // where its logs were kept
	// Attempt numbers the runs of one scenario on one variant when the
	// gate ran it again after an indeterminate run (1: the first; 0: never
	// retried).
	Attempt  int       `json:"attempt,omitempty"`
	Phases   []Phase   `json:"phases,omitempty"`
	Timeline *Timeline `json:"timeline,omitempty"`
}

// Counts are what the checker measured.
type Counts struct {
	Orders              int `json:"orders"`               // committed orders
	Events              int `json:"events"`               // committed events (created, paid, cancelled)
	Published           int `json:"published"`            // publish calls
	Confirmed           int `json:"confirmed"`            // positive confirms
	Returned            int `json:"returned"`             // basic.returns
	Nacked              int `json:"nacked"`               // broker nacks
	Unknown             int `json:"unknown_outcomes"`     // confirms never seen
	Retries             int `json:"retries"`              // retry-scheduled writes
	Failed              int `json:"failed"`               // rows Failed with an alert
	Delivered           int `json:"delivered"`            // deliveries to the consumer
	Redelivered         int `json:"redelivered"`          // deliveries flagged redelivered
	DeadLettered        int `json:"dead_lettered"`        // poison dead-lettered
	Reservations        int `json:"reservations"`         // effect rows
	DuplicatesPublished int `json:"duplicates_published"` // eventIds published more than once (extra publishes)
	DuplicatesDelivered int `json:"duplicates_delivered"` // eventIds delivered more than once (extra deliveries)
	DuplicatesAbsorbed  int `json:"duplicates_absorbed"`  // deliveries the inbox recognised
	DuplicateEffects    int `json:"duplicate_effects"`    // extra effect rows for one eventId
	Lost                int `json:"lost"`                 // committed events with no effect (not flagged Failed)
	Phantom             int `json:"phantom"`              // effects or messages with no committed order
	FencedWrites        int `json:"fenced_writes"`        // status writes refused to a stale claim
	StaleWrites         int `json:"stale_writes"`         // status writes accepted from a stale claim
	StuckRows           int `json:"stuck_rows"`           // outbox rows left Pending/Processing
	HeldBack            int `json:"held_back"`            // events parked ahead of their predecessor
	CrashPointHits      int `json:"crashpoint_hits"`
}

// Fault is one injected fault and whether it happened.
type Fault struct {
	Kind   string `json:"kind"`   // crash, pause, toxic, link-down, broker-restart, unbind, replay, poison
	Target string `json:"target"` // process or link
	Detail string `json:"detail"` // e.g. "relay.after-confirm kill@3"
	Hit    bool   `json:"hit"`
	// Optional: the fault is drawn at random (random-chaos) and may find
	// nothing to hit; not happening leaves its window unopened and is not
	// what the run's verdict rests on.
	Optional bool      `json:"optional,omitempty"`
	Start    time.Time `json:"start,omitempty"`
	End      time.Time `json:"end,omitempty"`
	Error    string    `json:"error,omitempty"`
	// UndoError: the fault happened but what it did could not be undone
	// (a link that did not come back, a toxic not removed, a process not
	// resumed or restarted, the broker not started again): what the run saw
	// afterwards is the harness's doing, not the pipeline's.
	UndoError string `json:"undo_error,omitempty"`
	// EventIDs are events the fault itself chose (e.g. the one it replayed).
	EventIDs []string `json:"event_ids,omitempty"`
}

// Evidence is one thing the scenario had to see to show its window opened.
type Evidence struct {
	Name string `json:"name"`
	Seen bool   `json:"seen"`
	// NotChecked: optional evidence the target gave nothing to read from
	// (e.g. no event log); it neither shows nor fails the run.
	NotChecked bool   `json:"not_checked,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// Invariant is one checked property.
type Invariant struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
	// Expected marks a broken invariant the scenario exists to show (a
	// documented limit such as the inbox retention): it does not fail the run.
	Expected bool `json:"expected,omitempty"`
	// NotChecked: the target gave nothing to check this on (no outbox
	// query, no event log): neither ok nor broken, and never a pass.
	NotChecked bool `json:"not_checked,omitempty"`
	// RestsOn names the observations the verdict rests on: contract,
	// outbox, event log, broker, audit trail, tap queue.
	RestsOn    []string    `json:"rests_on,omitempty"`
	Violations []Violation `json:"violations,omitempty"`
}

// Violation names the events that broke an invariant and their timeline.
type Violation struct {
	Kind     string   `json:"kind"` // lost, phantom, duplicate-effect, stale-write, stuck-row, ...
	EventIDs []string `json:"event_ids"`
	Message  string   `json:"message"`
	Timeline []string `json:"timeline,omitempty"` // merged log lines of those events
}

// Phase is a span of the run: infra, workload, faults, converging, checking.
type Phase struct {
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Violations returns every violation of every failed invariant.
func (s Scenario) Violations() []Violation {
	var out []Violation
	for _, inv := range s.Invariants {
		out = append(out, inv.Violations...)
	}
	return out
}

// Failed lists the faults that never happened, and the invariants and
// evidence that failed, in one line each.
func (s Scenario) Failed() []string {
	out := s.Unopened()
	for _, e := range s.Evidence {
		if !e.Seen && !e.NotChecked {
			out = append(out, "evidence not seen: "+e.Name+detailSuffix(e.Detail))
		}
	}
	out = append(out, s.Broken()...)
	return out
}

// Unopened lists, one line each, the faults the run needed that never
// happened: its window never opened.
// Optional faults may each not happen, but not all of them.
func (s Scenario) Unopened() []string {
	var out []string
	hit, optional := 0, 0
	for _, f := range s.Faults {
		switch {
		case f.Hit:
			hit++
		case f.Optional:
			optional++
		default:
			out = append(out, "fault never happened: "+f.Kind+" "+f.Target+" "+f.Detail+errSuffix(f.Error))
		}
	}
	if hit == 0 && optional > 0 && len(out) == 0 {
		out = append(out, fmt.Sprintf("none of the %d faults drawn happened", optional))
	}
	return out
}

// NotUndone lists, one line each, the faults whose damage could not be
// undone.
func (s Scenario) NotUndone() []string {
	var out []string
	for _, f := range s.Faults {
		if f.UndoError != "" {
			out = append(out, "fault not undone: "+f.Kind+" "+f.Target+": "+f.UndoError)
		}
	}
	return out
}

// Broken lists, one line each, the invariants the run broke that the
// scenario did not expect.
func (s Scenario) Broken() []string {
	var out []string
	for _, inv := range s.Invariants {
		if !inv.OK && !inv.Expected && !inv.NotChecked {
			out = append(out, "invariant broken: "+inv.Name+detailSuffix(inv.Detail))
		}
	}
	return out
}

// Judge is the verdict of a run that ended (err: why it could not be
// judged, nil if it could), with its reason in one line. A fault that
// could not be undone makes the run indeterminate whatever it saw: a link
// left down or a process left frozen breaks invariants (lost, not
// converged) the pipeline did not break. Otherwise a broken
// invariant is a fail whatever else happened: a violation seen is a
// violation. Otherwise an error, a fault that never happened, or evidence
// not seen leaves the run indeterminate: a scenario's evidence is what
// shows its window opened (a row claimed twice, an event held back), never
// what catches a broken guard (the invariants do), so a run without it
// showed nothing either way although its faults happened (timing, on a
// loaded machine). All else is a pass.
func (s Scenario) Judge(err error) (verdict, reason string) {
	if notUndone := s.NotUndone(); len(notUndone) > 0 {
		return Indeterminate, strings.Join(notUndone, "; ")
	}
	if len(s.Broken()) > 0 {
		return Fail, strings.Join(s.Failed(), "; ")
	}
	if err != nil {
		return Indeterminate, err.Error()
	}
	if unopened := s.Unopened(); len(unopened) > 0 {
		return Indeterminate, strings.Join(unopened, "; ")
	}
	if failed := s.Failed(); len(failed) > 0 {
		return Indeterminate, "window not shown: " + strings.Join(failed, "; ")
	}
	return Pass, ""
}

func errSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func detailSuffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// Variant is whether the gate caught one broken variant.
type Variant struct {
	Name     string   `json:"name"`
	Guard    string   `json:"guard,omitempty"`
	Expected string   `json:"expected,omitempty"` // the violation kind the missing guard causes
	Caught   bool     `json:"caught"`
	CaughtBy []string `json:"caught_by"`
	Missed   []string `json:"missed,omitempty"`  // catching scenarios that ran and did not report it
	NotRun   []string `json:"not_run,omitempty"` // catching scenarios that could not run (or were never run)
	// Indeterminate: catching scenarios whose runs showed nothing through
	// their retries (a fault that never happened, an infrastructure error).
	Indeterminate []string `json:"indeterminate,omitempty"`
}

// Run is a whole run of faultline: results.json.
type Run struct {
	Schema string `json:"schema"`
	// Target is the name of the pipeline attacked (its target file's name).
	Target     string    `json:"target,omitempty"`
	Seed       int64     `json:"seed"`
	Seeds      []int64   `json:"seeds,omitempty"`
	Started    time.Time `json:"started"`
	DurationMS int64     `json:"duration_ms"`
	Pass       bool      `json:"pass"`
	// Verdict is the whole run's: pass; fail (a violation, a variant
	// missed); or indeterminate (a run that stayed indeterminate through
	// its retries, an interrupt). Absent in results written before it.
	Verdict string `json:"verdict,omitempty"`
	// Interrupted: a signal cut the run short; the runs in flight ended
	// indeterminate and nothing new started.
	Interrupted bool   `json:"interrupted,omitempty"`
	Infra       string `json:"infra,omitempty"`
	// Scenarios holds each run's last attempt; Retried the attempts before
	// it, each indeterminate and run again with the next seed.
	Scenarios []Scenario `json:"scenarios"`
	Retried   []Scenario `json:"retried,omitempty"`
	Variants  []Variant  `json:"variants"`
	// Timing is how long the verdict took; absent in results written
	// before it was recorded.
	Timing *Timing `json:"timing,omitempty"`
}

// Caught reports whether a run on a broken variant caught it: the run
// failed and reported the violation kind the missing guard causes (any
// violation, when kind is empty). A run that failed otherwise — a timeout,
// an unrelated error, a window that never opened — did not catch it. The
// gate, the CLI and the reports all decide with this one rule.
func (s Scenario) Caught(kind string) bool {
	if s.Verdict != Fail {
		return false
	}
	if kind == "" {
		return len(s.UnexpectedViolations()) > 0
	}
	return s.HasViolation(kind)
}

// HasViolation reports whether the run reported a violation of kind that
// was not expected by the scenario.
func (s Scenario) HasViolation(kind string) bool {
	return slices.ContainsFunc(s.UnexpectedViolations(), func(v Violation) bool { return v.Kind == kind })
}

// UnexpectedViolations are the violations of the run's broken invariants
// that the scenario did not expect (and checked), in invariant order.
func (s Scenario) UnexpectedViolations() []Violation {
	var out []Violation
	for _, inv := range s.Invariants {
		if inv.OK || inv.Expected || inv.NotChecked {
			continue
		}
		out = append(out, inv.Violations...)
	}
	return out
}

// ViolationKinds are the kinds of the run's UnexpectedViolations, sorted, each once.
func (s Scenario) ViolationKinds() []string {
	var kinds []string
	for _, v := range s.UnexpectedViolations() {
		kinds = append(kinds, v.Kind)
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

// Timeline is what a scenario's timeline picture is drawn from. Times are
// milliseconds since the run's workload started (negative: before it).
type Timeline struct {
	StartedAt time.Time `json:"started_at"`
	EndMS     int64     `json:"end_ms"`
	Lanes     []Lane    `json:"lanes"`
	// Faults are the injected faults as spans (toxics, outages, broker
	// restarts, pauses) on the time axis.
	Faults []Span `json:"faults"`
	// Rate counts events per bucket: committed, published, reserved.
	BucketMS int64    `json:"bucket_ms"`
	Rate     []Bucket `json:"rate"`
	// Traces follow the eventIds involved in the window (duplicates, fenced
	// writes, unknown outcomes, violations) through the pipeline.
	Traces []Trace `json:"traces"`
	// Rates before, during and after the faults (events reserved per second).
	RateBefore float64 `json:"rate_before"`
	RateDuring float64 `json:"rate_during"`
	RateAfter  float64 `json:"rate_after"`
}

// Lane is one process.
type Lane struct {
	Process string `json:"process"`
	Marks   []Mark `json:"marks"`
}

// Mark is a lifecycle point of a process: started, crashpoint (kill, pause,
// delay), resumed, restarted, disconnected, connected.
type Mark struct {
	AtMS  int64  `json:"at_ms"`
	Kind  string `json:"kind"`
	Label string `json:"label"`
}

// Span is a fault over time.
type Span struct {
	Kind    string `json:"kind"`
	Target  string `json:"target"`
	Label   string `json:"label"`
	StartMS int64  `json:"start_ms"`
	EndMS   int64  `json:"end_ms"`
}

// Bucket is one slice of the rate chart.
type Bucket struct {
	AtMS      int64 `json:"at_ms"`
	Committed int   `json:"committed"`
	Published int   `json:"published"`
	Reserved  int   `json:"reserved"`
}

// Trace is one eventId's way through the pipeline.
type Trace struct {
	EventID string `json:"event_id"`
	Why     string `json:"why"` // e.g. "duplicate absorbed", "fenced", "lost"
	Steps   []Step `json:"steps"`
}

// Step is one log line of a trace.
type Step struct {
	AtMS    int64  `json:"at_ms"`
	Process string `json:"process"`
	Event   string `json:"event"` // committed, claimed, published, confirmed, marked, fenced, delivered, duplicate, reserved, acked, ...
	ClaimID string `json:"claim_id,omitempty"`
	Detail  string `json:"detail,omitempty"`
}
