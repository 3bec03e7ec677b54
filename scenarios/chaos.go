package scenarios

import (
	"math/rand/v2"
	"time"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/proxies"
)

// randomChaos mixes the other scenarios' faults, chosen and timed by the
// seed, over 500 orders. Each process gets at most one crash point, armed
// at its trigger, so a restart cannot lose an arming.
func randomChaos() runner.Scenario {
	return runner.Scenario{
		// No window of its own: any of them, at random.
		Name:        "random-chaos",
		Description: "A seeded random mix of crashes, freezes, toxics, a link outage, poison messages and a broker restart over 500 orders.",
		Workload:    workload.Spec{Orders: 500, Concurrency: 8, Pace: 10 * time.Second},
		Exclusive:   true,
		Converge:    60 * time.Second,
		// A crash point drawn at random may find its process with nothing
		// left to do there (a relay with no batch to confirm once the
		// workload is over): that window stays unopened, and the verdict
		// rests on the invariants over the faults that did happen.
		FaultsOptional: true,
		Faults: func(rng *rand.Rand) []fault.Fault {
			// Faults land in the first 200 of the 500 orders, so a crash point
			// armed at its trigger still has batches left to fire on, also
			// behind a broker restart (about 8 s down and back, most of the
			// 10 s workload): armed late, a point finds its process with
			// nothing left to do.
			at := func() fault.Trigger { return fault.Trigger{AfterOrders: int64(between(rng, 20, 200))} }
			relayPoints := []string{protocol.RelayAfterClaim, protocol.RelayAfterPublish, protocol.RelayAfterConfirm, protocol.RelayAfterMark}
			invPoints := []string{protocol.ConsumerAfterReceive, protocol.ConsumerAfterCommit}
			links := []history.Link{"relay-1.pg", "relay-2.amqp", "consumer.amqp", "producer.pg"}
			menu := []func() fault.Fault{
				func() fault.Fault {
					return fault.Crash{Process: "relay-1", Point: relayPoints[rng.IntN(len(relayPoints))], Action: crashpoint.Kill, Hit: int64(between(rng, 1, 2)), Trigger: at(), RestartAfter: 200 * time.Millisecond}
				},
				func() fault.Fault {
					return fault.Crash{Process: "relay-2", Point: protocol.RelayAfterConfirm, Action: crashpoint.Pause, Hit: 1, Trigger: at(), Hold: 4 * time.Second}
				},
				func() fault.Fault {
					return fault.Crash{Process: "consumer", Point: invPoints[rng.IntN(len(invPoints))], Action: crashpoint.Kill, Hit: int64(between(rng, 1, 2)), Trigger: at(), RestartAfter: 200 * time.Millisecond}
				},
				func() fault.Fault {
					return fault.Crash{Process: "producer", Point: protocol.ProducerAfterCommit, Action: crashpoint.Kill, Hit: int64(between(rng, 1, 5)), Trigger: at(), RestartAfter: 200 * time.Millisecond}
				},
				func() fault.Fault {
					return fault.Toxic{Link: links[rng.IntN(len(links))], Toxic: proxies.Latency{Latency: time.Duration(between(rng, 200, 800)) * time.Millisecond}, Trigger: at(), Duration: 2 * time.Second}
				},
				func() fault.Fault {
					return fault.LinkDown{Link: "consumer.pg", Trigger: at(), Duration: 1500 * time.Millisecond}
				},
				func() fault.Fault { return fault.Poison{Count: 3, Trigger: at()} },
				func() fault.Fault { return fault.BrokerRestart{Trigger: at(), Down: 500 * time.Millisecond} },
			}
			var out []fault.Fault
			for _, i := range rng.Perm(len(menu))[:5] {
				out = append(out, menu[i]())
			}
			return out
		},
		Evidence: []check.Evidence{},
	}
}
