package reports

import (
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
)

// term is one entry of the report's glossary: a violation kind, a stage
// a lost event stopped at, or a word the report uses. Guard is what in a
// correct pipeline prevents it: the guard a failing run that reports it
// points at; "" where none does (the run did not converge, or the word
// names no failure).
type term struct {
	Name, Meaning, Guard string
}

// violationKinds are the kinds of violation the checker reports
// (harness/check, harness/runner), in the order the glossary lists them.
// glossary_test.go holds the list to the checker's source.
func violationKinds() []term {
	return []term{
		{"lost", "a committed event that never took effect: not marked Failed with an alert, and not still in the outbox or the queue; where it stopped is its stage", ""},
		{"phantom", "an effect or a message with no committed order: something was published or applied for a transaction that never committed", "publish only from the outbox, its row in the fact's transaction"},
		{"duplicate-effect", "one event took effect more than once", "an inbox row, in the effect's own transaction, absorbs the redelivery"},
		{"stuck-row", "an outbox row left Pending or Processing at the end: no relay ever settled it", "lease expiry: a claimed row that is never settled is claimed again"},
		{"stale-write", "a status write accepted from a claim that no longer held the row", "the claim id in every status write (fencing)"},
		{"live-claim-taken", "an outbox row claimed while another claim's lease on it was live (the audit trail's claim against the lease the holder last wrote)", "claim a Processing row only once its lease ran out"},
		{"published-unconfirmed", "a row marked Published by a claim that never saw its positive confirm", "mark Published only after a positive confirm"},
		{"status-disagrees", "an outbox row whose status and published_at disagree", "status and published_at written in one update"},
		{"gave-up-early", "a row ended Failed although the outage was shorter than the retry budget", "retries back off long enough to ride out a short outage"},
		{"out-of-order", "effects applied out of their aggregate's sequence", "an event ahead of its predecessor parked until the predecessor is applied"},
		{"held-back-forever", "events still parked at the end, waiting for a predecessor", "a parked event applied once its predecessor is"},
		{"stuck-position", "committed events an offset relay's position never reached, the position standing still", "a relay that reads by position resumes from it after every fault"},
		{"not-live", "not every committed fact took effect after the last fault healed, within the convergence wait", "reconnect after the fault heals (to another node of a cluster) and catch up"},
		{"slow-recovery", "every committed fact took effect, but later than the liveness bound drawn from the run: a slower machine looks the same, so the run is indeterminate on its account", ""},
		{"fact-lost", "facts the producer acknowledged (answered ok) are not in its database at the end: a COMMIT that failed answered as done, or a failover that lost commits", "answer only after the COMMIT succeeded; synchronous replication to the standby"},
		{"poison-dropped", "malformed messages faultline published that are neither in the dead-letter queue nor still queued at the end: dropped without a trace", "reject what can never be processed without requeue, to a dead-letter exchange"},
		{"valid-dead-lettered", "a valid event (one the outbox or the effects hold) in the dead-letter queue at the end: the consumer rejected a delivery it could process", "reject the poison alone: a nack or reject with multiple set takes every earlier unacked delivery of the channel with it"},
		{"not-converged", "events that had not taken effect yet when the run was checked: the run did not converge, nothing is lost; the run is indeterminate on its account", ""},
		{"queue-not-drained", "messages still in the consumer's queue at the end: the run did not converge", ""},
	}
}

// stageTerms are the stages a lost event can stop at (result.Stages), in
// pipeline order. glossary_test.go holds the list to result.Stages.
func stageTerms() []term {
	return []term{
		{string(result.StageNeverCommitted), "the workload was told of the event, and its fact never committed", "the fact and its outbox row in one transaction, answered after the commit"},
		{string(result.StageInOutbox), "committed and still Pending or Processing in the outbox, or on a log relay not yet passed by its slot: the run did not converge; not lost", ""},
		{string(result.StageSkipped), "the relay moved past it: never published, and its outbox row settled or gone, or a log relay's slot confirmed past it", "mark Published only after a positive confirm; claim rows by status, never read past a position; confirm a slot's position only past what the broker confirmed"},
		{string(result.StageRoutedNowhere), "published while no queue was bound for it: the broker routed it nowhere", "mandatory publish, with a basic.return matched to its own publish and retried"},
		{string(result.StageQueued), "ready or unacked in the consumer's queue at the end: the run did not converge; not lost", ""},
		{string(result.StageInInbox), "stored in the consumer's inbox and not applied yet (the contract's inbox_pending query lists it): the run did not converge; not lost", ""},
		{string(result.StageDeadLettered), "in the dead-letter queue at the end: rejected by the consumer (or past the queue's delivery limit), never applied", "apply every valid event; dead-letter only what can never be processed"},
		{string(result.StageDroppedAtLimit), "delivered as many times as the queue's delivery limit, which has no dead-letter exchange: the broker dropped it", "a dead-letter exchange behind the delivery limit"},
		{string(result.StageConsumedNoEffect), "delivered to the consumer and gone from the queue, with no effect: acked before its effect committed, or without it", "ack only after the inbox row and the effect commit together; a failed COMMIT never acked"},
		{string(result.StageUnknown), "the run gave nothing to place it by (no tap queue, no consumer event log, no outbox query): said so rather than guessed; counts as lost", ""},
	}
}

// wordTerms are the other words of the report.
func wordTerms() []term {
	return []term{
		{"absorbed", "a duplicate delivery the inbox recognised and did not apply again: the guard working, not a failure", ""},
		{"fenced", "a status write refused because its claim no longer held the row: the fencing guard working", ""},
		{"variant", "the pipeline with one guard removed, which a scenario must catch: a harness that cannot catch a broken guard proves nothing", ""},
		{"caught", "a run on a variant that failed with the violation its missing guard causes", ""},
		{"indeterminate", "a run that showed nothing either way (a fault that never happened, an infrastructure error, an interrupt): never a pass; the gate runs it again with the next seed", ""},
		{"not run", "the target does not offer what the scenario needs (a crash point, a query)", ""},
		{"documented limit", "a violation the scenario exists to show (a replay past the inbox retention), reported with its numbers; it does not fail the gate", ""},
		{"known finding", "a weakness the target file declares; a run that shows exactly it does not fail the gate, and one that no longer shows it does", ""},
		{"recovery", "from the end of the last fault to the pipeline settled; \"not converged\" when it never did, \"not measured\" when the run recorded none", ""},
	}
}

// glossarySection is one group of the page's glossary.
type glossarySection struct {
	Title string
	Terms []term
}

func glossary() []glossarySection {
	return []glossarySection{
		{"Violation kinds", violationKinds()},
		{"Stages: where a lost event stopped", stageTerms()},
		{"Other words", wordTerms()},
	}
}

// lookupTerm finds a violation kind or a stage by its name.
func lookupTerm(list []term, name string) (term, bool) {
	for _, t := range list {
		if t.Name == name {
			return t, true
		}
	}
	return term{}, false
}

// guardsOf are the guards a failing run's unexpected violations point
// at, each once, in the order of its violations: a lost event's stage
// says which guard let it go (consumed without effect: the ack after
// the commit), any other kind names its own. A lost violation with no
// stage, or a kind the glossary does not know, points at no guard here;
// the window's guard (windowGuard) still does.
func guardsOf(s result.Scenario) []string {
	var out []string
	add := func(g string) {
		for _, have := range out {
			if have == g {
				return
			}
		}
		if g != "" {
			out = append(out, g)
		}
	}
	for _, v := range s.UnexpectedViolations() {
		if len(v.Stages) > 0 {
			for _, st := range orderedStages(v.Stages) {
				t, _ := lookupTerm(stageTerms(), string(st))
				add(t.Guard)
			}
			continue
		}
		t, _ := lookupTerm(violationKinds(), v.Kind)
		add(t.Guard)
	}
	return out
}

// windowGuard is what closes the window the run opened, as the protocol
// words it ("" for a window it does not know or gives no guard).
func windowGuard(s result.Scenario) (name, guard string) {
	w, ok := protocol.DescribeWindow(s.Window)
	if !ok || w.Guard == "" {
		return "", ""
	}
	return w.Name, w.Guard
}

// usedTerms are the glossary's violation kinds and stages that the run's
// violations name, kinds first, each once, in the glossary's order.
func usedTerms(run result.Run) []term {
	used := map[string]bool{}
	for _, s := range run.Scenarios {
		for _, v := range s.Violations() {
			used["kind\x00"+v.Kind] = true
			for st, ids := range v.Stages {
				if len(ids) > 0 {
					used["stage\x00"+string(st)] = true
				}
			}
		}
	}
	var out []term
	for _, t := range violationKinds() {
		if used["kind\x00"+t.Name] {
			out = append(out, t)
		}
	}
	for _, t := range stageTerms() {
		if used["stage\x00"+t.Name] {
			out = append(out, t)
		}
	}
	return out
}
