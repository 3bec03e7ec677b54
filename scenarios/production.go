package scenarios

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
)

// Profiles of the catalogue: the default one, what `go test ./scenarios`
// and `faultline gate` run, on one broker node and one database server;
// production adds the windows a clustered broker and a failing-over
// database open, on infrastructure of their own (a three-node cluster
// costs about half a minute to start and 400 MiB), so the default gate
// pays nothing for them.
const (
	ProfileDefault    = "default"
	ProfileProduction = "production"
)

// Profiles names the profiles.
func Profiles() []string { return []string{ProfileDefault, ProfileProduction} }

// Profile returns the scenarios of a profile, by name.
func Profile(name string) ([]runner.Scenario, error) {
	switch name {
	case "", ProfileDefault:
		return All(), nil
	case ProfileProduction:
		return Every(), nil
	}
	return nil, fmt.Errorf("unknown profile %q (known: %s)", name, strings.Join(Profiles(), ", "))
}

// Every returns the scenarios of every profile, by name.
func Every() []runner.Scenario {
	all := append(All(), Production()...)
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all
}

// longer is traffic that outlasts a cluster fault: orders keep coming
// through an election, a partition and its healing.
func longer() workload.Spec {
	return workload.Spec{Orders: 300, Concurrency: 4, Pace: 15 * time.Second}
}

// clusterConverge bounds a cluster run's convergence: a node thawed or
// healed rejoins and its queue replicas catch up before the backlog drains.
const clusterConverge = 90 * time.Second

// Production returns the windows production adds: a clustered broker
// (three nodes, the target's queues quorum queues), a failing-over or
// restarting database, and a consumer crash loop against a queue's delivery limit.
// Each cluster run is judged by liveness after heal besides the usual
// invariants.
func Production() []runner.Scenario {
	at := clusterTrigger
	return []runner.Scenario{
		onCluster("cluster-leader-killed", protocol.QueueLeaderLost,
			"Mid-stream, the broker node that leads the target's queue is SIGKILLed and started again 5 s later: publishes in flight are unconfirmed or nacked while the remaining nodes elect a new leader, which redelivers what the consumer held unacked. Nothing may be marked Published without a positive confirm, every event still takes effect once, and the pipeline catches up after the node is back.",
			func(at fault.Trigger) fault.Fault {
				return fault.NodeKill{Node: fault.NodeLeader, Trigger: at, DownFor: 5 * time.Second}
			}),
		onCluster("cluster-queue-node-lost", protocol.QueueLeaderLost,
			"The broker node that leads the target's queue is SIGKILLed mid-stream and stays down for the rest of the run (a lost machine): a replicated queue goes on with a new leader on the two nodes left, its clients reconnect to them, and every event takes effect once. A queue with its only copy on that node is gone with it.",
			func(at fault.Trigger) fault.Fault { return fault.NodeKill{Node: fault.NodeLeader, Trigger: at} }),
		onCluster("cluster-node-paused", protocol.NodePaused,
			"The node leading the target's queue is frozen (SIGSTOP) past net_ticktime: the other nodes count it gone and elect a new leader, while its clients' connections hang open until their heartbeats give up. Thawed, it finds itself in the minority and rejoins. Every event takes effect once, and the pipeline catches up after the thaw.",
			func(at fault.Trigger) fault.Fault {
				return fault.NodePause{Node: fault.NodeLeader, Trigger: at, Hold: nodePauseHold}
			}),
		onCluster("cluster-node-partitioned", protocol.NodePartitioned,
			"The node leading the target's queue is cut off from the other two (its inter-node links down) while its clients still reach it: the majority elects a new leader, the minority node pauses itself, its clients must reconnect elsewhere. Healed, it rejoins. Every event takes effect once, and the pipeline catches up after the heal.",
			func(at fault.Trigger) fault.Fault {
				return fault.Partition{Node: fault.NodeLeader, Trigger: at, For: nodePauseHold}
			}),
		onCluster("cluster-relay-node-lost", protocol.ClientNodeLost,
			"The broker node the only relay talks to is SIGKILLed mid-stream, while the relay publishes, and stays down for the rest of the run (a lost machine): the relay must reconnect to another node and publish again whatever was left unconfirmed. A relay that holds on to one node stalls.",
			func(at fault.Trigger) fault.Fault {
				return fault.NodeKill{Node: fault.ClientNode("relay-1"), Trigger: at}
			},
			func(sc *runner.Scenario) { sc.Instances = map[string]int{protocol.Relay: 1} }),
		{
			Name: "database-failover-async", Window: protocol.PrimaryFailover,
			Description: "The orders database's asynchronous standby is cut off for 3 s while orders keep committing and the relay keeps publishing them; then the primary is SIGKILLed and the standby promoted, without those commits. The processes reach the promoted server through the same address. Facts the producer acknowledged are gone, and events already published for them take effect downstream: phantoms no single-node test can show. The article's guards cannot close this window — asynchronous promotion can lose committed facts — so it is a documented limit, reported with its numbers.",
			Workload:    longer(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Failover{Trigger: at(rng), Hold: 3 * time.Second}}
			},
			Expect: expectFailoverLimit,
			Limit:  true,
		},
		{
			Name: "database-failover-sync", Window: protocol.PrimaryFailover,
			Description: "The same failover with a synchronous standby: while it is cut off, commits wait for it and nothing new is acknowledged or becomes visible, so nothing the relay published is lost at promotion. Every acknowledged fact survives and no phantom appears. A log relay is the exception PostgreSQL 15 makes: its slot stays with the dead primary, and its walsender streams a commit before the standby has it; the slot's fate and what it cost are a documented limit, reported with their numbers.",
			Workload:    longer(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Failover{Trigger: at(rng), Hold: 3 * time.Second, Synchronous: true}}
			},
			Invariants: []string{check.LiveAfterHeal},
			Converge:   clusterConverge,
			Expect:     expectSlotLimit,
		},
		{
			Name: "database-failover-sync-cancelled", Window: protocol.PrimaryFailover,
			Description: "A synchronous standby cut off, and every commit waiting for it cancelled as a client's statement timeout would: PostgreSQL ends the wait with a warning, the commit visible on the primary only, where the relay may publish it. The primary dies, the standby is promoted without those commits: synchronous replication narrows the window but does not close it — a documented limit, reported with its numbers.",
			Workload:    longer(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Failover{Trigger: at(rng), Hold: 3 * time.Second, Synchronous: true, CancelWaits: true}}
			},
			Expect: expectFailoverLimit,
			Limit:  true,
		},
		{
			Name: "database-restart", Window: protocol.DatabaseRestart,
			Description: "Every statement the consumer sends its database is slowed by 300 ms, so events pile up on their way to their effects; mid-stream, at the commit of an outbox row, the database server crashes — every backend SIGKILLed, as an OOM kill or a host's reboot would — and starts again on its data, recovering from its WAL. Every process loses its connections and reconnects; transactions not committed are gone; a log relay's slot comes back at the position last written to disk, which can be behind what the relay had confirmed, so the server streams those changes again. Every fact the producer acknowledged survives, every event takes effect once, and the pipeline catches up. The server is the run's own: no other run shares it.",
			Workload:    longer(),
			Exclusive:   true,
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.DatabaseRestart{Trigger: at(rng), Within: 30 * time.Second, Slow: "consumer.pg"}}
			},
			Invariants: []string{check.LiveAfterHeal},
			Converge:   clusterConverge,
		},
		onCluster("cluster-consumer-node-lost", protocol.ClientNodeLost,
			"Every statement the consumer sends its database is slowed by 300 ms, so it holds each delivery unacked while it commits; the broker node the consumer talks to is SIGKILLed once the broker counts deliveries it holds unacked, and started again 5 s later: the consumer reconnects to another node, the queue redelivers what was unacked, and the inbox absorbs what had already committed.",
			func(at fault.Trigger) fault.Fault {
				return fault.NodeKill{Node: fault.ClientNode("consumer"), Trigger: at, DownFor: 5 * time.Second, Holding: true, Slow: "consumer.pg"}
			}),
		{
			Name: "consumer-crash-loop", Window: protocol.ConsumerCrashLoop,
			Description: "Every statement the consumer sends its database is slowed by 300 ms, so what it holds takes a second to commit; it is killed four times in a row, each time once the broker counts deliveries it holds unacked, and started again. The queue hands what it held back, first, to the next incarnation, and a quorum queue counts each return as a delivery attempt: past a delivery limit a message is dead-lettered — or, with no dead-letter exchange, dropped (RabbitMQ 4 gives every quorum queue a limit of 20). Every event still takes effect once.",
			Workload:    longer(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				at := clusterTrigger(rng)
				return []fault.Fault{fault.CrashLoop{Process: "consumer", Times: 4, Trigger: at, RestartAfter: 200 * time.Millisecond, Slow: "consumer.pg"}}
			},
			Converge: clusterConverge,
		},
	}
}

// expectFailoverLimit accepts what a failover that lost WAL must show: the
// phantoms (effects of events whose fact the promoted server no longer
// has), the facts gone, and the events whose effect faultline saw commit
// on the old primary and the promoted one does not have (the consumer
// acked after its commit, as it must, and the promotion lost the commit)
// are the documented limit, marked expected with their numbers; the
// evidence says what was lost. So are a log relay's events its slot's
// loss skipped (expectSlotLimit). Anything else broken still fails the
// run: a lost event whose effect was never seen committed, and that no
// slot skipped, is the pipeline's own doing.
func expectFailoverLimit(o *history.Record, faults []result.Fault, invs []result.Invariant) (result.Evidence, []result.Note) {
	ev := result.Evidence{Name: "a failover lost committed WAL, and the checker reports what it cost"}
	lostWAL, slot := failoverSeen(faults)
	goneFacts := max(o.Acknowledged-int64(len(o.Facts)), 0)
	phantoms := 0
	lost, notes := excuseLost(o, invs, lostWAL, slot)
	for _, inv := range invs {
		if inv.Name == check.NoPhantom && !inv.OK {
			phantoms += namedIDs(inv)
		}
	}
	if lostWAL {
		notes = append(notes,
			result.Note{Invariant: check.FactsKept, Excused: true, Says: "expected: promotion without the commits the standby never received — the documented limit"},
			result.Note{Invariant: check.NoPhantom, Excused: true, Says: "expected: the promoted server lost the facts behind them — the documented limit of promotion without the commits"})
	}
	ev.Detail = fmt.Sprintf("%d facts acknowledged to the client are gone from the promoted server (%d acknowledged, %d there); %d effects of events without a fact", goneFacts, o.Acknowledged, len(o.Facts), phantoms)
	if lost.committed > 0 {
		ev.Detail += fmt.Sprintf("; %d effects seen committed are gone", lost.committed)
	}
	if lost.skipped > 0 {
		ev.Detail += fmt.Sprintf("; %d events never streamed: committed before the relay's slot existed on the promoted server", lost.skipped)
	}
	if slot != nil {
		ev.Detail += "; " + slot.Line()
	}
	published, seen := check.PublishedWithoutFact(o)
	if seen {
		ev.Detail += fmt.Sprintf("; %d events published whose fact is gone", len(published))
	}
	ev.Seen = lostWAL && (goneFacts > 0 || phantoms > 0 || lost.committed > 0 || lost.skipped > 0 || len(published) > 0)
	return ev, notes
}

// expectSlotLimit accepts, on a failover to a synchronous standby, only
// what a log relay's slot costs there on PostgreSQL 15: the events its
// lost slot skipped (excuseLost), and phantoms — a logical walsender
// streams a commit as soon as the primary has flushed it, while the
// committing client still waits for the synchronous standby, so the relay
// can publish a commit the promotion then loses (PostgreSQL 17's
// synchronized_standby_slots closes that). A claim or offset relay reads
// only what is visible, and visible means the standby has it: for those
// nothing is accepted and the evidence is not checked.
func expectSlotLimit(o *history.Record, faults []result.Fault, invs []result.Invariant) (result.Evidence, []result.Note) {
	ev := result.Evidence{Name: "what the failover did to the log relay's slot"}
	lostWAL, slot := failoverSeen(faults)
	if slot == nil {
		ev.NotChecked = true
		ev.Detail = "no log relay's slot was followed through the failover"
		return ev, nil
	}
	lost, notes := excuseLost(o, invs, lostWAL, slot)
	phantoms := 0
	if lostWAL {
		for _, inv := range invs {
			if inv.Name == check.NoPhantom && !inv.OK {
				phantoms += namedIDs(inv)
			}
		}
		notes = append(notes, result.Note{Invariant: check.NoPhantom, Excused: true,
			Says: "expected: a logical walsender streams a commit the synchronous standby has not confirmed, and the promotion lost it — the documented limit of PostgreSQL 15's logical slots"})
	}
	ev.Seen = lostWAL
	ev.Detail = fmt.Sprintf("%s; %d events never streamed: committed before the relay's slot existed on the promoted server; %d effects of events without a fact", slot.Line(), lost.skipped, phantoms)
	return ev, notes
}

// failoverSeen says whether a failover of the run lost WAL, and what
// became of a log relay's slot through it (nil: none was followed).
func failoverSeen(faults []result.Fault) (lostWAL bool, slot *result.SlotFate) {
	for _, f := range faults {
		if f.Kind == fault.KindFailover && f.Hit {
			lostWAL = true
			slot = cmp.Or(f.Slot, slot)
		}
	}
	return lostWAL, slot
}

// lostExcused counts the lost events a failover explains: their effect
// seen committed on the old primary, or skipped by the relay's slot.
type lostExcused struct{ committed, skipped int }

// excuseLost excuses no-lost-event where the failover explains every
// event it names — its effect seen committed on the old primary (the
// promotion lost the commit), or never streamed because the log relay's
// slot was lost (slotSkipped) — and then the run's not converging and not
// catching up after the heal too, where those events are all it lacks. It
// says how many each explains, and its notes (result.Annotated).
func excuseLost(o *history.Record, invs []result.Invariant, lostWAL bool, slot *result.SlotFate) (lostExcused, []result.Note) {
	var n lostExcused
	var notes []result.Note
	if !lostWAL {
		return n, nil
	}
	skipped, canSkip := slotSkipped(o, slot)
	lostAll := false
	for i := range invs {
		if invs[i].Name != check.NoLost || invs[i].OK {
			continue
		}
		other := 0
		for _, id := range lostIDs(invs[i].Violations) {
			switch {
			case o.EffectsCommitted[id]:
				n.committed++
			case canSkip && skipped(id):
				n.skipped++
			default:
				other++
			}
		}
		switch {
		case other == 0 && n.committed+n.skipped > 0:
			lostAll = true
			notes = append(notes, result.Note{Invariant: check.NoLost, Excused: true})
			if n.committed > 0 {
				notes = append(notes, result.Note{Invariant: check.NoLost, Says: "expected: faultline saw each effect commit on the old primary, and the promotion lost the commit — the documented limit"})
			}
			if n.skipped > 0 {
				notes = append(notes, result.Note{Invariant: check.NoLost, Says: fmt.Sprintf("expected: %d committed before the relay's slot existed on the promoted server, never streamed — PostgreSQL 15 keeps no logical slot across a promotion, the documented limit", n.skipped)})
			}
		case o.EffectsCommitted == nil:
			notes = append(notes, result.Note{Invariant: check.NoLost, Says: "not excused by the failover: faultline could not see the effects commit — observe.effects with an event_id column lets it"})
		case slot != nil && !canSkip:
			notes = append(notes, result.Note{Invariant: check.NoLost, Says: "not excused by the failover: without the audit trail and the tap faultline cannot tell the events the lost slot skipped"})
		}
	}
	if !lostAll || n.skipped == 0 {
		return n, notes
	}
	says := fmt.Sprintf("expected: the %d events the lost slot skipped never take effect", n.skipped)
	notes = append(notes, result.Note{Invariant: check.Converged, Excused: true, Says: says}, result.Note{Invariant: check.LiveAfterHeal, Excused: true, Says: says})
	return n, notes
}

// slotSkipped says of a lost event whether the relay's lost slot explains
// it: the slot was not kept by the promoted server, the relay never
// published the event (the tap never saw it), and its outbox row — on the
// promoted server, so its fact survived — was inserted before the relay's
// new slot was first seen there, or the relay never made one. A slot made
// again streams only what commits after it. canTell is false where
// faultline has no tap or audit trail to tell by.
func slotSkipped(o *history.Record, slot *result.SlotFate) (skipped func(id string) bool, canTell bool) {
	if slot == nil || slot.Kept || o.Tap == nil || o.Audit == nil {
		return nil, false
	}
	inserted := map[string]time.Time{}
	for _, a := range o.Audit.Writes() {
		if _, dup := inserted[a.EventID]; a.Op == "INSERT" && a.EventID != "" && !dup {
			inserted[a.EventID] = a.At
		}
	}
	return func(id string) bool {
		at, ok := inserted[id]
		return ok && o.Tap[id] == 0 && (!slot.Recreated || at.Before(slot.SeenAt))
	}, true
}

// namedIDs counts the events inv's violations name.
func namedIDs(inv result.Invariant) int {
	n := 0
	for _, v := range inv.Violations {
		n += len(v.EventIDs)
	}
	return n
}

// lostIDs are the events of lost violations: every one its stages place,
// else the ones it names.
func lostIDs(violations []result.Violation) []string {
	var ids []string
	for _, v := range violations {
		if len(v.Stages) == 0 {
			ids = append(ids, v.EventIDs...)
			continue
		}
		for _, at := range v.Stages {
			ids = append(ids, at...)
		}
	}
	return ids
}

// clusterTrigger fires a production fault mid-stream: after 40 to 80 of
// the 300 orders.
func clusterTrigger(rng *rand.Rand) fault.Trigger {
	return fault.Trigger{AfterOrders: int64(between(rng, 40, 80))}
}

// onCluster is a cluster scenario: the longer traffic, the fault built
// from the seeded trigger, judged by liveness after heal, with the
// convergence bound a cluster's healing needs; tune adjusts it further.
func onCluster(name, window, description string, build func(at fault.Trigger) fault.Fault, tune ...func(*runner.Scenario)) runner.Scenario {
	sc := runner.Scenario{Name: name, Window: window, Description: description, Workload: longer(),
		Faults:     func(rng *rand.Rand) []fault.Fault { return []fault.Fault{build(clusterTrigger(rng))} },
		Invariants: []string{check.LiveAfterHeal}, Converge: clusterConverge}
	for _, t := range tune {
		t(&sc)
	}
	return sc
}

// nodePauseHold outlasts net_ticktime (the local cluster's is short, see
// infra) by enough that the other nodes count the node gone.
const nodePauseHold = 20 * time.Second
