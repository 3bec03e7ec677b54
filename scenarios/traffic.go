package scenarios

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/proxies"
)

// underLoad are the scenarios whose window needs more than a trickle: a
// full claim, a full prefetch, messages queued when the broker dies,
// poison between valid deliveries, many requests in flight. Each runs
// under its traffic profile (workload/profile.go), whose shape is part of
// its evidence: a run where the shape never showed is indeterminate.
func underLoad() []runner.Scenario {
	return []runner.Scenario{
		{
			Name: "relay-backlog-crash-after-publish", Window: protocol.RelayAfterPublish,
			Description: "The relays are frozen while 200 facts pile up in the outbox; released, each claims a full batch, and relay-1 is SIGKILLed after publishing its first: a full batch of unknown outcome, republished after the lease.",
			Workload:    workload.RelayBacklogSpec(),
			Faults: func(*rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "relay-1", Point: protocol.RelayAfterPublish, Action: crashpoint.Kill, Hit: 1, RestartAfter: 300 * time.Millisecond}}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.RelayAfterPublish), check.Republished()},
			Relay:    fromOutside(protocol.RelayAfterPublish, killedAtPublish),
		},
		{
			Name: "relay-backlog-amqp-reset-in-flight", Window: protocol.RelayAfterPublish,
			Description: "The relays are frozen while 200 facts pile up; released, relay-1 is frozen again the moment it has published its first full batch, its broker connection is reset (TCP RST on the broker's next answer), and it is thawed: a full batch in flight, no confirm for it, republished with the same eventIds.",
			Workload:    workload.RelayBacklogSpec(),
			Faults: func(*rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Toxic{Link: "relay-1.amqp", Toxic: proxies.ResetPeer{}, Trigger: fault.Trigger{AfterRelease: true}, Duration: 2 * time.Second,
					At: &fault.Sync{Process: "relay-1", Point: protocol.RelayAfterPublish}}}
			},
			Evidence: []check.Evidence{check.UnknownRepublished()},
		},
		{
			Name: "relay-backlog-unroutable", Window: protocol.QueueUnroutable,
			Description: "The relays are frozen while 200 facts pile up; the queue's bindings are removed over the backlog and the relays released into the outage: each publishes full batches, the next while the last awaits its confirms, and every message comes back returned. Where the relay offers relay.after-publish, relay-1 is held there (that call site alone) once it has published its second batch, until the broker has taken every publish of it: relay-1 settles its first batch with the second's returns in hand, and must keep them for the second. Once 200 rows claimed in the outage are settled the bindings return: every returned row is retried, none is given up on, each event takes effect once.",
			Workload:    workload.RelayBacklogSpec(),
			// A budget the outage cannot spend: it lasts until the relays
			// have settled the backlog (until_settled), however long
			// that takes.
			Settings:   map[string]string{retryBudget: "30"},
			Invariants: []string{check.NoneGaveUp},
			Faults: func(*rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Unbind{Trigger: fault.Trigger{OverBacklog: true, PastRelease: true}, UntilSettled: workload.RelayBacklogSpec().Hold.Backlog}}
			},
			Evidence: []check.Evidence{check.TwoClaimsInFlight()},
			Relay:    claimsInFlight,
		},
		{
			Name: "relay-backlog-nack-storm", Window: protocol.BrokerNack,
			Description: "The consumer's queue holds at most 5 ready messages with overflow reject-publish, and the relays are frozen while 200 facts pile up; released, they publish full batches into the queue as fast as one consumer channel makes room in it: the broker nacks publishes of a batch and confirms later ones of the same batch. Every nacked row is retried, none is given up on, each event takes effect once.",
			Workload:    workload.RelayBacklogSpec(),
			// As broker-nack: without the queue's length and one channel
			// the broker never nacks, so both are required; the budget
			// keeps the nacked rows from giving up while the consumer
			// works the backlog off.
			Settings:   map[string]string{"queue-max-length": "5", "consumer-channels": "1"},
			Prefers:    map[string]string{retryBudget: "40"},
			Without:    ownBudget,
			Invariants: []string{check.NoneGaveUp},
			Faults: func(*rand.Rand) []fault.Fault {
				slice := proxies.Slicer{AverageSize: 256, SizeVariation: 64, Delay: time.Millisecond, Stream: proxies.Upstream}
				return []fault.Fault{
					fault.Crash{Process: "consumer", Point: protocol.ConsumerAfterReceive, Action: crashpoint.Pause, Hit: 1, Hold: 20 * time.Second, UntilNacked: true},
					fault.Toxic{Link: "relay-1.amqp", Toxic: slice, Trigger: fault.Trigger{AfterRelease: true}, Duration: 20 * time.Second, UntilDrained: true},
					fault.Toxic{Link: "relay-2.amqp", Toxic: slice, Trigger: fault.Trigger{AfterRelease: true}, Duration: 20 * time.Second, UntilDrained: true},
				}
			},
			Evidence: []check.Evidence{check.NackThenAck()},
		},
		{
			Name: "sustained-relay-crash-after-confirm", Window: protocol.RelayAfterConfirm,
			Description: "A probe of 60 facts measures what the pipeline carries; then 80% of that rate is held for 5 s, and once 80 facts were acknowledged relay-1 is SIGKILLed after its next confirms, before marking them: full batches follow one another, the killed relay's are republished after the lease among them, and the inbox absorbs the copies.",
			Workload:    workload.SustainedSpec(),
			Faults: func(*rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "relay-1", Point: protocol.RelayAfterConfirm, Action: crashpoint.Kill, Hit: 1, Trigger: fault.Trigger{AfterOrders: 80}, RestartAfter: 300 * time.Millisecond}}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.RelayAfterConfirm), check.Republished(), check.DuplicateAbsorbed()},
			// Without the crash point, the black-box window under the
			// same load; its fault may land in the probe, which then
			// measures a pipeline with a relay down.
			Relay: fromOutside(protocol.RelayAfterConfirm, asBlackBox("blackbox-relay-confirmed-not-marked")),
		},
		{
			Name: "consumer-backlog-crash-after-receive", Window: protocol.ConsumerAfterReceive,
			Description: "The consumer is frozen while 150 messages pile up in its queue; released, it is handed a full prefetch at once and SIGKILLed after receiving its second batch: every delivery it held unacked is redelivered, each effect happens once.",
			Workload:    workload.ConsumerBacklogSpec(),
			Faults: func(*rand.Rand) []fault.Fault {
				// Armed once the consumer runs again: a frozen consumer
				// holds unacked what the broker pushed it, and a kill then
				// (from outside, by the broker's unacked count) would end
				// the hold before the backlog was there.
				return []fault.Fault{fault.Crash{Process: "consumer", Point: protocol.ConsumerAfterReceive, Action: crashpoint.Kill, Hit: 2, Trigger: fault.Trigger{AfterRelease: true}, RestartAfter: 200 * time.Millisecond}}
			},
			Evidence: []check.Evidence{check.FullPrefetch(), check.CrashPointHit(protocol.ConsumerAfterReceive), check.Redelivered()},
		},
		{
			Name: "poison-in-backlog", Window: protocol.QueuePoison,
			Description: "Malformed messages are published into the frozen consumer's queue once 40 valid ones wait in it, and the consumer is released once 150 messages wait: valid deliveries ahead of the poison and behind it. The consumer dead-letters the poison with valid deliveries of its batch still open ahead of it, and every valid event takes effect once, none of them in the dead-letter queue.",
			Workload:    workload.ConsumerBacklogSpec(),
			// One channel, where the target offers the setting: the
			// deliveries ahead of a poison in the consumer's log are then
			// on its channel.
			Prefers: map[string]string{"consumer-channels": "1"},
			Faults: func(*rand.Rand) []fault.Fault {
				// 40 ready ahead of it, before the release at 150 ready:
				// the messages that make up the rest are behind it.
				return []fault.Fault{fault.Poison{Count: 5, Ahead: 40}}
			},
			Invariants: []string{check.PoisonAccounted, check.OnlyPoisonDead},
			Evidence:   []check.Evidence{check.DeadLettered(5), check.PoisonBehindValid()},
		},
		{
			Name: "broker-restart-over-backlog", Window: protocol.BrokerRestart,
			Description: "The RabbitMQ node is SIGKILLed and started again while 150 messages wait in the frozen consumer's queue: the queue and every message in it survive, and the consumer, released, works them off once each.",
			Workload:    workload.ConsumerBacklogSpec(),
			Exclusive:   true,
			Faults: func(*rand.Rand) []fault.Fault {
				// A fast producer fills the backlog within a second of the
				// queue's declaration: the fault waits until RabbitMQ has
				// saved the queue's server on disk before it crashes the
				// broker (see fault.BrokerRestart).
				return []fault.Fault{fault.BrokerRestart{Trigger: fault.Trigger{OverBacklog: true}, Down: 500 * time.Millisecond}}
			},
		},
		{
			Name: "two-consumers-crash-after-receive", Window: protocol.ConsumerAfterReceive,
			Description: "Two consumer instances are frozen while 150 messages pile up in their queue; released, each is handed a full prefetch, and consumer-1 is SIGKILLed after receiving a batch: what it held unacked is redelivered, to either consumer, among the new deliveries the other is working through, and each effect happens once.",
			Workload:    workload.ConsumerBacklogSpec(),
			Instances:   map[string]int{protocol.Consumer: 2},
			Faults: func(*rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "consumer-1", Point: protocol.ConsumerAfterReceive, Action: crashpoint.Kill, Hit: 1, Trigger: fault.Trigger{AfterRelease: true}, RestartAfter: 200 * time.Millisecond}}
			},
			Evidence: []check.Evidence{check.FullPrefetch(), check.CrashPointHit(protocol.ConsumerAfterReceive), check.Redelivered(), check.Optional(everyInstanceDelivered(2))},
		},
		{
			Name: "burst-producer-crash-after-commit", Window: protocol.ProducerAfterCommit,
			Description: "400 facts at once from 32 clients; the producer is SIGKILLed right after a commit with dozens of requests in flight: every fact it answered for is in its database, each with its event, published once in effect.",
			Workload:    workload.BurstSpec(),
			Faults: func(rng *rand.Rand) []fault.Fault {
				return []fault.Fault{fault.Crash{Process: "producer", Point: protocol.ProducerAfterCommit, Action: crashpoint.Kill, Hit: int64(between(rng, 40, 120)), RestartAfter: 200 * time.Millisecond}}
			},
			Evidence: []check.Evidence{check.CrashPointHit(protocol.ProducerAfterCommit)},
		},
	}
}

// claimsInFlight offers relay-backlog-unroutable only to a relay that
// publishes a batch while its last awaits its confirms (relay.in_flight
// of 2 or more), the only relay whose returns for two batches come back
// on one channel at once; its shape is read from the claims in the audit
// trail, which only a claim relay writes.
//
// Where the relay maps a crash point at relay.after-publish, relay-1 is
// held there once it has published its second batch (the first still
// awaiting its confirms), only at that call site, until the broker has
// taken every publish of it: the relay settles its first batch with the
// second's returns in hand, which its event log shows. Without the hold,
// whether those returns are in hand is a race of microseconds inside the
// relay.
func claimsInFlight(sc runner.Scenario, t *target.Target) (runner.Scenario, string, error) {
	if t.Relay.Model != history.ModelClaim {
		return sc, "", fmt.Errorf("two claims of one relay in flight are read from its claims in the outbox's status column, and this relay's model is %s", t.RelayModel())
	}
	if t.Relay.InFlight < 2 {
		return sc, "", fmt.Errorf("the target file says its relays publish no batch while the last awaits its confirms (relay.in_flight: %d)", max(t.Relay.InFlight, 1))
	}
	if !offersPoint(t, protocol.Relay, protocol.RelayAfterPublish) {
		return sc, "the relay maps no crash point at " + protocol.RelayAfterPublish + ": no batch is held for its returns, and whether a later batch's returns are in hand when the one before it settles is left to chance", nil
	}
	faults := sc.Faults
	sc.Faults = func(rng *rand.Rand) []fault.Fault {
		return append(faults(rng), fault.Crash{Process: "relay-1", Point: protocol.RelayAfterPublish, Action: crashpoint.Hold, Hit: 2, UntilRouted: true, Hold: 10 * time.Second})
	}
	sc.Evidence = append(slices.Clone(sc.Evidence), check.ReturnAheadOfItsBatch())
	return sc, "", nil
}

// everyInstanceDelivered: n instances of the consumer each logged a
// delivery, so the backlog was shared.
func everyInstanceDelivered(n int) check.Evidence {
	return check.Custom(fmt.Sprintf("%d consumer instances took deliveries", n), func(o *history.Record) (bool, string) {
		took := map[string]bool{}
		for _, e := range o.Log {
			if e.Event == eventlog.Delivered {
				took[e.Process] = true
			}
		}
		var names []string
		for i := 1; i <= n; i++ {
			if name := o.Instances[history.RefOf(protocol.Consumer, i)]; took[name] {
				names = append(names, name)
			}
		}
		return len(names) == n, fmt.Sprintf("%d of %d took deliveries %v", len(names), n, names)
	}, history.SourceConsumerLog)
}
