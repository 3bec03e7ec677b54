// Package scenarios is faultline's catalogue: one scenario per failure
// window of the outbox → RabbitMQ → inbox pipeline, each a plain value that
// `go test ./scenarios` and the faultline CLI run.
package scenarios

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/proxies"
)

// between picks a number in [lo, hi] from the seeded schedule.
func between(rng *rand.Rand, lo, hi int) int { return lo + rng.IntN(hi-lo+1) }

// steady is the default traffic: orders spread over a few seconds so faults
// land mid-stream.
func steady() workload.Spec { return workload.Steady() }

// inboxRetention is the target's setting for its consumer's own inbox
// retention, and ownRetention the one inbox-own-retention-replay sets: a
// paced run of 5 s has rows older than it to delete before it ends.
const (
	inboxRetention = "inbox-retention"
	ownRetention   = 4 * time.Second
)

// steadyThenMore is steady traffic and ten orders more once the faults
// have ended, for a scenario whose evidence is a process seen working
// again after them.
func steadyThenMore() workload.Spec {
	s := workload.Steady()
	s.AfterFaults = 10
	return s
}

// All returns every scenario, by name.
func All() []runner.Scenario {
	all := []runner.Scenario{
		{
			Name: "producer-crash-after-commit", Window: protocol.ProducerAfterCommit,
			Description: "The producer is SIGKILLed right after committing a fact and its outbox row; the outbox still carries the event.",
			Workload:    steady(),
			Also:        []workload.Spec{workload.BurstSpec()},
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "producer", Point: protocol.ProducerAfterCommit, Action: crashpoint.Kill, Hit: int64(between(rng, 10, 40)), RestartAfter: 200 * time.Millisecond}}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.ProducerAfterCommit)},
		},
		{
			Name: "producer-crash-before-commit", Window: protocol.ProducerBeforeCommit,
			Description: "The producer is SIGKILLed with the fact and its outbox row written but not committed: both roll back together, nothing is published for a fact that does not exist.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "producer", Point: protocol.ProducerBeforeCommit, Action: crashpoint.Kill, Hit: int64(between(rng, 10, 40)), RestartAfter: 200 * time.Millisecond}}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.ProducerBeforeCommit)},
		},
		cutAtCommit("producer-db-cut-during-commit", protocol.ProducerDBCommitCut, "producer", protocol.ProducerBeforeCommit,
			"The producer's database link goes down while an order's transaction is about to commit: the COMMIT fails and the producer cannot know its outcome, so it must not answer the order as created; the client tries again once the link is back. Every order the producer answered as created is in its database."),
		{
			Name: "relay-crash-after-claim", Window: protocol.RelayAfterClaim,
			Description: "A relay is SIGKILLed holding a claimed batch; after the lease another claim takes the rows.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "relay-1", Point: protocol.RelayAfterClaim, Action: crashpoint.Kill, Hit: int64(between(rng, 2, 5)), RestartAfter: 300 * time.Millisecond}}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.RelayAfterClaim), check.ReclaimedAfterLease()},
			Relay:    fromOutside(protocol.RelayAfterClaim, asBlackBox("blackbox-relay-killed-at-claim")),
		},
		{
			Name: "relay-crash-after-publish", Window: protocol.RelayAfterPublish,
			Description: "A relay is SIGKILLed after publishing a batch, before any confirm: the outcome is unknown, so the same eventIds go out again after the lease.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "relay-1", Point: protocol.RelayAfterPublish, Action: crashpoint.Kill, Hit: int64(between(rng, 2, 5)), RestartAfter: 300 * time.Millisecond}}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.RelayAfterPublish), check.Republished()},
			Relay:    fromOutside(protocol.RelayAfterPublish, killedAtPublish),
		},
		{
			Name: "relay-crash-after-confirm", Window: protocol.RelayAfterConfirm,
			Description: "A relay is SIGKILLed after its confirms, before marking Published: the rows are republished after the lease and the inbox absorbs the duplicates.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "relay-1", Point: protocol.RelayAfterConfirm, Action: crashpoint.Kill, Hit: int64(between(rng, 2, 5)), RestartAfter: 300 * time.Millisecond}}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.RelayAfterConfirm), check.Republished(), check.DuplicateAbsorbed()},
			Relay:    fromOutside(protocol.RelayAfterConfirm, asBlackBox("blackbox-relay-confirmed-not-marked")),
		},
		{
			Name: "relay-pause-past-lease", Window: protocol.ClaimPastLease,
			Description: "A relay freezes (SIGSTOP) after its confirms, holding its claim past the lease; another relay takes the rows over; when it resumes, its Published write is fenced.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "relay-1", Point: protocol.RelayAfterConfirm, Action: crashpoint.Pause, Hit: int64(between(rng, 2, 4)), Hold: 5 * time.Second, UntilTakeover: true}}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.RelayAfterConfirm), check.AtLeast(1, eventlog.Fenced), check.DuplicateAbsorbed()},
			Relay:    fromOutside(protocol.RelayAfterConfirm, asBlackBox("blackbox-relay-frozen-past-lease")),
		},
		{
			Name: "relay-db-slow-past-lease", Window: protocol.ClaimPastLease,
			Description: "relay-1 is frozen after its confirms, just before it writes Published, while what it sends its database is held back; thawed, its Published write waits on the wire until another relay is seen taking the rows over (at most four leases; not seen, the window did not open). Then the late write arrives and must be fenced.",
			Workload:    workload.Spec{Orders: 150, Concurrency: 4, Pace: 8 * time.Second},
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Toxic{Link: "relay-1.pg", Toxic: proxies.Latency{Latency: heldBack, Stream: proxies.Upstream},
					Trigger: fault.Trigger{AfterOrders: int64(between(rng, 10, 30))}, Duration: pastLease, UntilTakeover: true,
					At: &fault.Sync{Process: "relay-1", Point: protocol.RelayAfterConfirm}}}
			},
			Evidence: []check.Evidence{check.AtLeast(1, eventlog.Fenced)},
			Relay:    fromOutside(protocol.RelayAfterConfirm, asBlackBox("blackbox-relay-db-slow-past-lease")),
		},
		{
			Name: "amqp-reset-before-confirm", Window: protocol.RelayAfterPublish,
			Description: "relay-1's broker link stops carrying the broker's answers while publishes are in flight: no confirm arrives, the outcome is unknown, and the rows are republished with the same eventIds.",
			Workload:    workload.Spec{Orders: 150, Concurrency: 4, Pace: 8 * time.Second},
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Toxic{Link: "relay-1.amqp", Toxic: proxies.Timeout{Timeout: 0},
					Trigger: fault.Trigger{AfterOrders: int64(between(rng, 15, 40))}, Duration: 5 * time.Second}}
			},
			Evidence: []check.Evidence{check.AtLeast(1, eventlog.Unknown), check.UnknownRepublished()},
			// A relay that opens a channel and waits for its answers before
			// each publish (watermill-amqp) has a publish in doubt only for
			// a moment of each: on a relay that is not a claim relay the
			// answers go the moment a publish is seen, its confirm held
			// back by latency.
			Relay: relayTimed{offset: answersLostAtPublish, anyRelay: answersLostAtPublish}.on,
		},
		{
			Name: "unroutable-then-routable", Window: protocol.QueueUnroutable,
			Description: "The queue's binding is removed: mandatory publishes come back as basic.return, are retried with backoff, and are delivered once the binding is restored.",
			Workload:    steady(),
			Prefers:     map[string]string{retryBudget: "30"},
			// The binding is back long before the budget's backoff runs out:
			// an event that ends Failed gave up early. Without the setting,
			// the outage the target says it rides out, or Failed flagged.
			Invariants: []string{check.NoneGaveUp},
			Without:    ridesOutInstead(3 * time.Second),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Unbind{Trigger: fault.Trigger{AfterOrders: int64(between(rng, 10, 30))}, Duration: 3 * time.Second}}
			},
			Evidence: []check.Evidence{check.AtLeast(1, eventlog.Returned), check.AtLeast(1, eventlog.Retry)},
		},
		{
			Name: "unroutable-budget-exhausted", Window: protocol.QueueUnroutable,
			Description: "The binding never comes back: returned rows exhaust the retry budget and become Failed with an alert; nothing else is lost.",
			Workload:    steady(),
			// Its point is the budget running out: a budget of 3 gives out in
			// well under the run; the target's own might outlast the run, so
			// without the setting the scenario is not run.
			Settings: map[string]string{retryBudget: "3"},
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Unbind{Trigger: fault.Trigger{AfterOrders: int64(between(rng, 20, 60))}}}
			},
			Evidence: []check.Evidence{check.AtLeast(1, eventlog.Returned), check.FailedFlagged(1)},
		},
		{
			Name: "broker-nack", Window: protocol.BrokerNack,
			Description: "The consumer's queue holds at most 5 ready messages with overflow reject-publish; the consumer is frozen until the broker refuses a publish to the full queue (at most 20 s), and the nacked publishes are retried and all delivered.",
			Workload:    steady(),
			// One channel of 32 unacked: with the consumer's default four,
			// the frozen consumer would hold the whole stream unacked and the
			// queue would never fill. The queue's length and the channels
			// change the system's shape — without them the broker never
			// nacks — so they are required; the budget only keeps the nacked
			// rows from giving up while the consumer is frozen.
			Settings: map[string]string{"queue-max-length": "5", "consumer-channels": "1"},
			Prefers:  map[string]string{retryBudget: "40"},
			Without:  ownBudget,
			// The point is hit once per batch the consumer takes, and a
			// batch is whatever is buffered (up to the target's batch size),
			// so how many events a batch holds varies. Frozen at one of its
			// first batches, the
			// consumer has taken only those when it stops, so most of the
			// stream is still to be published into the full queue however
			// fast the machine; frozen later, the queue could take every
			// remaining publish (its unacked and ready room, and what a
			// quorum queue takes past its limit) and refuse none.
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "consumer", Point: protocol.ConsumerAfterReceive, Action: crashpoint.Pause, Hit: int64(between(rng, 1, 3)), Hold: 20 * time.Second, UntilNacked: true}}
			},
			Evidence: []check.Evidence{check.AtLeast(1, eventlog.Nacked), check.AtLeast(1, eventlog.Retry)},
		},
		{
			Name: "broker-restart", Window: protocol.BrokerRestart,
			Description: "The RabbitMQ node is SIGKILLed mid-stream and started again; relays and consumer reconnect without a restart and nothing is lost.",
			Workload:    steadyThenMore(),
			Exclusive:   true,
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.BrokerRestart{Trigger: fault.Trigger{AfterOrders: int64(between(rng, 20, 60))}, Down: 500 * time.Millisecond}}
			},
			// Without event logs the restart itself (the fault happened) and
			// every effect taken once after it are what the run rests on.
			Evidence: []check.Evidence{check.Optional(reconnected())},
		},
		{
			Name: "consumer-batch-duplicate", Window: protocol.ConsumerAfterReceive,
			Description: "The consumer is frozen holding a batch while faultline publishes the producer's next event twice (its eventId, the target's payload) and the broker hands every queued message to the consumer; thawed, its next batch holds both copies: the inbox row the batch inserts for the first must keep the second from taking effect.",
			Workload:    steady(),
			// One channel: with several, the broker spreads the two copies
			// over them, a batch each.
			Settings: map[string]string{"consumer-channels": "1"},
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.BatchDuplicate{Consumer: "consumer", Hit: 1, Trigger: fault.Trigger{AfterOrders: int64(between(rng, 10, 30))}}}
			},
			Evidence: []check.Evidence{check.TwoCopiesInOneBatch()},
		},
		{
			Name: "consumer-crash-after-receive", Window: protocol.ConsumerAfterReceive,
			Description: "The consumer is SIGKILLed after receiving, before its transaction: the broker redelivers and the effect happens once.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "consumer", Point: protocol.ConsumerAfterReceive, Action: crashpoint.Kill, Hit: int64(between(rng, 3, 8)), RestartAfter: 200 * time.Millisecond}}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.ConsumerAfterReceive), check.Redelivered()},
		},
		{
			Name: "consumer-crash-after-commit", Window: protocol.ConsumerAfterCommit,
			Description: "The consumer is SIGKILLed after committing, before acking: the broker redelivers and the inbox absorbs it.",
			Workload:    steady(),
			Also:        []workload.Spec{workload.ConsumerBacklogSpec()},
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "consumer", Point: protocol.ConsumerAfterCommit, Action: crashpoint.Kill, Hit: int64(between(rng, 3, 8)), RestartAfter: 200 * time.Millisecond}}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.ConsumerAfterCommit), check.RedeliveryAbsorbed()},
		},
		{
			Name: "consumer-crash-before-commit", Window: protocol.ConsumerBeforeCommit,
			Description: "The consumer is SIGKILLed with the inbox row and the reservation written in one transaction, not yet committed: both roll back, the broker redelivers, the effect happens once.",
			Workload:    steady(),
			Also:        []workload.Spec{workload.ConsumerBacklogSpec()},
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "consumer", Point: protocol.ConsumerBeforeCommit, Action: crashpoint.Kill, Hit: int64(between(rng, 3, 8)), RestartAfter: 200 * time.Millisecond}}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.ConsumerBeforeCommit), check.Redelivered()},
		},
		{
			Name: "consumer-db-down", Window: protocol.ConsumerDBDown,
			Description: "The consumer's database link is down for a while: transactions fail and are retried, nothing is acked before its commit, no effect lost or doubled.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.LinkDown{Link: "consumer.pg", Trigger: fault.Trigger{AfterOrders: int64(between(rng, 15, 40))}, Duration: 2 * time.Second}}
			},
			Evidence: []check.Evidence{processErrors("consumer")},
		},
		{
			Name: "relay-db-down", Window: protocol.RelayDBDown,
			Description: "relay-1's database link is down for a while: its claims and status writes fail and are retried, its rows wait for their lease, and the relay carries on when the link is back, without a restart.",
			Workload:    steadyThenMore(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.LinkDown{Link: "relay-1.pg", Trigger: fault.Trigger{AfterOrders: int64(between(rng, 15, 40))}, Duration: 2 * time.Second}}
			},
			Evidence: []check.Evidence{processErrors("relay-1"), resumedAfter("relay-1", eventlog.Marked)},
		},
		{
			Name: "relay-broker-link-flaps", Window: protocol.LinkFlapping,
			Description: "relay-1's broker link drops five times in a row, 300 ms down and 300 ms up, mid-stream: each reconnection is cut short, publishes in flight lose their confirms, and every event is still delivered with its effect once.",
			Workload:    steadyThenMore(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Flap{Link: "relay-1.amqp", Trigger: fault.Trigger{AfterOrders: int64(between(rng, 15, 40))},
					Times: 5, Down: 300 * time.Millisecond, Up: 300 * time.Millisecond}}
			},
			// The drops reached the relay, and it published again after the
			// last one without a restart.
			Evidence: []check.Evidence{processErrors("relay-1"), resumedAfter("relay-1", eventlog.Confirmed)},
		},
		{
			Name: "poison-message", Window: protocol.QueuePoison,
			Description: "Malformed messages (not JSON, no eventId) are dead-lettered, logged, and never block the valid events behind them.",
			Workload:    steady(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Poison{Count: 5, Trigger: fault.Trigger{AfterOrders: int64(between(rng, 5, 30))}}}
			},
			Invariants: []string{check.PoisonAccounted, check.OnlyPoisonDead},
			Evidence:   []check.Evidence{check.DeadLettered(5)},
		},
		{
			Name: "aggregate-order", Window: protocol.AggregateOvertaken,
			Description: "Facts go through their create and two follow-up steps (the reference: created → paid → cancelled) through two relays while one relay dies holding claims: the consumer parks an event that arrives ahead of its predecessor and applies each order's events in sequence.",
			Workload:    workload.Spec{Orders: 60, Concurrency: 6, EventsPerOrder: 3, Pace: 4 * time.Second, StepDelay: 300 * time.Millisecond},
			Invariants:  []string{check.AggregateOrder},
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{
					// One of relay-1's first claims: made before any order's
					// next step exists (300 ms after its creation), it holds
					// only order.created events, whose successors then arrive
					// first. A later claim may hold only last steps, with no
					// successor to overtake them (seen: a lone order.cancelled).
					fault.Crash{Process: "relay-1", Point: protocol.RelayAfterClaim, Action: crashpoint.Kill, Hit: int64(between(rng, 1, 3)), RestartAfter: 300 * time.Millisecond},
					fault.Toxic{Link: "relay-2.amqp", Toxic: proxies.Latency{Latency: 100 * time.Millisecond, Jitter: 50 * time.Millisecond}, Trigger: fault.Trigger{AfterOrders: 10}, Duration: 3 * time.Second},
				}
			},
			Evidence: []check.Evidence{check.AtLeast(1, eventlog.HeldBack)},
			Relay:    fromOutside(protocol.RelayAfterClaim, overtakenFromOutside),
		},
		{
			Name: "relay-crash-during-renewal", Window: protocol.RelayBeforeRenew,
			Description: "With lease renewal on and confirms slowed by latency on relay-1's broker link, relay-1 is killed as it renews: its rows are taken over after the lease.",
			Workload:    steady(),
			// Renewal is the window itself: a target that cannot turn it on
			// does not run the scenario.
			Settings: map[string]string{"lease-renewal": "400ms"},
			Faults: func(rng *rand.Rand) []fault.Fault {
				at := fault.Trigger{AfterOrders: int64(between(rng, 5, 20))}
				return []fault.Fault{
					// Landed while relay-1 holds a published batch for 0.9 s,
					// past two 0.4 s renewal ticks: one renewal done, the
					// kill at the second (see relay-renewal-pause-past-lease).
					fault.Toxic{Link: "relay-1.amqp", Toxic: proxies.Latency{Latency: 1500 * time.Millisecond}, Trigger: at, Duration: 6 * time.Second,
						At: &fault.Sync{Process: "relay-1", Point: protocol.RelayAfterPublish}},
					fault.Crash{Process: "relay-1", Point: protocol.RelayBeforeRenew, Action: crashpoint.Kill, Hit: 2, RestartAfter: 300 * time.Millisecond, Trigger: at},
				}
			},
			Evidence: []check.Evidence{check.AtLeast(1, eventlog.Renewed), check.CrashPointHit(protocol.RelayBeforeRenew), check.ReclaimedAfterLease()},
		},
		{
			Name: "inbox-retention-replay", Window: protocol.InboxRetention,
			Description: "An event is replayed inside the inbox retention (absorbed), then again after its inbox row expired: it takes effect twice, and the checker reports exactly that duplicate — the article's documented retention limit.",
			Workload:    workload.Spec{Orders: 30, Concurrency: 3},
			Instances:   map[string]int{"relay": 1},
			Faults: func(*rand.Rand) []fault.Fault {
				return []fault.Fault{fault.RetentionReplay{Consumer: "consumer", Trigger: fault.Trigger{AfterOrders: 30}}}
			},
			Evidence: []check.Evidence{check.DuplicateAbsorbed()},
			Expect:   expectReplayedDuplicate,
			Limit:    true,
		},
		{
			Name: "inbox-own-retention-replay", Window: protocol.InboxRetention,
			Description: "The consumer's own inbox cleanup runs every 100 ms with a retention of 4 s. Once it is seen deleting a row (the inbox query), an event the consumer applied after that is taken; once the cleanup is seen deleting again, a copy of the event is published: still inside the retention, its inbox row must be there, and the inbox absorbs the copy.",
			Workload:    steady(),
			Settings:    map[string]string{inboxRetention: ownRetention.String()},
			Faults: func(*rand.Rand) []fault.Fault {
				return []fault.Fault{fault.OwnRetention{Consumer: "consumer", Retention: ownRetention, Trigger: fault.Trigger{AfterOrders: 20}}}
			},
			Evidence: []check.Evidence{check.DuplicateAbsorbed()},
		},
		cutAtCommit("consumer-db-cut-during-commit", protocol.ConsumerDBCommitCut, "consumer", protocol.ConsumerBeforeCommit,
			"The consumer's database link goes down while a batch's transaction is about to commit: the COMMIT fails and the consumer cannot know its outcome, so it must not ack; the broker's redelivery (or its own retry) is absorbed or applied once the link is back."),
		{
			Name: "relay-pause-before-retry-past-lease", Window: protocol.RelayBeforeRetry,
			Description: "The queue's bindings go away, so relay-1's publishes come back as returns; relay-1 freezes before writing its retries until relay-2 is seen (audit trail) claiming a row of each claim it holds; when relay-1 resumes, its late retry write must be refused (fenced).",
			Workload:    steady(),
			// The budget keeps the rows bouncing through the 6 s outage; with
			// the target's own, a row may end Failed (flagged) and the late
			// write is fenced all the same.
			Prefers: map[string]string{retryBudget: "30"},
			Without: ownBudget,
			Faults: func(rng *rand.Rand) []fault.Fault {
				at := fault.Trigger{AfterOrders: int64(between(rng, 10, 30))}
				return []fault.Fault{
					// relay-1 stays frozen until relay-2 has claimed a row of
					// each claim relay-1 holds at the point (a relay keeps
					// more than one batch in flight; the one at the point
					// need not be the newest); the bindings stay away until
					// its late retry write is made, so it meets relay-2's
					// claim of a row still bouncing, not one published
					// (which a schema may refuse to send back to Pending).
					fault.Unbind{Trigger: at, Duration: 6 * time.Second, UntilThawed: "relay-1"},
					fault.Crash{Process: "relay-1", Point: protocol.RelayBeforeRetry, Action: crashpoint.Pause, Hit: 1, Trigger: at, Hold: 3 * time.Second, UntilTakeover: true},
				}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.RelayBeforeRetry), check.AtLeast(1, eventlog.Fenced)},
		},
		{
			Name: "relay-renewal-pause-past-lease", Window: protocol.RelayBeforeRenew,
			Description: "With lease renewal on and confirms slowed on relay-1's broker link, relay-1 freezes as it is about to renew, past its lease; relay-2 takes the rows over; when relay-1 resumes, its renewal must extend nothing (the claim is lost).",
			Workload:    steady(),
			Settings:    map[string]string{"lease-renewal": "400ms"},
			Faults: func(rng *rand.Rand) []fault.Fault {
				at := fault.Trigger{AfterOrders: int64(between(rng, 5, 20))}
				return []fault.Fault{
					// The toxic lands while relay-1 holds a published batch
					// (0.5 s at relay.after-publish, longer than the 0.4 s
					// renewal period), so relay-1 is surely connected and
					// working: an order count alone says nothing of relay-1,
					// which may still be in its first connection handshake
					// and connect only after the last order, with nothing
					// left to renew.
					fault.Toxic{Link: "relay-1.amqp", Toxic: proxies.Latency{Latency: 1500 * time.Millisecond}, Trigger: at, Duration: 8 * time.Second,
						At: &fault.Sync{Process: "relay-1", Point: protocol.RelayAfterPublish}},
					// Hit 1 counted from the same trigger: the first renewal
					// tick of a batch held out, by the sync above or by the
					// slowed confirms. Armed at start, a batch slow to confirm
					// before the trigger could take the hit, and relay-1,
					// frozen past the last order, never reach the sync.
					fault.Crash{Process: "relay-1", Point: protocol.RelayBeforeRenew, Action: crashpoint.Pause, Hit: 1, Hold: 5 * time.Second, Trigger: at, UntilTakeover: true},
				}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.RelayBeforeRenew), check.AtLeast(1, eventlog.ClaimLost), check.ReclaimedAfterLease()},
		},
		{
			Name: "unroutable-short-outage", Window: protocol.QueueUnroutable,
			Description: "The queue's bindings go away for at least 1.5 s and until the relays' retries show their shape in the audit trail, at most 20 s: returned publishes must back off (a row's rests grow from attempt to attempt while younger rows are claimed), and the bindings come back well inside a budget of 8; every event is delivered once they are back, none may end Failed. A relay that does not back off spends its budget in it however slow the machine; an outage in which no shape showed by 20 s leaves the run indeterminate.",
			Workload:    steady(),
			Prefers:     map[string]string{retryBudget: strconv.Itoa(shortOutageBudget)},
			Invariants:  []string{check.NoneGaveUp},
			Without:     shortOutageInstead,
			Faults: func(rng *rand.Rand) []fault.Fault {
				// Backoff shows by a row's third retry; a budget of 8 backs
				// off for several times as long again before a row is given
				// up on.
				return []fault.Fault{shapedOutage(fault.Trigger{AfterOrders: int64(between(rng, 10, 30))}, 1500*time.Millisecond, 20*time.Second, shortOutageBudget)}
			},
			Evidence: []check.Evidence{check.AtLeast(1, eventlog.Returned), check.AtLeast(1, eventlog.Retry)},
		},
		randomChaos(),
	}
	all = append(all, blackBox()...)
	all = append(all, underLoad()...)
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all
}

// Lookup finds a scenario of any profile by name.
func Lookup(name string) (runner.Scenario, error) {
	var names []string
	for _, s := range Every() {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return runner.Scenario{}, fmt.Errorf("unknown scenario %q (known: %v)", name, names)
}

// reconnected: every process that talks to the broker connected again.
func reconnected() check.Evidence {
	return check.Custom("every broker client reconnected", func(o *history.Record) (bool, string) {
		n := map[string]int{}
		for _, e := range o.Log {
			if e.Event == eventlog.Connected {
				n[e.Process]++
			}
		}
		again := 0
		for _, c := range n {
			if c >= 2 {
				again++
			}
		}
		return len(n) > 0 && again == len(n), fmt.Sprintf("%d of %d clients connected again", again, len(n))
	}, history.SourceRelayLog, history.SourceConsumerLog)
}

// resumedAfter: the process logged event after its last error, i.e. it
// went on working after the fault without a restart.
func resumedAfter(ref history.Ref, event string) check.Evidence {
	return orElse(check.Custom(string(ref)+" worked again after the fault", func(o *history.Record) (bool, string) {
		process := o.Instance(ref)
		lastErr, starts := -1, 0
		for i, e := range o.Log {
			if e.Process != process {
				continue
			}
			switch e.Event {
			case eventlog.ErrorOccurred, eventlog.Disconnected:
				lastErr = i
			case eventlog.Started:
				starts++
			}
		}
		if lastErr < 0 {
			return false, "no error logged"
		}
		for _, e := range o.Log[lastErr+1:] {
			if e.Process == process && e.Event == event {
				return starts == 1, fmt.Sprintf("%s after its last error, %d start(s)", event, starts)
			}
		}
		return false, "nothing " + event + " after its last error"
	}, history.LogSource(ref.Role())), check.RestsOnFaultAndInvariants(string(ref)+" worked again after the fault"))
}

// cutAtCommit is a scenario that takes process's database link down while
// the process is frozen at point, just before its COMMIT (where the
// target maps no such point, its COMMIT is held and its backend
// terminated instead): the COMMIT meets a dead connection, its outcome
// unknown to the process, and the link comes back 2 s later.
func cutAtCommit(name, window string, process history.Ref, point, description string) runner.Scenario {
	return runner.Scenario{
		Name: name, Window: window, Description: description,
		Workload: steady(),
		Faults: func(rng *rand.Rand) []fault.Fault {
			return []fault.Fault{fault.LinkDown{Link: process.DB(), Trigger: fault.Trigger{AfterOrders: int64(between(rng, 15, 40))}, Duration: 2 * time.Second,
				At: &fault.Sync{Process: process, Point: point}}}
		},
		Evidence: []check.Evidence{check.CrashPointHit(point), sawTheCut(process)},
	}
}

// sawTheCut: the process noticed the cut. The producer's is read from its
// client's side, on any target: a request it failed (a 5xx, or no
// answer) that the workload sent again; an event log need not log
// errors. A consumer has no client, so its own log tells.
func sawTheCut(process history.Ref) check.Evidence {
	if process != "producer" {
		return processErrors(process)
	}
	return check.Custom("producer failed a request and the client sent it again", func(o *history.Record) (bool, string) {
		return o.RequestsFailed > 0, fmt.Sprintf("%d requests failed and sent again", o.RequestsFailed)
	})
}

// processErrors: the process logged at least one error (it noticed the fault).
func processErrors(ref history.Ref) check.Evidence {
	return orElse(check.Custom(string(ref)+" saw the fault and retried", func(o *history.Record) (bool, string) {
		process := o.Instance(ref)
		n := 0
		for _, e := range o.Log {
			if e.Process == process && (e.Event == eventlog.ErrorOccurred || e.Event == eventlog.Disconnected) {
				n++
			}
		}
		return n > 0, fmt.Sprintf("%d errors logged", n)
	}, history.LogSource(ref.Role())), check.RestsOnFaultAndInvariants(string(ref)+" saw the fault and retried"))
}

// orElse is e, shown by alt where the target does not give what e needs.
func orElse(e, alt check.Evidence) check.Evidence {
	e.Else = &alt
	return e
}

// expectReplayedDuplicate accepts exactly one duplicate effect, of exactly
// the replayed event, and nothing else broken.
func expectReplayedDuplicate(o *history.Record, faults []result.Fault, invs []result.Invariant) (result.Evidence, []result.Note) {
	ev := result.Evidence{Name: "the checker reports exactly the replayed event's duplicate"}
	var replayed []string
	for _, f := range faults {
		replayed = append(replayed, f.EventIDs...)
	}
	extra, ids := check.DuplicateEffects(o)
	ev.Detail = fmt.Sprintf("replayed %v; duplicates reported %v (%d extra)", replayed, ids, extra)
	if len(replayed) != 1 || extra != 1 || len(ids) != 1 || ids[0] != replayed[0] {
		return ev, nil
	}
	for _, inv := range invs {
		ev.Seen = ev.Seen || inv.Name == check.NoDuplicate && !inv.OK
	}
	return ev, []result.Note{{Invariant: check.NoDuplicate, Excused: true, Says: "expected: replay after the inbox retention, the article's documented limit"}}
}
