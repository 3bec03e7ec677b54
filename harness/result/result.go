// Package result is the data a scenario run leaves behind: plain values
// with JSON tags, rendered by reports/ and aggregated by the gate. Nothing
// here runs anything.
package result

import (
	"fmt"
	"slices"
	"strconv"
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
	// Limit: the run showed a documented limit — what the scenario exists
	// to measure (a replay past the inbox retention, a failover that lost
	// committed facts), its invariants broken exactly as expected and
	// reported with their numbers — and nothing else broke. Never a pass,
	// and no failure of the pipeline's: the gate does not fail on it.
	Limit = "limit"
)

// Interrupted is the reason of a run cut short by an interrupt.
const Interrupted = "interrupted"

// Scenario is the outcome of one scenario on one variant with one seed.
type Scenario struct {
	Name    string `json:"name"`
	Variant string `json:"variant"`
	Seed    int64  `json:"seed"`
	Window  string `json:"window,omitempty"`
	// Traffic is the traffic profile the run sent (workload: paced,
	// burst, relay-backlog, consumer-backlog).
	Traffic    string      `json:"traffic,omitempty"`
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
	Attempt int `json:"attempt,omitempty"`
	// Known: a run of the correct pipeline that failed with the violations
	// of a known finding the target file declares, and no other (see
	// ShowsOnly): its Verdict stays fail, and the gate does not count it
	// as failed. Absent on every other run.
	Known    bool      `json:"known,omitempty"`
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
	Lost                int `json:"lost"`                 // committed events with no effect (not flagged Failed, not still queued or in the outbox)
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
	// NotOffered: the fault found its window closed by the target's own
	// design (e.g. a producer whose outbox commits wait for one another
	// cannot have their order inverted): the scenario is not run on this
	// target, and this says why.
	NotOffered string `json:"not_offered,omitempty"`
	// EventIDs are events the fault itself chose (e.g. the one it replayed).
	EventIDs []string `json:"event_ids,omitempty"`
	// Poisoned counts the malformed messages the fault published into the
	// pipeline and the broker confirmed (poison): each must be accounted
	// for at the end.
	Poisoned int `json:"poisoned,omitempty"`
	// States are what the fault saw of the infrastructure's state while it
	// acted: a queue's leader, nodes seen down, partitions, a promotion and
	// the WAL it lost. They go on the timeline's infrastructure lanes.
	States []State `json:"states,omitempty"`
	// Waits are the causes the fault waited for before or while it acted
	// (a takeover, a relay reading past a held row, the broker counting
	// deliveries held), in the order it waited: how a window opened by
	// cause, or why it did not.
	Waits []Wait `json:"waits,omitempty"`
	// Slot is what a failover did to a log relay's replication slot (nil:
	// no logical slot in the outbox's database when the primary died).
	Slot *SlotFate `json:"slot,omitempty"`
	// Unbound: the fault removed the target's queue's bindings, from
	// Start; Rebound: it restored them, by End. Not restored, they stayed
	// away to the end of the run. A publish routed in that span went
	// nowhere, whether or not the fault's window opened.
	Unbound bool `json:"unbound,omitempty"`
	Rebound bool `json:"rebound,omitempty"`
	// ByRetries: the fault's outage lasted until the relays' retries showed
	// their shape. Not hit, its Error says why the outage ended first, and
	// the premise of none-gave-up is then not known to hold.
	ByRetries bool `json:"by_retries,omitempty"`
}

// SlotFate is what became of a log relay's replication slot when its
// database failed over. PostgreSQL 15 keeps a logical slot on the server
// it was created on: the promoted standby has none, and a relay that
// creates it again gets it at the promoted server's current position,
// past every change committed before and not yet streamed.
type SlotFate struct {
	Name string `json:"name"`
	// Confirmed is the slot's confirmed position on the primary, read
	// just before the primary was killed.
	Confirmed string `json:"confirmed"`
	// Kept: the promoted server had the slot when first read after the
	// promotion (a server that synchronises its slots to the standby).
	Kept bool `json:"kept"`
	// Recreated: the slot was seen again on the promoted server, first at
	// SeenAt (the server's clock), its confirmed position then At.
	Recreated bool      `json:"recreated"`
	SeenAt    time.Time `json:"seen_at,omitzero"`
	At        string    `json:"at,omitempty"`
	// WatchedMS is how long faultline watched for it after the promotion.
	WatchedMS int64 `json:"watched_ms"`
}

// Line says what became of the slot, in words.
func (s SlotFate) Line() string {
	watched := time.Duration(s.WatchedMS) * time.Millisecond
	switch {
	case s.Kept:
		return fmt.Sprintf("slot %s kept by the promoted server (confirmed up to %s)", s.Name, s.At)
	case s.Recreated:
		return fmt.Sprintf("slot %s gone with the primary (confirmed up to %s there); created again on the promoted server at %s, seen %s after the promotion", s.Name, s.Confirmed, s.At, watched.Round(time.Millisecond))
	}
	return fmt.Sprintf("slot %s gone with the primary (confirmed up to %s there), and not seen again on the promoted server within %s", s.Name, s.Confirmed, watched.Round(time.Second))
}

// Wait is one cause a fault waited for: Cause says what, in words that
// follow "waited for" ("another relay to take relay-1's claim over");
// Seen whether it was seen; TookMS how long the fault waited, BoundMS the
// longest it would have (0: no bound of its own). Detail says what was
// seen, or why it was not. A wait that reached its bound without its cause
// left its window unopened: the fault says so in its Hit and Error, and
// the run is indeterminate, never a pass.
type Wait struct {
	Cause   string `json:"cause"`
	Seen    bool   `json:"seen"`
	TookMS  int64  `json:"took_ms"`
	BoundMS int64  `json:"bound_ms,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// BoundReached says whether the wait ended at its bound without its cause.
func (w Wait) BoundReached() bool { return !w.Seen && w.BoundMS > 0 && w.TookMS >= w.BoundMS }

// Line says the wait in one line: "waited 1.3 s (at most 5 s) for relay-2
// to take relay-1's claim over — seen: relay-2 took E1 over".
func (w Wait) Line() string {
	var b strings.Builder
	b.WriteString("waited " + waitDuration(w.TookMS))
	if w.BoundMS > 0 {
		b.WriteString(" (at most " + waitDuration(w.BoundMS) + ")")
	}
	b.WriteString(" for " + w.Cause + " — ")
	switch {
	case w.Seen:
		b.WriteString("seen")
	case w.BoundReached():
		b.WriteString("not seen: bound reached")
	default:
		b.WriteString("not seen")
	}
	if w.Detail != "" {
		b.WriteString(": " + w.Detail)
	}
	return b.String()
}

// WaitLines are the waits of every fault of the run, one line each, in
// fault order.
func (s Scenario) WaitLines() []string {
	var out []string
	for _, f := range s.Faults {
		for _, w := range f.Waits {
			out = append(out, w.Line())
		}
	}
	return out
}

// waitDuration says ms as a reader counts it: "40 ms", "1.3 s", "5 s".
func waitDuration(ms int64) string {
	if ms < 1000 {
		return fmt.Sprintf("%d ms", max(ms, 0))
	}
	s := strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " s"
}

// State is one reading of the infrastructure's state: Lane names what it
// is about ("broker cluster", "database"), Kind what changed (leader,
// down, partitioned, healed, promoted), Label says it in words.
type State struct {
	At    time.Time `json:"at"`
	Lane  string    `json:"lane"`
	Kind  string    `json:"kind"`
	Label string    `json:"label"`
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
	// Unconverged: broken only because the run had not converged when it
	// was checked (the wait for convergence ran out, messages still in the
	// queue, events still queued or in the outbox): the run is
	// indeterminate on its account, never failed — faultline cannot tell
	// a pipeline that would have finished from one that never will.
	Unconverged bool `json:"unconverged,omitempty"`
	// RestsOn names the observations the verdict rests on: contract,
	// outbox, event log, broker, audit trail, tap queue.
	RestsOn    []string    `json:"rests_on,omitempty"`
	Violations []Violation `json:"violations,omitempty"`
}

// Outcome is what one invariant of a run came to: one of five.
type Outcome string

// The outcomes of an invariant.
const (
	// OutcomeHeld: checked, and it held.
	OutcomeHeld Outcome = "held"
	// OutcomeBroken: checked, and broken: the run fails.
	OutcomeBroken Outcome = "broken"
	// OutcomeLimit: broken as the scenario expected (a documented limit).
	OutcomeLimit Outcome = "limit"
	// OutcomeNotChecked: the target gave nothing to check it on.
	OutcomeNotChecked Outcome = "not-checked"
	// OutcomeNotConverged: broken only because the run had not converged
	// when it was checked: indeterminate on its account, never failed.
	OutcomeNotConverged Outcome = "not-converged"
)

// Outcome is the invariant's outcome, read from its wire form (OK,
// Expected, NotChecked, Unconverged) in that order: one that held is held
// whatever else is set, an expected break is a limit.
func (inv Invariant) Outcome() Outcome {
	switch {
	case inv.OK:
		return OutcomeHeld
	case inv.Expected:
		return OutcomeLimit
	case inv.NotChecked:
		return OutcomeNotChecked
	case inv.Unconverged:
		return OutcomeNotConverged
	}
	return OutcomeBroken
}

// Note is what a scenario's documented limit says of one invariant's
// result: why a break is the limit (Excused) or why it is not.
type Note struct {
	Invariant string
	// Excused: a break of the invariant is the documented limit; one that
	// held is left as it is.
	Excused bool
	// Says is added to the invariant's detail, in parentheses.
	Says string
}

// Annotated is invs with notes applied, as a copy: an excused break
// becomes a limit (Expected), and each note's words go on its
// invariant's detail. The checks' own results are not changed.
func Annotated(invs []Invariant, notes []Note) []Invariant {
	out := slices.Clone(invs)
	for _, n := range notes {
		for i := range out {
			if out[i].Name != n.Invariant || n.Excused && out[i].OK {
				continue
			}
			out[i].Expected = out[i].Expected || n.Excused
			if n.Says != "" {
				out[i].Detail += " (" + n.Says + ")"
			}
		}
	}
	return out
}

// Violation names the events that broke an invariant and their timeline.
type Violation struct {
	Kind     string   `json:"kind"` // lost, phantom, duplicate-effect, stale-write, stuck-row, ...
	EventIDs []string `json:"event_ids"`
	Message  string   `json:"message"`
	Timeline []string `json:"timeline,omitempty"` // merged log lines of those events
	// Stages places each event of a lost violation where the run's end
	// state shows it stopped (Stage* below): stage -> every eventId there,
	// uncapped. Empty for kinds that have no stage.
	Stages map[Stage][]string `json:"stages,omitempty"`
}

// Stage is where a violating event was found at the end of a run, read from
// the contract, the outbox, the tap queue, the broker's queue and the
// effects.
type Stage string

const (
	// StageNeverCommitted: an event the workload was told of whose fact
	// never committed.
	StageNeverCommitted Stage = "never-committed"
	// StageInOutbox: committed, still pending in the outbox (stuck), or
	// not yet passed by a log relay's slot: the run did not converge;
	// never "lost".
	StageInOutbox Stage = "still-in-outbox"
	// StageRoutedNowhere: published while no queue was bound for it.
	StageRoutedNowhere Stage = "routed-nowhere"
	// StageQueued: ready or unacked in the target's queue: the run did not
	// converge; never "lost".
	StageQueued Stage = "still-queued"
	// StageInInbox: taken in by the consumer and stored in its inbox, not
	// applied yet (the contract's inbox_pending query lists it): the run
	// did not converge; never "lost".
	StageInInbox Stage = "still-in-inbox"
	// StageConsumedNoEffect: delivered to the consumer, gone from the queue,
	// and no effect.
	StageConsumedNoEffect Stage = "consumed-without-effect"
	// StageDeadLettered: a message of it is in the dead-letter queue at
	// the end: the consumer (or the queue's delivery limit) sent it there
	// and it never took effect.
	StageDeadLettered Stage = "dead-lettered"
	// StageDroppedAtLimit: delivered as many times as the queue's delivery
	// limit, which has no dead-letter exchange: the broker dropped it
	// (RabbitMQ 4's quorum queues have a limit of 20 by default).
	StageDroppedAtLimit Stage = "dropped-by-delivery-limit"
	// StageSkipped: the relay moved past it and it was never published.
	StageSkipped Stage = "skipped"
	// StageUnknown: the run gave nothing to place it by (no tap queue and
	// no consumer event log, no outbox query, no publish time while the
	// queue was unbound): said so rather than guessed. It counts as lost.
	StageUnknown Stage = "unknown"
)

// Stages lists the stages in pipeline order, unknown last.
func Stages() []Stage {
	return []Stage{StageNeverCommitted, StageInOutbox, StageSkipped, StageRoutedNowhere, StageQueued, StageInInbox, StageDeadLettered, StageDroppedAtLimit, StageConsumedNoEffect, StageUnknown}
}

// Unconverged says whether an event in this stage means only that the run
// had not finished when it was checked.
func (s Stage) Unconverged() bool {
	return s == StageInOutbox || s == StageQueued || s == StageInInbox
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
		if inv.Outcome() == OutcomeBroken {
			out = append(out, "invariant broken: "+inv.Name+detailSuffix(inv.Detail))
		}
	}
	return out
}

// Ending is how a run ended, beside what it recorded: the error that kept
// it from being judged (nil if none), and what the runner knows of it.
type Ending struct {
	Err error
	// HarnessPanic: the harness panicked (Err says where).
	HarnessPanic bool
	// Interrupted: the run's processes were stopped under it (Err: the
	// cause).
	Interrupted bool
	// Down: a process stayed down against its restart policy (Err says
	// which and why).
	Down bool
}

// Judge is the verdict of a run that ended as end says, with its reason in
// one line; it is the one place a verdict is computed.
//
// A run whose harness panicked, that was interrupted, or one of whose
// processes stayed down against its restart policy is indeterminate: what
// it saw is no evidence of the pipeline's. So is a run with a fault that
// could not be undone, whatever it saw: a link left down or a process left
// frozen breaks invariants (lost, not converged) the pipeline did not
// break. Otherwise a broken invariant is a fail whatever else happened: a
// violation seen is a violation. A fault that found its window closed by
// the target's own design makes the run not run. Otherwise an error, a
// fault that never happened, or evidence not seen leaves the run
// indeterminate: a scenario's evidence is what shows its window opened (a
// row claimed twice, an event held back), never what catches a broken
// guard (the invariants do), so a run without it showed nothing either way
// although its faults happened. A run that did not converge (invariants
// whose outcome is OutcomeNotConverged: events still queued or still in
// the outbox) is indeterminate too: an event not yet through is not lost.
// All else is a pass, or a documented limit where an invariant's outcome
// is OutcomeLimit.
func (s Scenario) Judge(end Ending) (verdict, reason string) {
	switch {
	case end.HarnessPanic:
		// The harness's own state is in doubt: nothing it saw is evidence,
		// not even a violation.
		return Indeterminate, end.Err.Error()
	case end.Interrupted:
		// Its processes were stopped under it: what it saw is no evidence.
		return Indeterminate, fmt.Sprintf("%s: %v", Interrupted, end.Err)
	case end.Down:
		// A process stayed down that production's supervisor would have
		// restarted, or that the target file does not have restarted: the
		// events it never handled are no loss of the pipeline's.
		return Indeterminate, end.Err.Error()
	}
	err := end.Err
	if notUndone := s.NotUndone(); len(notUndone) > 0 {
		return Indeterminate, strings.Join(notUndone, "; ")
	}
	if len(s.Broken()) > 0 {
		return Fail, strings.Join(s.Failed(), "; ")
	}
	if err != nil {
		return Indeterminate, err.Error()
	}
	for _, f := range s.Faults {
		if f.NotOffered != "" {
			return NotRun, "not offered on this target: " + f.NotOffered
		}
	}
	if unopened := s.Unopened(); len(unopened) > 0 {
		return Indeterminate, strings.Join(unopened, "; ")
	}
	if why := s.NotConverged(); why != "" {
		return Indeterminate, why
	}
	if failed := s.Failed(); len(failed) > 0 {
		return Indeterminate, "window not shown: " + strings.Join(failed, "; ")
	}
	if limits := s.Limits(); len(limits) > 0 {
		return Limit, "documented limit: " + strings.Join(limits, "; ")
	}
	return Pass, ""
}

// Limits are the invariants broken as the scenario expected (a documented
// limit), each with its detail.
func (s Scenario) Limits() []string {
	var out []string
	for _, inv := range s.Invariants {
		if inv.Outcome() == OutcomeLimit {
			out = append(out, inv.Name+detailSuffix(inv.Detail))
		}
	}
	return out
}

// Passed says whether the run showed nothing wrong with the pipeline: a
// pass, or a documented limit and nothing else.
func (s Scenario) Passed() bool { return s.Verdict == Pass || s.Verdict == Limit }

// NotConverged says, in one line, that the run did not converge — how many
// events were still in the outbox, still queued and still in the inbox,
// and the invariants broken only on that account — or "" if it converged.
func (s Scenario) NotConverged() string {
	var lines []string
	counts := map[Stage]int{}
	for _, inv := range s.Invariants {
		if inv.Outcome() != OutcomeNotConverged {
			continue
		}
		lines = append(lines, inv.Name+detailSuffix(inv.Detail))
		for _, v := range inv.Violations {
			for st, ids := range v.Stages {
				counts[st] += len(ids)
			}
		}
	}
	if len(lines) == 0 {
		return ""
	}
	var where []string
	for _, st := range []Stage{StageQueued, StageInOutbox, StageInInbox} {
		if n := counts[st]; n > 0 {
			where = append(where, fmt.Sprintf("%d %s", n, st))
		}
	}
	if len(where) == 0 {
		return "not judged in time: " + strings.Join(lines, "; ")
	}
	return fmt.Sprintf("did not converge: %s (%s)", strings.Join(where, ", "), strings.Join(lines, "; "))
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

// TargetVariant is one variant as the target file lists it: the guard it
// removes, the violation kind that missing guard causes, and the scenarios
// that must catch it.
type TargetVariant struct {
	Name     string   `json:"name"`
	Guard    string   `json:"guard,omitempty"`
	Expect   string   `json:"expect,omitempty"`
	CaughtBy []string `json:"caught_by"`
}

// Run is a whole run of faultline: results.json.
type Run struct {
	Schema string `json:"schema"`
	// Target is the name of the pipeline attacked (its target file's name).
	Target string `json:"target,omitempty"`
	// TargetFile is the path of the target file the run loaded (absolute):
	// the report's reproduce commands pass it to --target.
	TargetFile string `json:"target_file,omitempty"`
	// Version is the faultline that made the run (harness/version); absent
	// in results written before it was recorded.
	Version    string    `json:"version,omitempty"`
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
	// TargetVariants are the variants the target file lists, whether run
	// or not: what the report's window table is drawn from. Empty: the
	// target lists none; absent (nil) in results written before it.
	TargetVariants []TargetVariant `json:"target_variants"`
	// KnownFindings are the target file's known findings and what the
	// gate saw of each; absent when it declares none.
	KnownFindings []KnownFinding `json:"known_findings,omitempty"`
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
		if inv.Outcome() != OutcomeBroken {
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

// ShowsOnly reports whether a failed run failed with violations of the
// given kinds and nothing else: every invariant it broke (unexpected,
// checked, converged) names its violations, each of one of kinds. Such a
// run shows a known finding; one that also broke anything else, or broke
// an invariant naming no violation, does not.
func (s Scenario) ShowsOnly(kinds []string) bool {
	if s.Verdict != Fail {
		return false
	}
	shown := false
	for _, inv := range s.Invariants {
		if inv.Outcome() != OutcomeBroken {
			continue
		}
		if len(inv.Violations) == 0 {
			return false
		}
		for _, v := range inv.Violations {
			if !slices.Contains(kinds, v.Kind) {
				return false
			}
			shown = true
		}
	}
	return shown
}

// ViolationCount is how many events broke the invariant in v: every event
// its stages place, else the run's count of that kind (the eventIds named
// are capped), else the eventIds named.
func (s Scenario) ViolationCount(v Violation) int {
	n := 0
	for _, ids := range v.Stages {
		n += len(ids)
	}
	if n > 0 {
		return n
	}
	c := s.Counts
	byKind := map[string]int{"lost": c.Lost, "phantom": c.Phantom, "stale-write": c.StaleWrites, "stuck-row": c.StuckRows}
	return max(byKind[v.Kind], len(v.EventIDs))
}

// KnownFinding is a weakness of the pipeline as built that its target file
// declares (known_findings), and what the gate saw of it on the correct
// pipeline.
type KnownFinding struct {
	Scenario   string   `json:"scenario"`
	Violations []string `json:"violations"` // the kinds it shows
	Cause      string   `json:"cause"`      // the behaviour it comes from
	Status     string   `json:"status"`     // Known* below
	// Detail says in one line why the status is not shown.
	Detail string `json:"detail,omitempty"`
	// Shown are the runs that showed it, with their figures.
	Shown []KnownRun `json:"shown,omitempty"`
}

// Status of a known finding in a gate.
const (
	// KnownShown: a run of its scenario showed it, and none passed.
	KnownShown = "shown"
	// KnownNotReproduced: a run of its scenario passed, or the scenario
	// was not run on the target: the entry is stale, and the gate fails.
	KnownNotReproduced = "not-reproduced"
	// KnownOther: its scenario's runs failed, each with a violation the
	// finding does not list: those runs fail the gate.
	KnownOther = "other-violations"
	// KnownIndeterminate: its scenario's runs showed nothing.
	KnownIndeterminate = "indeterminate"
)

// KnownRun is one run that showed a known finding.
type KnownRun struct {
	Seed    int64    `json:"seed"`
	Figures []Figure `json:"figures"` // per kind of the run, in the finding's order
}

// Figure is how many events showed one violation kind.
type Figure struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}

// String says a known run's figures in a line: "lost 73, stuck-row 2".
func (k KnownRun) String() string {
	parts := make([]string, len(k.Figures))
	for i, f := range k.Figures {
		parts[i] = fmt.Sprintf("%s %d", f.Kind, f.Count)
	}
	return strings.Join(parts, ", ")
}

// Line says in one line what the gate saw of the finding: the runs that
// showed it with their figures ("seed 1: lost 73"), or why none did.
func (k KnownFinding) Line() string {
	switch k.Status {
	case KnownShown:
		var runs []string
		for _, r := range k.Shown {
			runs = append(runs, fmt.Sprintf("seed %d: %s", r.Seed, r))
		}
		return strings.Join(runs, "; ")
	default:
		return k.Detail
	}
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
