package scenarios

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/proxies"
)

// relayTimed is how a black-box relay scenario opens on each relay model.
// On a claim relay (and on a target that says no model but whose outbox
// has a status column, the article's by default) it is as written: timed
// by relay-1's claim. Elsewhere it is re-timed by what that relay does in
// sight of faultline, or not offered, with the reason.
type relayTimed struct {
	// offset re-times it for an offset relay, whose mark is a committed
	// write to its position table; nil: not offered, for noOffset.
	offset   func(sc runner.Scenario) runner.Scenario
	noOffset string
	// anyRelay re-times it for a relay faultline sees only publish (a log
	// relay, or one the target file says nothing of and whose outbox has
	// no status); nil: not offered, for noAnyRelay.
	anyRelay   func(sc runner.Scenario) runner.Scenario
	noAnyRelay string
}

// on is the Scenario.Relay of a black-box relay scenario.
func (rt relayTimed) on(sc runner.Scenario, t *target.Target) (runner.Scenario, string, error) {
	switch {
	case t.Relay.Model == history.ModelClaim, t.Relay.Model == "" && t.StatusOutbox():
		return sc, "", nil
	case t.Relay.Model == history.ModelOffset:
		if rt.offset == nil {
			return sc, "", errors.New(rt.noOffset)
		}
		return rt.offset(sc), "re-timed for an offset relay: " + rt.offset(sc).Window, nil
	}
	if rt.anyRelay == nil {
		return sc, "", errors.New(rt.noAnyRelay)
	}
	return rt.anyRelay(sc), "re-timed by the relay's publishes: " + rt.anyRelay(sc).Window, nil
}

// Why a window does not exist on a relay that is not a claim relay.
const (
	noLeaseAny   = "the relay holds no claim faultline can see (a log relay, or no model said and no status column in the outbox): no lease to hold it past"
	noBatchStart = "the start of a batch is not seen from outside: the relay writes no claim, and no position table faultline watches (a log relay's mark is its replication slot's confirmed position); a relay killed with a batch published and not marked is blackbox-relay-confirmed-not-marked"
)

// logWithin bounds each wait of a log relay's position window: long
// enough for a relay that answers the server only every 10 s (pglogrepl's
// and most libraries' default status interval) to answer twice.
const logWithin = 30 * time.Second

// logOnly is the Scenario.Relay of a window that exists only on a relay
// that tails logical replication: its mark is its slot's position.
func logOnly(sc runner.Scenario, t *target.Target) (runner.Scenario, string, error) {
	if t.Relay.Model != history.ModelLog {
		return sc, "", fmt.Errorf("the window is a log relay's (its replication slot's position); this relay's model is %s", t.RelayModel())
	}
	return sc, "", nil
}

// notOnLog is the Scenario.Relay of a window a relay that tails logical
// replication does not have, for why: as written on every other model.
func notOnLog(why string) func(runner.Scenario, *target.Target) (runner.Scenario, string, error) {
	return func(sc runner.Scenario, t *target.Target) (runner.Scenario, string, error) {
		if t.Relay.Model == history.ModelLog {
			return sc, "", errors.New(why)
		}
		return sc, "", nil
	}
}

// noCommitOrderOnLog: why the commit-order window does not exist on a log
// relay.
const noCommitOrderOnLog = "a log relay is sent the outbox's changes in commit order (logical decoding): an insert held at its commit streams after the later ones, and no read past it is seen from outside"

// oneRelay runs a single relay instance: a window timed by a publish (whose
// publisher the broker does not name) or by the mark of a relay that takes
// turns with others on one position is then relay-1's.
func oneRelay(sc runner.Scenario) runner.Scenario {
	sc.Instances = map[string]int{protocol.Relay: 1}
	return sc
}

// atPublish is relay-1's first publish, seen on faultline's live tap, once
// a fault on slowed (relay-1's link) triggered at at has landed, with what
// the scenario does there still to fill in.
func atPublish(rng *rand.Rand, slowed history.Link) (at fault.Trigger, c fault.OnCommit) {
	at = fault.Trigger{AfterOrders: int64(between(rng, 10, 30))}
	c = fault.OnCommit{Process: "relay-1", Table: history.TablePublish, Nth: 1,
		Trigger: fault.Trigger{AfterOrders: at.AfterOrders, AfterLink: slowed}}
	return at, c
}

// killedAtMark: an offset relay killed the moment its mark commits, the
// next batch read from the committed position but not yet published.
func killedAtMark(sc runner.Scenario) runner.Scenario {
	sc = oneRelay(sc)
	sc.Window = "position marked, next batch not yet published (black-box, offset relay)"
	sc.Description = "relay-1 (the one relay) is SIGKILLed the moment a write to its position table commits (a trigger on that table tells): restarted, it must read on from its committed position, publishing every event once at least."
	sc.Faults = func(rng *rand.Rand) []fault.Fault {
		c, slow := atClaim(rng)
		c.Table, c.Status = history.TablePosition, ""
		c.Action, c.RestartAfter = fault.ActKill, 300*time.Millisecond
		return []fault.Fault{slow, c}
	}
	sc.Evidence = nil
	return sc
}

// atMark is relay-1's first mark after a trigger early in the workload,
// with what the scenario does there still to fill in. Its instances take
// turns on the group's lock and mark only a turn that found rows, so the
// trigger leaves most of the workload for relay-1 to take such a turn in;
// nothing slows its confirms: a relay held up at its mark has no later
// write to keep from happening.
func atMark(rng *rand.Rand) fault.OnCommit {
	at := fault.Trigger{AfterOrders: int64(between(rng, 5, 15)), Delay: 300 * time.Millisecond}
	return fault.OnCommit{Process: "relay-1", Table: history.TablePosition, Nth: 1, Trigger: at}
}

// frozenAtMark: an offset relay frozen past a lease the moment its mark
// commits. It holds no lease, so nothing refuses its late writes: what
// holds is that the position only ever moves to what was published. Both
// instances run: the other reads on from the committed position, or waits
// on the group's lock, while relay-1 is frozen.
func frozenAtMark(sc runner.Scenario) runner.Scenario {
	sc.Window = "position marked, then frozen past a lease (black-box, offset relay)"
	sc.Description = fmt.Sprintf("relay-1 is frozen (SIGSTOP) the moment a write of its to the position table commits (its mark; a trigger on that table tells), for %s: longer than a lease, though an offset relay holds none, so nothing takes a claim over or refuses a write; the other relay reads on from the committed position, or waits on the group's lock. When relay-1 thaws, the position it writes late must move neither back past what was published (duplicates, which the inbox absorbs) nor forward past what it never published (lost events).", pastLease)
	sc.Faults = func(rng *rand.Rand) []fault.Fault {
		c := atMark(rng)
		c.Action, c.Hold = fault.ActPause, pastLease
		return []fault.Fault{c}
	}
	sc.Evidence = nil
	return sc
}

// dbSlowAtMark: an offset relay whose database link is slowed past a
// lease the moment its mark commits, so its next batch's reads and its
// next mark arrive late, the other instance marking meanwhile or waiting
// on the group's lock.
func dbSlowAtMark(sc runner.Scenario) runner.Scenario {
	sc.Window = "position marked, then its database link slowed past a lease (black-box, offset relay)"
	sc.Description = "The moment a write of relay-1's to the position table commits (its mark; a trigger on that table tells), what it sends its database is held back 3 to 3.5 s, longer than a lease, for 6 s: its next batch is read, published and marked late, while the other relay reads on from the committed position or waits on the group's lock. An offset relay holds no lease, so nothing refuses that late mark: it must move the position neither back past what was published (duplicates, which the inbox absorbs) nor forward past what it never published (lost events)."
	sc.Faults = func(rng *rand.Rand) []fault.Fault {
		c := atMark(rng)
		c.ToxicLink, c.Toxic, c.ToxicFor = "relay-1.pg", proxies.Latency{Latency: time.Duration(between(rng, 3000, 3500)) * time.Millisecond, Stream: proxies.Upstream}, 6*time.Second
		c.Action = fault.ActNone
		return []fault.Fault{c}
	}
	sc.Evidence = nil
	return sc
}

// confirmedNotMarkedAtPublish: the relay's database writes are held back
// from the trigger on, so the moment it publishes, the write that marks
// the batch (a status, a position, a replication slot's confirmed
// position: all go over its database link) is still on the wire; that
// link is cut and the relay killed. Restarted, it must publish the batch
// again.
func confirmedNotMarkedAtPublish(sc runner.Scenario) runner.Scenario {
	sc = oneRelay(sc)
	sc.Window = "published and confirmed, its mark not yet written (black-box, timed by its publishes)"
	sc.Description = "What relay-1 (the one relay) sends its database is held back 600 ms from a trigger on; the moment one of its publishes reaches the broker (a queue faultline binds beside the target's tells), while the write that marks the batch waits on the wire, that link is cut and relay-1 SIGKILLed. Confirmed, never marked: restarted, it publishes the batch again from its committed position, and the consumer must absorb the duplicates."
	sc.Faults = func(rng *rand.Rand) []fault.Fault {
		at, c := atPublish(rng, "relay-1.pg")
		slowDB := fault.Toxic{Link: "relay-1.pg", Toxic: proxies.Latency{Latency: 600 * time.Millisecond, Stream: proxies.Upstream}, Trigger: at, Duration: 8 * time.Second}
		c.Cut, c.CutAfter, c.CutFor = []history.Link{"relay-1.pg"}, 300*time.Millisecond, 3*time.Second
		c.ActAfter, c.Action, c.RestartAfter = 200*time.Millisecond, fault.ActKill, 300*time.Millisecond
		return []fault.Fault{slowDB, c}
	}
	sc.Evidence = []check.Evidence{check.RoutedTwice()}
	return sc
}

// answersLostAtPublish: the broker's answers stop the moment the relay
// publishes, with its publishes in flight.
func answersLostAtPublish(sc runner.Scenario) runner.Scenario {
	sc = oneRelay(sc)
	sc.Window = "published, confirm not yet seen (black-box, timed by its publishes)"
	sc.Description = "With relay-1's (the one relay's) confirms slowed a little, the moment one of its publishes reaches the broker (a queue faultline binds beside the target's tells) its broker link stops carrying the broker's answers: an unknown outcome for the publishes in flight. Every committed event must still take effect once; a relay that marks without confirms is not caught here (the broker did take the messages)."
	sc.Faults = func(rng *rand.Rand) []fault.Fault {
		at, c := atPublish(rng, "relay-1.amqp")
		slow := fault.Toxic{Link: "relay-1.amqp", Toxic: proxies.Latency{Latency: 150 * time.Millisecond}, Trigger: at, Duration: 8 * time.Second}
		c.ToxicLink, c.Toxic, c.ToxicFor = "relay-1.amqp", proxies.Timeout{Timeout: 0, Stream: proxies.Downstream}, 4*time.Second
		c.Action = fault.ActNone
		return []fault.Fault{slow, c}
	}
	// A relay that does not wait for confirms marks anyway and publishes
	// nothing twice: the verdict rests on the invariants.
	sc.Evidence = nil
	return sc
}

// fromOutside is the Relay hook of a relay crash-point scenario: on a
// target whose relay maps a crash point at window it is as written; on one
// that maps none (no event log, no crash point) it opens the same window
// from outside, as outside makes it on the target's relay model, with the
// evidence that needs no event log — or is not offered, and why.
func fromOutside(window string, outside func(sc runner.Scenario, t *target.Target) (runner.Scenario, string, error)) func(runner.Scenario, *target.Target) (runner.Scenario, string, error) {
	return func(sc runner.Scenario, t *target.Target) (runner.Scenario, string, error) {
		if offersPoint(t, protocol.Relay, window) {
			return sc, "", nil
		}
		on, how, err := outside(sc, t)
		if err != nil {
			return sc, "", fmt.Errorf("the relay maps no crash point at %s, and from outside: %w", window, err)
		}
		if on.Window == sc.Window {
			on.Window += " (from outside)"
		} else {
			on.Window = sc.Window + " (from outside: " + on.Window + ")"
		}
		return on, runner.JoinLines("the relay maps no crash point at "+window+": opened from outside", how), nil
	}
}

// offersPoint: a process of role maps a crash point at window.
func offersPoint(t *target.Target, role, window string) bool {
	for _, p := range t.ByRole(role) {
		if _, ok := p.CrashPoints[window]; ok {
			return true
		}
	}
	return false
}

// asBlackBox is outside for a crash-point scenario whose window a
// black-box scenario opens: that scenario's faults, instances and evidence
// as they are on the target's relay model (and, re-timed for that model,
// its description), under the crash-point scenario's name and workload.
func asBlackBox(name string) func(runner.Scenario, *target.Target) (runner.Scenario, string, error) {
	return func(sc runner.Scenario, t *target.Target) (runner.Scenario, string, error) {
		bb, err := Lookup(name)
		if err != nil {
			return sc, "", err
		}
		on, how := bb, ""
		if bb.Relay != nil {
			if on, how, err = bb.Relay(bb, t); err != nil {
				return sc, "", err
			}
		}
		out := sc
		out.Faults, out.Evidence, out.Instances, out.Window = on.Faults, on.Evidence, on.Instances, on.Window
		if how != "" {
			// re-timed for the relay's model: what happens is the
			// re-timed scenario's, not the claim relay's story
			out.Description = on.Description
		}
		return out, runner.JoinLines("as "+name, how), nil
	}
}

// killedAtPublish: a relay SIGKILLed the moment one of its publishes
// reaches the broker, its confirms slowed so none has come back: an
// unknown outcome, the batch published again after a restart.
func killedAtPublish(sc runner.Scenario, _ *target.Target) (runner.Scenario, string, error) {
	sc = oneRelay(sc)
	sc.Faults = func(rng *rand.Rand) []fault.Fault {
		at, c := atPublish(rng, "relay-1.amqp")
		slow := fault.Toxic{Link: "relay-1.amqp", Toxic: proxies.Latency{Latency: 150 * time.Millisecond}, Trigger: at, Duration: 8 * time.Second}
		c.Action, c.RestartAfter = fault.ActKill, 300*time.Millisecond
		return []fault.Fault{slow, c}
	}
	sc.Evidence = []check.Evidence{check.RoutedTwice()}
	return sc, "relay-1 (the one relay) killed the moment one of its publishes reaches the broker, its confirms slowed 150 ms", nil
}

// overtakenFromOutside is aggregate-order's window from outside: relay-1
// killed at one of its first claims while relay-2 publishes on. Only a
// relay that claims rows lets one relay's events overtake another's: an
// offset or log relay publishes in its position's order.
func overtakenFromOutside(sc runner.Scenario, t *target.Target) (runner.Scenario, string, error) {
	if !t.StatusOutbox() {
		return sc, "", errors.New("only a relay that claims rows by a status lets events of one aggregate overtake each other when one relay dies: an offset or log relay publishes in its position's order")
	}
	if t.Contract.HeldBack == nil {
		// Run as written it rests on a crash point the target chose to
		// map; from outside, only on the order the target says it keeps.
		return sc, "", errors.New("the contract has no held_back query: the pipeline does not say it holds an event back for its predecessor, so per-aggregate order is not what it promises")
	}
	faults := sc.Faults
	sc.Faults = func(rng *rand.Rand) []fault.Fault {
		out := faults(rng)
		for i, f := range out {
			if c, ok := f.(fault.Crash); ok {
				out[i] = fault.OnCommit{Process: c.Process, Table: history.TableOutbox, Status: "Processing", Nth: int(c.Hit), Action: fault.ActKill, RestartAfter: c.RestartAfter}
			}
		}
		return out
	}
	// The consumer's held-back lines need its event log; the order of the
	// effects (the per-aggregate-order invariant) does not.
	sc.Evidence = nil
	return sc, "relay-1 killed at the commit of one of its first claims (a trigger on the outbox tells)", nil
}
