package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// Invariant names.
const (
	NoLost           = "no-lost-event"
	NoPhantom        = "no-phantom"
	NoDuplicate      = "no-duplicate-effect"
	OutboxTruth      = "outbox-truth"
	Fencing          = "fencing"
	QueueDrained     = "queue-drained"
	AggregateOrder   = "per-aggregate-order"
	NothingHeldBack  = "nothing-held-back"
	NoneGaveUp       = "none-gave-up"
	LiveAfterHeal    = "live-after-heal"
	FactsKept        = "facts-kept"
	LeaseKept        = "lease-kept"
	PoisonAccounted  = "poison-accounted"
	OnlyPoisonDead   = "only-poison-dead-lettered"
	Converged        = "converged"
	maxNamedInReport = 20
)

// key of one expected effect: an aggregate's sequence number.
type key struct {
	aggregate string
	sequence  int64
}

// Invariant is one property a run is judged by: its name (as results.json
// and the reports give it), what it checks, in a line, and the check on a
// record and the findings every check shares. The always-on ones are
// checked on every run; an optional one only where a scenario names it,
// because it holds only under the scenario's conditions (an outage shorter
// than the retry budget, a pipeline that promises order).
type Invariant struct {
	Name     string
	Checks   string
	Optional bool
	check    func(o *history.Record, f findings) result.Invariant
}

// AllInvariants is every invariant the checker knows, always-on first, in
// the order a run's results list them.
func AllInvariants() []Invariant {
	return []Invariant{
		{Name: NoLost, Checks: "every committed event took effect, or the pipeline flagged it Failed with an alert", check: noLost},
		{Name: NoPhantom, Checks: "no effect without a committed fact behind it",
			check: func(o *history.Record, f findings) result.Invariant { return noPhantom(o, f.phantoms) }},
		{Name: NoDuplicate, Checks: "no event took effect more than once",
			check: func(o *history.Record, f findings) result.Invariant {
				return noDuplicate(o, f.extraEffects, f.duplicated)
			}},
		{Name: OutboxTruth, Checks: "no outbox row left Pending or Processing; status and published_at agree; Published only after a confirm",
			check: func(o *history.Record, _ findings) result.Invariant { return relayTruth(o) }},
		{Name: Fencing, Checks: "no status write accepted from a claim that no longer held the row",
			check: func(o *history.Record, f findings) result.Invariant { return fencing(o, f.staleWrites) }},
		{Name: LeaseKept, Checks: "no row claimed while another claim's lease on it was live (the audit trail's claims against the lease each claim wrote)",
			check: func(o *history.Record, _ findings) result.Invariant { return leaseKept(o) }},
		{Name: QueueDrained, Checks: "the consumer's queue is empty at the end",
			check: func(o *history.Record, _ findings) result.Invariant { return queueDrained(o) }},
		{Name: NothingHeldBack, Checks: "no event left parked waiting for a predecessor",
			check: func(o *history.Record, _ findings) result.Invariant { return nothingHeldBack(o) }},
		{Name: FactsKept, Checks: "every fact the producer acknowledged (answered ok) is in its database at the end, per aggregate by the id its create answer gave",
			check: func(o *history.Record, _ findings) result.Invariant { return factsKept(o) }},
		{Name: AggregateOrder, Optional: true, Checks: "per aggregate, effects applied in sequence order",
			check: func(o *history.Record, _ findings) result.Invariant { return aggregateOrder(o) }},
		{Name: NoneGaveUp, Optional: true, Checks: "no outbox row ended Failed (else gave-up-early): the outage was shorter than the retry budget's backoff",
			check: func(o *history.Record, _ findings) result.Invariant { return noneGaveUp(o) }},
		{Name: PoisonAccounted, Optional: true, Checks: "every malformed message faultline published is in the dead-letter queue (or still queued) at the end: none dropped without a trace",
			check: func(o *history.Record, _ findings) result.Invariant { return poisonAccounted(o) }},
		{Name: OnlyPoisonDead, Optional: true, Checks: "no valid event (one the outbox or the effects hold) is in the dead-letter queue at the end: the consumer dead-lettered only what it could never process",
			check: func(o *history.Record, _ findings) result.Invariant { return onlyPoisonDeadLettered(o) }},
		{Name: LiveAfterHeal, Optional: true, Checks: "every committed fact took effect within a bound after the last fault healed; the bound comes from the run (how long its faults lasted, plus the lease, the pipeline's lag before them and the reconnection its clients took, both measured) and is reported",
			check: func(o *history.Record, _ findings) result.Invariant { return liveAfterHeal(o) }},
	}
}

// LookupInvariant returns the invariant with that name.
func LookupInvariant(name string) (Invariant, bool) {
	for _, inv := range AllInvariants() {
		if inv.Name == name {
			return inv, true
		}
	}
	return Invariant{}, false
}

// OptionalNames lists the names of the optional invariants, in the
// table's order.
func OptionalNames() []string {
	var out []string
	for _, inv := range AllInvariants() {
		if inv.Optional {
			out = append(out, inv.Name)
		}
	}
	return out
}

// ValidateOptional refuses a name that is not an optional invariant: a
// scenario asks only for those (the always-on ones are checked anyway).
func ValidateOptional(names []string) error {
	for _, name := range names {
		if inv, ok := LookupInvariant(name); !ok || !inv.Optional {
			return fmt.Errorf("%q is not an optional invariant (the optional ones: %s)", name, strings.Join(OptionalNames(), ", "))
		}
	}
	return nil
}

// Selected are the invariants a run that asked for these optional ones is
// judged by: every always-on one and each optional one named, in the
// table's order, each once. A name that is no optional invariant is
// ignored (ValidateOptional refuses it before a run).
func Selected(optional []string) []Invariant {
	var out []Invariant
	for _, inv := range AllInvariants() {
		if !inv.Optional || slices.Contains(optional, inv.Name) {
			out = append(out, inv)
		}
	}
	return out
}

// Invariants checks the always-on invariants and the optional ones named
// against the record.
func Invariants(o *history.Record, optional []string) []result.Invariant {
	return invariants(o, Selected(optional), findingsOf(o))
}

// Check is Invariants and Counts together, with the findings both rest on
// (missing effects, phantoms, duplicate effects, stale writes) computed once.
func Check(o *history.Record, optional []string) ([]result.Invariant, result.Counts) {
	f := findingsOf(o)
	return invariants(o, Selected(optional), f), counts(o, f)
}

// findings are the facts that both an invariant and a count are made of.
type findings struct {
	missing      []key    // committed events without an effect (not flagged Failed)
	placed       placed   // the missing events by the stage they stopped at
	phantoms     []string // effects without a committed order event
	extraEffects int      // effect rows beyond one per event
	duplicated   []string // eventIds with more than one effect
	staleWrites  []string // eventIds with a status write accepted from a stale claim
}

func findingsOf(o *history.Record) findings {
	f := findings{missing: missingEffects(o), phantoms: phantoms(o), staleWrites: StaleWrites(o)}
	f.placed = placeAll(o, missingIDs(o, f.missing), labelsOf(f.missing))
	if o.Audit != nil {
		f.staleWrites = compact(sortedUnion(f.staleWrites, AuditStaleWrites(o)))
	}
	f.extraEffects, f.duplicated = DuplicateEffects(o)
	return f
}

func invariants(o *history.Record, list []Invariant, f findings) []result.Invariant {
	out := make([]result.Invariant, 0, len(list))
	for _, inv := range list {
		out = append(out, inv.check(o, f))
	}
	return out
}

// notChecked marks an invariant the target gave nothing to check on.
func notChecked(name, why string) result.Invariant {
	return result.Invariant{Name: name, NotChecked: true, Detail: "not checked: " + why}
}

// poisonAccounted: the malformed messages faultline published (and the
// broker confirmed) are in the dead-letter queue or still in the queue at
// the end; the rest were dropped without a trace. By count: the
// dead-letter queue may hold valid events too (past a delivery limit), so
// a drop of poison can hide behind them, never the other way round.
func poisonAccounted(o *history.Record) result.Invariant {
	if o.Poisoned == 0 {
		return notChecked(PoisonAccounted, "faultline published no malformed message")
	}
	if o.DeadLetter == nil {
		return notChecked(PoisonAccounted, "the target names no dead-letter queue (topology.dead_letter_queue)")
	}
	kept := o.DeadLetter.Queue.Messages + o.Queue.Messages
	inv := result.Invariant{Name: PoisonAccounted, OK: kept >= o.Poisoned, RestsOn: []string{FromBroker}}
	inv.Detail = fmt.Sprintf("%d malformed messages published, %d in the dead-letter queue, %d still queued", o.Poisoned, o.DeadLetter.Queue.Messages, o.Queue.Messages)
	if !inv.OK {
		inv.Detail = fmt.Sprintf("%d of %d malformed messages dropped without a trace: %d in the dead-letter queue, %d still queued", o.Poisoned-kept, o.Poisoned, o.DeadLetter.Queue.Messages, o.Queue.Messages)
		inv.Violations = []result.Violation{{Kind: "poison-dropped", Message: inv.Detail}}
	}
	return inv
}

// onlyPoisonDeadLettered: no event the pipeline knows as valid — an
// outbox row's, or an effect's — is in the dead-letter queue at the end.
// A consumer that rejects a valid delivery (a nack with multiple set
// behind the poison takes every earlier unacked delivery of its channel
// with it) leaves it there, whether or not its effect also committed, and
// a replay of the dead-letter queue would deliver it again. Only for
// scenarios without a delivery limit to run out: past one, a valid event
// is dead-lettered by design.
func onlyPoisonDeadLettered(o *history.Record) result.Invariant {
	if o.DeadLetter == nil {
		return notChecked(OnlyPoisonDead, "the target names no dead-letter queue (topology.dead_letter_queue)")
	}
	valid := map[string]bool{}
	for _, r := range o.Outbox {
		valid[r.EventID] = true
	}
	for _, e := range o.Effects {
		valid[e.EventID] = true
	}
	var ids []string
	for id, n := range o.DeadLetter.ByEvent {
		if valid[id] && n > 0 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	inv := result.Invariant{Name: OnlyPoisonDead, OK: len(ids) == 0, RestsOn: []string{FromBroker}}
	inv.Detail = fmt.Sprintf("%d messages in the dead-letter queue, none of them a valid event", o.DeadLetter.Queue.Messages)
	if !inv.OK {
		inv.Detail = fmt.Sprintf("%d valid events in the dead-letter queue: the consumer dead-lettered deliveries it could process", len(ids))
		inv.Violations = []result.Violation{{Kind: "valid-dead-lettered", EventIDs: ids, Message: inv.Detail}}
	}
	return inv
}

// noneGaveUp: no outbox row ended Failed.
func noneGaveUp(o *history.Record) result.Invariant {
	if o.Outbox == nil {
		return notChecked(NoneGaveUp, "the target's contract has no outbox query")
	}
	if o.NoOutboxStatus {
		return notChecked(NoneGaveUp, "the outbox query returns no status: a row given up on (Failed) cannot be told")
	}
	if o.OutageUnopened != "" {
		// It ended with a row within a retry of its budget, or at its
		// longest, the relays' retries neither backing off nor flat: a row
		// given up on around then need not have been given up early.
		return notChecked(NoneGaveUp, "the outage ended before the relays' retries showed their shape ("+o.OutageUnopened+")")
	}
	var ids []string
	for _, r := range o.Outbox {
		if r.Status == "Failed" {
			ids = append(ids, r.EventID)
		}
	}
	inv := result.Invariant{Name: NoneGaveUp, OK: len(ids) == 0, RestsOn: []string{FromOutbox}}
	if len(ids) > 0 {
		inv.Detail = fmt.Sprintf("%d events ended Failed although the outage was shorter than the retry budget's backoff", len(ids))
		inv.Violations = []result.Violation{{Kind: "gave-up-early", EventIDs: capList(ids), Message: inv.Detail, Timeline: o.Timeline(capList(ids)...)}}
	}
	return inv
}

// flagged are the outbox rows the pipeline itself gave up on, with an alert.
func flagged(o *history.Record) map[key]bool {
	f := map[key]bool{}
	for _, r := range o.Outbox {
		if r.Status == "Failed" {
			f[key{r.AggregateID, r.Sequence}] = true
		}
	}
	return f
}

// eventIDFor maps an expected effect to the eventId the facts or the
// outbox gave it.
func eventIDFor(o *history.Record) map[key]string {
	m := make(map[key]string, len(o.Facts))
	for _, r := range o.Outbox {
		m[key{r.AggregateID, r.Sequence}] = r.EventID
	}
	for _, f := range o.Facts {
		if f.EventID != "" {
			m[key{f.AggregateID, f.Sequence}] = f.EventID
		}
	}
	return m
}

// missingEffects are the committed events with no effect, except those
// the pipeline flagged Failed with an alert, in aggregate order.
func missingEffects(o *history.Record) []key {
	have := make(map[key]bool, len(o.Effects))
	for _, r := range o.Effects {
		have[key{r.AggregateID, r.Sequence}] = true
	}
	failed := flagged(o)
	var missing []key
	seen := make(map[key]bool, len(o.Facts))
	for _, f := range o.Facts {
		k := key{f.AggregateID, f.Sequence}
		if seen[k] {
			continue
		}
		seen[k] = true
		if !have[k] && !failed[k] {
			missing = append(missing, k)
		}
	}
	sort.Slice(missing, func(i, j int) bool {
		if missing[i].aggregate != missing[j].aggregate {
			return missing[i].aggregate < missing[j].aggregate
		}
		return missing[i].sequence < missing[j].sequence
	})
	return missing
}

// missingIDs are the eventIds of the missing events ("" where the run
// knows none).
func missingIDs(o *history.Record, missing []key) []string {
	ids := eventIDFor(o)
	out := make([]string, len(missing))
	for i, k := range missing {
		out[i] = ids[k]
	}
	return out
}

// labelsOf names each missing event by its aggregate and sequence.
func labelsOf(missing []key) []string {
	out := make([]string, len(missing))
	for i, k := range missing {
		out[i] = fmt.Sprintf("%s#%d", k.aggregate, k.sequence)
	}
	return out
}

// noLost: every committed order has exactly its effects (one per event of
// its history), except events the pipeline flagged Failed with an alert.
// Each missing event is placed at the stage where it stopped (placer): one
// still queued, still in the outbox or still in a consumer's inbox to be
// applied had not got through when the run was checked, which is the run not converging, never a loss — the
// invariant is then broken only as unconverged (the run indeterminate),
// with a not-converged violation listing them by stage. Every other stage
// is a loss: a lost violation lists those events by stage, all of them.
func noLost(o *history.Record, f findings) result.Invariant {
	inv := result.Invariant{Name: NoLost, OK: len(f.missing) == 0, RestsOn: []string{FromContract}}
	if o.Outbox != nil {
		inv.RestsOn = append(inv.RestsOn, FromOutbox)
	}
	if inv.OK {
		if n := len(flagged(o)); n > 0 {
			inv.Detail = fmt.Sprintf("%d events flagged Failed by the pipeline (alerted, not lost silently)", n)
		}
		return inv
	}
	if o.Queued != nil {
		inv.RestsOn = append(inv.RestsOn, FromBroker)
	}
	if len(o.LogRoles) > 0 {
		inv.RestsOn = append(inv.RestsOn, FromEventLog)
	}
	if o.Tap != nil {
		inv.RestsOn = append(inv.RestsOn, FromTap)
	}
	lost, unconverged := f.placed.split()
	inv.Detail = fmt.Sprintf("%d committed events have no effect: %s", len(f.missing), f.placed.summary())
	if ids := lost.ids(); len(ids) > 0 {
		inv.Violations = append(inv.Violations, result.Violation{
			Kind: "lost", EventIDs: capList(ids),
			Message:  fmt.Sprintf("%d committed events never took effect (%s): %s", len(ids), lost.summary(), strings.Join(capList(ids), ", ")),
			Timeline: o.Timeline(capList(ids)...),
			Stages:   lost,
		})
	}
	if ids := unconverged.ids(); len(ids) > 0 {
		inv.Unconverged = len(lost) == 0
		inv.Violations = append(inv.Violations, result.Violation{
			Kind: "not-converged", EventIDs: capList(ids),
			Message: fmt.Sprintf("%d committed events had not taken effect yet when the run was checked (%s): the run did not converge; not lost",
				len(ids), unconverged.summary()),
			Timeline: o.Timeline(capList(ids)...),
			Stages:   unconverged,
		})
	}
	return inv
}

// phantoms are effects whose order, or whose event in the order's
// history, was never committed.
func phantoms(o *history.Record) []string {
	facts := make(map[key]bool, len(o.Facts))
	for _, f := range o.Facts {
		facts[key{f.AggregateID, f.Sequence}] = true
	}
	var ids []string
	for _, r := range o.Effects {
		if !facts[key{r.AggregateID, r.Sequence}] {
			ids = append(ids, r.EventID)
		}
	}
	return ids
}

// noPhantom: no effect without a committed order event behind it.
func noPhantom(o *history.Record, ids []string) result.Invariant {
	inv := result.Invariant{Name: NoPhantom, OK: len(ids) == 0, RestsOn: []string{FromContract}}
	if len(ids) > 0 {
		inv.Detail = fmt.Sprintf("%d effects of events whose fact was never committed", len(ids))
		inv.Violations = []result.Violation{{Kind: "phantom", EventIDs: capList(ids),
			Message:  fmt.Sprintf("%d effects for facts that do not exist", len(ids)),
			Timeline: o.Timeline(capList(ids)...)}}
	}
	return inv
}

// DuplicateEffects counts extra effect rows: more than one per eventId, or
// per aggregate sequence.
func DuplicateEffects(o *history.Record) (extra int, ids []string) {
	byEvent := make(map[string]int, len(o.Effects))
	byKey := make(map[key]int, len(o.Effects))
	for _, r := range o.Effects {
		byEvent[r.EventID]++
		byKey[key{r.AggregateID, r.Sequence}]++
	}
	seen := map[string]bool{}
	for id, n := range byEvent {
		if n > 1 {
			extra += n - 1
			ids = append(ids, id)
			seen[id] = true
		}
	}
	for _, r := range o.Effects {
		k := key{r.AggregateID, r.Sequence}
		if byKey[k] > byEvent[r.EventID] && !seen[r.EventID] {
			// the same effect under different eventIds
			extra++
			ids = append(ids, r.EventID)
			seen[r.EventID] = true
		}
	}
	sort.Strings(ids)
	return extra, ids
}

func noDuplicate(o *history.Record, extra int, ids []string) result.Invariant {
	inv := result.Invariant{Name: NoDuplicate, OK: extra == 0, RestsOn: []string{FromContract}}
	if extra > 0 {
		inv.Detail = fmt.Sprintf("%d extra effects for %d events", extra, len(ids))
		inv.Violations = []result.Violation{{Kind: "duplicate-effect", EventIDs: capList(ids),
			Message:  fmt.Sprintf("%d events took effect more than once", len(ids)),
			Timeline: o.Timeline(capList(ids)...)}}
	}
	return inv
}

// outboxTruth: nothing left Pending or Processing, status and published_at
// agree, and every Published row was confirmed to the claim that marked it.
func outboxTruth(o *history.Record) result.Invariant {
	if o.Outbox == nil {
		return notChecked(OutboxTruth, "the target's contract has no outbox query")
	}
	relayLog := o.HasLog("relay")
	var stuck, disagree, unconfirmed []string
	for _, r := range o.Outbox {
		switch {
		case r.Status == "Pending" || r.Status == "Processing":
			stuck = append(stuck, r.EventID)
		case (r.Status == "Published") != r.Published:
			disagree = append(disagree, r.EventID)
		}
		if relayLog && r.Status == "Published" && !confirmedBeforeMark(o.ByEvent[r.EventID]) {
			unconfirmed = append(unconfirmed, r.EventID)
		}
	}
	inv := result.Invariant{Name: OutboxTruth, OK: len(stuck)+len(disagree)+len(unconfirmed) == 0, RestsOn: []string{FromOutbox}}
	var details []string
	if relayLog {
		inv.RestsOn = append(inv.RestsOn, FromEventLog)
	} else {
		details = append(details, "Published-after-confirm not checked: the relays write no event log")
	}
	if len(stuck) > 0 {
		details = append(details, fmt.Sprintf("%d rows stuck in Pending/Processing", len(stuck)))
		inv.Violations = append(inv.Violations, result.Violation{Kind: "stuck-row", EventIDs: capList(stuck),
			Message: fmt.Sprintf("%d outbox rows never settled", len(stuck)), Timeline: o.Timeline(capList(stuck)...)})
	}
	if len(disagree) > 0 {
		details = append(details, fmt.Sprintf("%d rows whose status and published_at disagree", len(disagree)))
		inv.Violations = append(inv.Violations, result.Violation{Kind: "status-disagrees", EventIDs: capList(disagree),
			Message: "status and published_at disagree"})
	}
	if len(unconfirmed) > 0 {
		details = append(details, fmt.Sprintf("%d rows Published without a positive confirm", len(unconfirmed)))
		inv.Violations = append(inv.Violations, result.Violation{Kind: "published-unconfirmed", EventIDs: capList(unconfirmed),
			Message:  fmt.Sprintf("%d rows were marked Published by a claim that never saw their confirm", len(unconfirmed)),
			Timeline: o.Timeline(capList(unconfirmed)...)})
	}
	inv.Detail = strings.Join(details, "; ")
	return inv
}

// confirmedBeforeMark: the claim that marked the row had seen a positive
// confirm for it (and no return) before the mark.
func confirmedBeforeMark(entries []eventlog.Entry) bool {
	confirmed := map[string]bool{}
	returned := map[string]bool{}
	marks := 0
	for _, e := range entries {
		switch e.Event {
		case eventlog.Confirmed:
			confirmed[e.ClaimID] = true
		case eventlog.Returned:
			returned[e.ClaimID] = true
		case eventlog.Marked:
			marks++
			if !confirmed[e.ClaimID] || returned[e.ClaimID] {
				return false
			}
		}
	}
	if marks == 0 {
		// The mark's log line can be missing only if the relay was killed
		// between the update and the write; then some claim must have
		// seen a clean confirm.
		for c := range confirmed {
			if !returned[c] {
				return true
			}
		}
		return false
	}
	return true
}

// StaleWrites finds status writes (marked, retry-scheduled, failed)
// accepted from a claim after another claim had taken the row.
//
// The logs say when a line was written, not when its statement committed:
// a relay may log a retry it committed well before another relay claimed
// the row after its backoff. A retry or failure write counts its attempt,
// and each claim logs the attempt it starts, so a later claim that already
// saw the write (its attempt is past the write's) came after it; only a
// claim that did not see it shows a stale write. Likewise a claim whose
// line comes late (its relay frozen between the claim's commit and its log
// line) but whose attempt is below that of the claim that wrote was made
// before that claim, so it took nothing from it. Where the outbox was
// audited, the database's own order of the claims' commits settles it: a
// claim committed before the writer's took nothing from it, however late
// its line came. A Published row is never claimed again, so a mark has no
// such ambiguity.
func StaleWrites(o *history.Record) []string {
	committed := commitsOfClaims(o)
	var ids []string
	for id, entries := range o.ByEvent {
		claimedAt := map[string]int{} // claim id → index of its claimed line
		for i, e := range entries {
			switch e.Event {
			case eventlog.Claimed:
				if _, ok := claimedAt[e.ClaimID]; !ok {
					claimedAt[e.ClaimID] = i
				}
			case eventlog.Marked, eventlog.Retry, eventlog.FailedAlert, eventlog.Renewed:
				start, ok := claimedAt[e.ClaimID]
				if !ok {
					continue
				}
				for _, other := range entries[start+1 : i] {
					if other.Event != eventlog.Claimed || other.ClaimID == e.ClaimID {
						continue
					}
					if (e.Event == eventlog.Retry || e.Event == eventlog.FailedAlert) && e.Attempt > 0 && other.Attempt > e.Attempt {
						continue // that claim saw this write: it came after it
					}
					if mine := entries[start].Attempt; other.Attempt > 0 && other.Attempt < mine {
						continue // that claim was made before this one: its line came late
					}
					if committed.before(id, other.ClaimID, e.ClaimID) {
						continue // the database committed that claim first: its line came late
					}
					ids = append(ids, id)
					break
				}
			}
		}
	}
	sort.Strings(ids)
	return compact(ids)
}

func fencing(o *history.Record, ids []string) result.Invariant {
	if why := noClaims(o); why != "" {
		return notChecked(Fencing, why)
	}
	var on []string
	if o.HasLog("relay") {
		on = append(on, FromEventLog)
	}
	if o.Audit != nil {
		on = append(on, FromAudit)
	}
	if len(on) == 0 {
		return notChecked(Fencing, "the relays write no event log and the outbox could not be audited (observe.outbox)")
	}
	inv := result.Invariant{Name: Fencing, OK: len(ids) == 0, RestsOn: on}
	if len(ids) > 0 {
		inv.Detail = fmt.Sprintf("%d status writes accepted from a claim that no longer held the row", len(ids))
		inv.Violations = []result.Violation{{Kind: "stale-write", EventIDs: capList(ids),
			Message:  inv.Detail,
			Timeline: append(o.Timeline(capList(ids)...), AuditTimeline(o, capList(ids)...)...)}}
	} else if n := o.Count(eventlog.Fenced); n > 0 {
		inv.Detail = fmt.Sprintf("%d stale writes refused (fenced)", n)
	}
	return inv
}

func queueDrained(o *history.Record) result.Invariant {
	q := o.Queue
	inv := result.Invariant{Name: QueueDrained, OK: q.Messages == 0 && q.Unacked == 0, RestsOn: []string{FromBroker}}
	if !inv.OK {
		// Messages still in the queue: the run did not converge.
		inv.Unconverged = true
		inv.Detail = fmt.Sprintf("the consumer's queue holds %d messages (%d unacked)", q.Messages, q.Unacked)
		inv.Violations = []result.Violation{{Kind: "queue-not-drained", Message: inv.Detail}}
	}
	return inv
}

func nothingHeldBack(o *history.Record) result.Invariant {
	if o.HeldBack == nil {
		return notChecked(NothingHeldBack, "the target's contract has no held_back query")
	}
	inv := result.Invariant{Name: NothingHeldBack, OK: *o.HeldBack == 0, RestsOn: []string{FromContract}}
	if !inv.OK {
		inv.Detail = fmt.Sprintf("%d events still parked waiting for a predecessor", *o.HeldBack)
		inv.Violations = []result.Violation{{Kind: "held-back-forever", Message: inv.Detail}}
	}
	return inv
}

// aggregateOrder: per aggregate, effects were applied in sequence order.
func aggregateOrder(o *history.Record) result.Invariant {
	last := map[string]int64{}
	var ids []string
	for _, r := range o.Effects { // in the order the effects query gives: the order they were applied
		if r.Sequence <= last[r.AggregateID] {
			ids = append(ids, r.EventID)
		}
		if r.Sequence > last[r.AggregateID] {
			if r.Sequence != last[r.AggregateID]+1 {
				ids = append(ids, r.EventID)
			}
			last[r.AggregateID] = r.Sequence
		}
	}
	inv := result.Invariant{Name: AggregateOrder, OK: len(ids) == 0, RestsOn: []string{FromContract}}
	if len(ids) > 0 {
		inv.Detail = fmt.Sprintf("%d effects applied out of their aggregate's sequence", len(ids))
		inv.Violations = []result.Violation{{Kind: "out-of-order", EventIDs: capList(ids), Message: inv.Detail, Timeline: o.Timeline(capList(ids)...)}}
	}
	return inv
}

func capList(ids []string) []string {
	if len(ids) > maxNamedInReport {
		return ids[:maxNamedInReport]
	}
	return ids
}

func sortedUnion(a, b []string) []string {
	out := append(append([]string{}, a...), b...)
	sort.Strings(out)
	return out
}

func compact(ids []string) []string {
	out := ids[:0]
	for i, id := range ids {
		if i == 0 || id != ids[i-1] {
			out = append(out, id)
		}
	}
	return out
}
