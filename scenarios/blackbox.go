package scenarios

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/proxies"
)

// pastLease is the least a relay is held up for until another takes its
// rows over; the wait runs to at least four of the target's leases
// (fault.TakeoverWait), so a long lease keeps its window.
const pastLease = 5 * time.Second

// heldBack is a latency that holds what a process sends until the fault
// that put it on takes it off, at the cause it waits for: longer than any
// such wait.
const heldBack = time.Hour

// blackBox are the scenarios that need nothing of a target but its target
// file: no crash point, no event log. Each opens its window by combining
// what faultline sees in the target's tables (a trigger it installs in the
// run's database notifies it the moment a writer's transaction commits)
// with kills, freezes and link faults, and reads its verdict from the
// contract, the audit trail of the outbox and the tap queue. Each says in
// its fault's result which commit it saw and when it acted.
func blackBox() []runner.Scenario {
	return []runner.Scenario{
		{
			Name: "blackbox-producer-killed-at-commit", Window: protocol.ProducerAfterCommit,
			Description: "The producer's broker link goes down, then the producer is SIGKILLed the moment a transaction of its commits (seen by a trigger on the facts table): a pipeline that publishes after its commit instead of through an outbox loses the event.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				at := fault.Trigger{AfterOrders: int64(between(rng, 10, 30))}
				after := at
				after.AfterLink = "producer.amqp"
				return []fault.Fault{
					fault.LinkDown{Link: "producer.amqp", Trigger: at, Duration: 4 * time.Second},
					fault.OnCommit{Process: "producer", Table: history.TableFacts, Nth: 1, Trigger: after, Action: fault.ActKill, RestartAfter: 200 * time.Millisecond},
				}
			},
		},
		{
			Name: "blackbox-relay-killed-at-claim", Window: protocol.RelayAfterClaim,
			Description: "relay-1 is SIGKILLed the moment one of its claims commits (a trigger on the outbox tells): its rows must be claimed again by another relay after the lease.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				c, slow := atClaim(rng)
				c.Action, c.RestartAfter = fault.ActKill, 300*time.Millisecond
				return []fault.Fault{slow, c}
			},
			Evidence: []check.Evidence{check.ReclaimedByAnother()},
			Relay:    relayTimed{offset: killedAtMark, noAnyRelay: noBatchStart}.on,
		},
		{
			Name: "blackbox-relay-frozen-past-lease", Window: protocol.ClaimPastLease,
			Description: "relay-1 is frozen (SIGSTOP) the moment one of its claims commits, for longer than the lease; another relay takes the rows over; when relay-1 thaws, its writes to those rows must be refused — the audit trail of the outbox shows any it was allowed.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				c, slow := atClaim(rng)
				c.Action, c.Hold, c.UntilTakeover = fault.ActPause, pastLease, true
				return []fault.Fault{slow, c}
			},
			Evidence: []check.Evidence{check.ReclaimedByAnother()},
			Relay:    relayTimed{offset: frozenAtMark, noAnyRelay: noLeaseAny}.on,
		},
		{
			Name: "blackbox-relay-db-slow-past-lease", Window: protocol.ClaimPastLease,
			Description: "With relay-1's confirms slowed a little, the moment one of its claims commits what it sends its database is held back until another relay's claim of the same row commits (at most four leases; not seen, the window did not open): it publishes and gets its confirms, but its Published write arrives after another relay has taken the rows over. That late write must be refused — the audit trail of the outbox shows any that was allowed.",
			Workload:    workload.Spec{Orders: 150, Concurrency: 4, Pace: 8 * time.Second},
			Faults: func(rng *rand.Rand) []fault.Fault {
				// relay-1 is frozen at its claim while the database latency
				// goes on, so it is in place before its Published write.
				c, slow := atClaim(rng)
				c.ToxicLink, c.Toxic, c.ToxicFor = "relay-1.pg", proxies.Latency{Latency: heldBack, Stream: proxies.Upstream}, pastLease
				c.ToxicUntilOvertaken, c.Action = true, fault.ActNone
				return []fault.Fault{slow, c}
			},
			Evidence: []check.Evidence{check.ReclaimedByAnother()},
			Relay:    relayTimed{offset: dbSlowAtMark, noAnyRelay: noLeaseAny}.on,
		},
		{
			Name: "blackbox-relay-confirmed-not-marked", Window: protocol.RelayAfterConfirm,
			Description: "The moment relay-1's claim commits, what it sends its database is held back (1 s of latency towards PostgreSQL: the claim's own answer still comes back), so it publishes and gets its confirms while its Published write waits on the wire; then that link is cut and relay-1 SIGKILLed. Confirmed, never marked: the rows are published again after the lease, and the consumer must absorb the duplicates.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				c, slow := atClaim(rng)
				c.ToxicLink, c.Toxic, c.ToxicFor = "relay-1.pg", proxies.Latency{Latency: time.Second, Stream: proxies.Upstream}, 600*time.Millisecond
				c.Cut, c.CutAfter, c.CutFor = []history.Link{"relay-1.pg"}, 500*time.Millisecond, 3*time.Second
				c.ActAfter, c.Action, c.RestartAfter = 200*time.Millisecond, fault.ActKill, 300*time.Millisecond
				return []fault.Fault{slow, c}
			},
			Evidence: []check.Evidence{check.RoutedTwice(), check.ReclaimedByAnother()},
			Relay:    relayTimed{offset: confirmedNotMarkedAtPublish, anyRelay: confirmedNotMarkedAtPublish}.on,
		},
		{
			Name: "blackbox-relay-killed-broker-cut", Window: protocol.LogPositionAhead,
			Description: "A relay that tails logical replication loses its broker: what relay-1 sends the broker is dropped, so nothing committed from then on can be published. Once an outbox row commits after the cut and the relay's walsender has sent past it, relay-1 is SIGKILLed the moment its slot's confirmed position passes that row, or once it has answered the server twice without passing it; then the link heals and the relay restarts from its slot. The position may pass only changes the broker confirmed: the server resends from it, and the inbox absorbs what comes twice.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.LogKill{Process: "relay-1", Trigger: fault.Trigger{AfterOrders: int64(between(rng, 10, 30))}, Within: logWithin, RestartAfter: 300 * time.Millisecond}}
			},
			Relay: logOnly,
		},
		{
			Name: "blackbox-relay-stream-cut", Window: protocol.LogStreamCut,
			Description: "A relay that tails logical replication loses its database connection with changes streamed to it and not yet published: what relay-1 sends the broker is dropped, an outbox row commits and the slot's walsender streams it, then relay-1's database link goes down until that walsender is gone. Both links heal and the relay, not restarted, streams again. It must start from its slot's confirmed position, so the rows it was streamed come again and the inbox absorbs what comes twice; a relay that resumes from the last change it received skips them.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.LogStreamCut{Process: "relay-1", Trigger: fault.Trigger{AfterOrders: int64(between(rng, 10, 30))}, Within: logWithin}}
			},
			Relay: logOnly,
		},
		{
			Name: "blackbox-relay-answers-lost", Window: protocol.RelayAfterPublish,
			Description: "The moment relay-1's claim commits, its broker link stops carrying the broker's answers (confirms, returns) with its publishes in flight: an unknown outcome, so the same eventIds must go out again after the lease, never be marked Published blind.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				c, slow := atClaim(rng)
				c.ToxicLink, c.Toxic, c.ToxicFor = "relay-1.amqp", proxies.Timeout{Timeout: 0, Stream: proxies.Downstream}, 4*time.Second
				c.Action = fault.ActNone
				return []fault.Fault{slow, c}
			},
			Evidence: []check.Evidence{check.RoutedTwice()},
			Relay:    relayTimed{offset: answersLostAtPublish, anyRelay: answersLostAtPublish}.on,
		},
		{
			Name: "blackbox-consumer-acks-dropped", Window: protocol.ConsumerAfterCommit,
			Description: "The consumer's acks stop reaching the broker (its link carries nothing from the consumer), then the consumer is SIGKILLed the moment one of its effects commits: committed, not acked. The broker redelivers, and the consumer must not apply the effect twice.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				at := fault.Trigger{AfterOrders: int64(between(rng, 15, 40))}
				after := at
				after.AfterLink = "consumer.amqp"
				return []fault.Fault{
					fault.Toxic{Link: "consumer.amqp", Toxic: proxies.Timeout{Timeout: 0, Stream: proxies.Upstream}, Trigger: at, Duration: 2 * time.Second},
					fault.OnCommit{Process: "consumer", Table: history.TableEffects, Nth: 1, Trigger: after, Action: fault.ActKill, RestartAfter: 300 * time.Millisecond},
				}
			},
			Evidence: []check.Evidence{check.BrokerRedelivered()},
		},
		{
			Name: "blackbox-consumer-db-cut-with-deliveries", Window: protocol.ConsumerAfterReceive,
			Description: "Every statement the consumer sends its database is slowed by 300 ms, so its transactions are long; once pg_stat_activity shows one of them under way (it has written), its database link is cut while deliveries keep coming; once the broker's management API shows the consumer holding deliveries it took after the cut (acked since the cut — a consumer that acks on receipt, with nothing committed — or, given 3 s to show such an ack, held unacked), the consumer is SIGKILLed with them in hand, none of them committed: none may have been acked, so the broker redelivers them and every event still takes effect once.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				// Slowed first, the consumer is mid-transaction when the cut
				// comes: a consumer that acked on receipt has acked what
				// those transactions held, and loses it. Unslowed, it is
				// mostly between deliveries, and (the reference's variant
				// backs off from a dead database before it takes another)
				// may have acked nothing it loses.
				at := fault.Trigger{AfterOrders: int64(between(rng, 15, 40))}
				return []fault.Fault{
					fault.Toxic{Link: "consumer.pg", Toxic: proxies.Latency{Latency: 300 * time.Millisecond, Stream: proxies.Upstream}, Trigger: at, Duration: 1500 * time.Millisecond},
					// The cut comes once the slowing has landed and a transaction
					// of the consumer's is under way (pg_stat_activity): a
					// consumer that acks on receipt has acked its deliveries
					// and loses them; cut between transactions, it had acked
					// nothing it then lost.
					fault.Unacked{Process: "consumer", Trigger: fault.Trigger{AfterOrders: at.AfterOrders, AfterLink: "consumer.pg"},
						Cut: "consumer.pg", MidTransaction: true, Action: fault.ActKill, RestartAfter: 200 * time.Millisecond},
				}
			},
			Evidence: []check.Evidence{check.BrokerRedelivered()},
		},
		{
			Name: "blackbox-consumer-db-cut-mid-transaction", Window: protocol.ConsumerDBCommitCut,
			Description: "One of the consumer's transactions is held at its COMMIT (a deferred trigger faultline puts on the effects table sleeps there); while pg_stat_activity shows its backend asleep in that COMMIT, the consumer's database link is cut for 2 s and the backend terminated: the COMMIT the consumer sent meets a dead connection, and it cannot know whether the transaction committed (it did not). It must not ack it, and every event still takes effect once.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.HeldCommit{Process: "consumer", Table: history.TableEffects, Nth: 1,
					Trigger: fault.Trigger{AfterOrders: int64(between(rng, 15, 40))}, Cut: "consumer.pg", CutFor: 2 * time.Second}}
			},
		},
		{
			Name: "blackbox-outbox-commit-order", Window: protocol.OutboxCommitOrder,
			Description: "Chosen outbox inserts are held at their COMMIT — a deferred constraint trigger faultline puts on the outbox waits there — until every relay is seen past them: each claiming relay writing an insert made after them (the audit trail), or, for relays that keep one position, a read of the outbox finished after such an insert committed (pg_stat_activity). A relay that reads the outbox by a position (a SERIAL id, an offset) has then moved past such a row and never publishes it; one that claims rows by their status publishes every one. A hold that ends (at most 5 s) with a relay not seen past it does not open the window; a producer whose commits wait for one another cannot have their order inverted, and the scenario is not run.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				// Each held insert waits until every relay is past it: the
				// fault's result names those the relays passed so.
				return []fault.Fault{fault.CommitOrder{Trigger: fault.Trigger{AfterOrders: int64(between(rng, 10, 30))},
					Every: between(rng, 3, 5), Holds: 5, Hold: fault.CommitOrderHold, Duration: 3 * time.Second}}
			},
			Relay: notOnLog(noCommitOrderOnLog),
		},
		{
			Name: "blackbox-unroutable-then-routable", Window: protocol.QueueUnroutable,
			Description: "The consumer's queue (and faultline's tap) lose their bindings for at least 3 s and until the relays' retries show their shape in the audit trail (a row given up on, rests after later retries growing past the undelayed waits beside them, or flat ones held until a row is given up on), at most 60 s (no shape by then leaves the run indeterminate): publishes are unroutable and must come back to the relay, be retried with backoff and delivered once the bindings are back, none given up. Without a retry-budget setting: the outage the target file says it rides out, or 3 s with a row given up on flagged, not lost.",
			Workload:    steady(),
			Prefers:     map[string]string{retryBudget: strconv.Itoa(longOutageBudget)},
			Invariants:  []string{check.NoneGaveUp},
			Without:     ridesOutInstead(3 * time.Second),
			Faults: func(rng *rand.Rand) []fault.Fault {
				// A budget of 30 backs off far longer than backoff takes to
				// show: a relay that gives a row up inside the outage did
				// not back off.
				return []fault.Fault{shapedOutage(fault.Trigger{AfterOrders: int64(between(rng, 10, 30))}, 3*time.Second, time.Minute, longOutageBudget)}
			},
			// A relay whose outbox has no status writes no retry to see.
			Evidence: []check.Evidence{check.Optional(check.RetriedInAudit())},
		},
		{
			Name: "blackbox-poison-message", Window: protocol.QueuePoison,
			Description: "Malformed messages are published to the target's exchange: each must end in its dead-letter queue (the broker's count), and never block the valid events behind them.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Poison{Count: 5, Trigger: fault.Trigger{AfterOrders: int64(between(rng, 5, 30))}}}
			},
			Invariants: []string{check.PoisonAccounted, check.OnlyPoisonDead},
			Evidence:   []check.Evidence{check.DeadLetterQueueHolds(5)},
		},
	}
}

// atClaim is relay-1's first claim after a trigger, with its broker's
// answers slowed from the trigger on: the fault holds the claim at its
// COMMIT, freezes relay-1 there and lets the claim commit, then checks it
// has not gone on to write the row (fault.OnCommit), so whether the window
// opened is what it saw. Where the claim cannot be held (no outbox status
// column) relay-1 is frozen once the commit is told, and the slowed
// confirms make it likely that the freeze lands before relay-1 marks.
func atClaim(rng *rand.Rand) (fault.OnCommit, fault.Toxic) {
	at := fault.Trigger{AfterOrders: int64(between(rng, 10, 30))}
	c := fault.OnCommit{Process: "relay-1", Table: history.TableOutbox, Status: "Processing", Nth: 1,
		Trigger: fault.Trigger{AfterOrders: at.AfterOrders, AfterLink: "relay-1.amqp"}}
	slow := fault.Toxic{Link: "relay-1.amqp", Toxic: proxies.Latency{Latency: time.Second}, Trigger: at, Duration: 8 * time.Second}
	return c, slow
}
