package reports

import (
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
)

// The fixture: a gate run with the correct pipeline and variants, timelines,
// a failure with violations, a documented limit, runs not run, and markup
// in reasons, eventIds, labels and details that must come out as text.

const evil = `<script>alert("x")</script>`

var t0 = time.Date(2026, 11, 30, 16, 8, 0, 0, time.UTC)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func invariants(broken ...result.Invariant) []result.Invariant {
	names := []string{"converged", "no-lost-event", "no-phantom", "no-duplicate-effect", "outbox-truth", "fencing", "queue-drained"}
	var out []result.Invariant
	for _, n := range names {
		inv := result.Invariant{Name: n, OK: true}
		for _, b := range broken {
			if b.Name == n {
				inv = b
			}
		}
		out = append(out, inv)
	}
	return out
}

func counts(n int) result.Counts {
	return result.Counts{Orders: n, Events: n, Published: n, Confirmed: n, Delivered: n, Reservations: n, CrashPointHits: 1}
}

// timeline draws four processes, the fault and two traced events.
func timeline(point, action string, spanKind, target string, traced ...result.Trace) *result.Timeline {
	tl := &result.Timeline{
		StartedAt: at(0),
		EndMS:     9000,
		Lanes: []result.Lane{
			{Process: "order", Marks: []result.Mark{{AtMS: -400, Kind: "started", Label: "order started"}}},
			{Process: "relay-1", Marks: []result.Mark{{AtMS: -380, Kind: "started", Label: "relay-1 started"}}},
			{Process: "relay-2", Marks: []result.Mark{{AtMS: -370, Kind: "started", Label: "relay-2 started"}}},
			{Process: "inventory", Marks: []result.Mark{
				{AtMS: -350, Kind: "started", Label: "inventory started"},
				{AtMS: 5200, Kind: "disconnected", Label: "amqp connection lost"},
				{AtMS: 5900, Kind: "connected", Label: "amqp connected"},
			}},
		},
		Faults:     []result.Span{{Kind: spanKind, Target: target, Label: point + " " + action, StartMS: 3000, EndMS: 5000}},
		BucketMS:   250,
		RateBefore: 96, RateDuring: 31.5, RateAfter: 140,
		Traces: traced,
	}
	for i := range tl.Lanes {
		if tl.Lanes[i].Process == target {
			tl.Lanes[i].Marks = append(tl.Lanes[i].Marks,
				result.Mark{AtMS: 3000, Kind: "crashpoint", Label: point + " " + action},
				result.Mark{AtMS: 5000, Kind: map[string]string{"kill": "restarted", "pause": "resumed"}[action], Label: target + " back"})
		}
	}
	for ms := int64(0); ms < 9000; ms += 250 {
		b := result.Bucket{AtMS: ms, Committed: 25, Published: 24, Reserved: 24}
		if ms >= 3000 && ms < 5000 {
			b.Published, b.Reserved = 8, 7
		}
		if ms >= 5000 && ms < 6000 {
			b.Published, b.Reserved = 40, 38
		}
		if ms >= 7500 {
			b.Committed = 0
		}
		tl.Rate = append(tl.Rate, b)
	}
	return tl
}

func trace(id, why string, base int64, extra ...result.Step) result.Trace {
	steps := []result.Step{
		{AtMS: base, Process: "order", Event: "committed"},
		{AtMS: base + 40, Process: "relay-1", Event: "claimed", ClaimID: "relay-1:9f2c"},
		{AtMS: base + 55, Process: "relay-1", Event: "published", ClaimID: "relay-1:9f2c"},
		{AtMS: base + 70, Process: "relay-1", Event: "confirmed", ClaimID: "relay-1:9f2c"},
	}
	steps = append(steps, extra...)
	return result.Trace{EventID: id, Why: why, Steps: steps}
}

func fixtureRun() result.Run {
	dupTrace := trace("01JDUPLICATE0000000000000A", "duplicate absorbed", 2900,
		result.Step{AtMS: 2990, Process: "inventory", Event: "delivered"},
		result.Step{AtMS: 3010, Process: "inventory", Event: "reserved"},
		result.Step{AtMS: 3020, Process: "inventory", Event: "acked"},
		result.Step{AtMS: 5400, Process: "relay-2", Event: "claimed", ClaimID: "relay-2:77aa"},
		result.Step{AtMS: 5420, Process: "relay-2", Event: "published", ClaimID: "relay-2:77aa"},
		result.Step{AtMS: 5430, Process: "relay-2", Event: "confirmed", ClaimID: "relay-2:77aa"},
		result.Step{AtMS: 5440, Process: "relay-2", Event: "marked", ClaimID: "relay-2:77aa"},
		result.Step{AtMS: 5460, Process: "inventory", Event: "delivered"},
		result.Step{AtMS: 5470, Process: "inventory", Event: "duplicate", Detail: "inbox row exists"},
		result.Step{AtMS: 5480, Process: "inventory", Event: "acked"},
	)
	lostTrace := trace("01JLOST"+evil, "lost "+evil, 3100,
		result.Step{AtMS: 5100, Process: "relay-1", Event: "fenced", ClaimID: "relay-1:9f2c", Detail: "0 rows: the claim moved on"},
	)
	lostLines := []string{
		"16:08:03.100 order      committed        01JLOST" + evil,
		"16:08:03.140 relay-1    claimed          01JLOST" + evil + " claim=relay-1:9f2c",
		"16:08:05.100 relay-1    fenced           01JLOST" + evil + " claim=relay-1:9f2c",
	}

	scenarios := []result.Scenario{
		{
			Name: "producer-crash-after-commit", Variant: "correct", Seed: 7, Window: protocol.ProducerAfterCommit, Verdict: result.Pass,
			Counts:     counts(120),
			Faults:     []result.Fault{{Kind: "crash", Target: "order", Detail: "order.after-commit kill@12", Hit: true, Start: at(3000), End: at(5000)}},
			Evidence:   []result.Evidence{{Name: "crash point order.after-commit hit", Seen: true, Detail: "1 hit"}},
			Invariants: invariants(), RecoveryMS: 1830, DurationMS: 14200, Started: at(-7000),
			Phases: []result.Phase{
				{Name: "infra", Start: at(-7000), End: at(-500)}, {Name: "workload", Start: at(-500), End: at(7000)},
				{Name: "converging", Start: at(7000), End: at(8800)}, {Name: "checking", Start: at(8800), End: at(9000)},
			},
			Timeline: timeline("order.after-commit", "kill", "crash", "order", trace("01JCOMMITTED00000000000000", "crash window", 2950)),
		},
		{
			Name: "relay-crash-after-confirm", Variant: "correct", Seed: 7, Window: protocol.RelayAfterConfirm, Verdict: result.Pass,
			Counts: func() result.Counts {
				c := counts(150)
				c.Published, c.Delivered, c.DuplicatesPublished, c.DuplicatesDelivered, c.DuplicatesAbsorbed = 153, 153, 3, 3, 3
				return c
			}(),
			Faults:     []result.Fault{{Kind: "crash", Target: "relay-1", Detail: "relay.after-confirm kill@3", Hit: true, Start: at(3000), End: at(5000)}},
			Evidence:   []result.Evidence{{Name: "republished", Seen: true}, {Name: "duplicate absorbed", Seen: true, Detail: "3 seen"}},
			Invariants: invariants(), RecoveryMS: 2400, DurationMS: 15100, Started: at(-7000),
			Timeline: timeline("relay.after-confirm", "kill", "crash", "relay-1", dupTrace,
				trace("01JDUPLICATE0000000000000B", "duplicate absorbed", 2920), trace("01JDUPLICATE0000000000000C", "duplicate absorbed", 2940)),
		},
		{
			Name: "relay-pause-past-lease", Variant: "correct", Seed: 7, Window: protocol.ClaimPastLease, Verdict: result.Fail,
			Reason: "invariant broken: no-lost-event " + evil,
			Counts: func() result.Counts {
				c := counts(90)
				c.Reservations, c.Lost, c.FencedWrites = 89, 1, 2
				return c
			}(),
			Faults: []result.Fault{{Kind: "pause", Target: "relay-1", Detail: "relay.after-confirm pause@2 for 5s " + evil, Hit: true, Start: at(3000), End: at(5000),
				Waits: []result.Wait{
					{Cause: "relay-1 to reach relay.after-confirm", Seen: true, TookMS: 240, BoundMS: 30000, Detail: "hit 2"},
					{Cause: "another relay to take relay-1's claim over", Seen: true, TookMS: 1340, BoundMS: 8000, Detail: "relay-2 took 01JLOST" + evil + " over"},
				}}},
			Evidence: []result.Evidence{{Name: "at least 1 \"fenced\"", Seen: true, Detail: "2 seen"}, {Name: "duplicate absorbed", Seen: false, Detail: "0 seen"}},
			Invariants: invariants(result.Invariant{Name: "no-lost-event", OK: false, Detail: "1 committed events have no reservation",
				Violations: []result.Violation{{Kind: "lost", EventIDs: []string{"01JLOST" + evil}, Message: "1 committed events have no reservation " + evil, Timeline: lostLines,
					Stages: map[result.Stage][]string{result.StageConsumedNoEffect: {"01JLOST" + evil}}}}}),
			RecoveryMS: 4100, DurationMS: 22000, Started: at(-7000), Dir: "/tmp/faultline-runs/relay-pause-past-lease-7",
			Timeline: timeline("relay.after-confirm", "pause", "pause", "relay-1", lostTrace, dupTrace),
		},
		{
			Name: "inbox-retention-replay", Variant: "correct", Seed: 7, Window: protocol.InboxRetention, Verdict: result.Limit,
			Counts: func() result.Counts {
				c := counts(30)
				c.Reservations, c.DuplicateEffects, c.DuplicatesAbsorbed = 31, 1, 1
				return c
			}(),
			Faults:   []result.Fault{{Kind: "replay", Target: "inventory", Detail: "one event replayed after the inbox cleanup", Hit: true, EventIDs: []string{"01JREPLAYED000000000000000"}}},
			Evidence: []result.Evidence{{Name: "the checker reports exactly the replayed event's duplicate", Seen: true}},
			Invariants: invariants(result.Invariant{Name: "no-duplicate-effect", OK: false, Expected: true, Detail: "1 extra effects for 1 events (expected: replay after the inbox retention)",
				Violations: []result.Violation{{Kind: "duplicate-effect", EventIDs: []string{"01JREPLAYED000000000000000"}, Message: "1 events took effect more than once",
					Timeline: []string{"16:08:17.427 order      committed        01JREPLAYED000000000000000 (order.created)"}}}}),
			RecoveryMS: 300, DurationMS: 9000, Started: at(-7000),
		},
		{Name: "unroutable-then-routable", Variant: "correct", Seed: 7, Window: protocol.QueueUnroutable, Verdict: result.NotRun, Reason: "context canceled " + evil},
		{
			Name: "commit-then-publish-probe", Variant: "correct", Seed: 7, Verdict: result.Pass, Counts: counts(10),
			Invariants: invariants(), DurationMS: 4000, Started: at(-7000),
		},

		// Variants.
		{
			Name: "producer-crash-after-commit", Variant: "commit-then-publish", Seed: 7, Window: protocol.ProducerAfterCommit, Verdict: result.Fail,
			Counts: func() result.Counts {
				c := counts(120)
				c.Published, c.Delivered, c.Reservations, c.Lost = 119, 119, 119, 1
				return c
			}(),
			Faults: []result.Fault{{Kind: "crash", Target: "order", Detail: "order.after-commit kill@12", Hit: true}},
			Invariants: invariants(result.Invariant{Name: "no-lost-event", OK: false, Detail: "1 committed events have no reservation",
				Violations: []result.Violation{{Kind: "lost", EventIDs: []string{"01JVARLOST0000000000000000"}, Message: "1 committed events have no reservation",
					Timeline: []string{"16:08:03.100 order      committed        01JVARLOST0000000000000000"}}}}),
			RecoveryMS: 15000, DurationMS: 25000, Started: at(-7000),
		},
		{
			// no-inbox passes here: the duplicate publish never reached the
			// consumer twice. The variant is not caught by this scenario.
			Name: "relay-crash-after-confirm", Variant: "no-inbox", Seed: 7, Window: protocol.RelayAfterConfirm, Verdict: result.Pass, Counts: counts(150),
			Faults: []result.Fault{{Kind: "crash", Target: "relay-1", Detail: "relay.after-confirm kill@3", Hit: true}}, Invariants: invariants(),
			RecoveryMS: 2000, DurationMS: 15000, Started: at(-7000),
		},
		{
			Name: "consumer-crash-after-commit", Variant: "no-inbox", Seed: 7, Window: protocol.ConsumerAfterCommit, Verdict: result.Fail,
			Counts: func() result.Counts {
				c := counts(100)
				c.Reservations, c.DuplicateEffects, c.DuplicatesDelivered = 101, 1, 1
				return c
			}(),
			Invariants: invariants(result.Invariant{Name: "no-duplicate-effect", OK: false,
				Violations: []result.Violation{{Kind: "duplicate-effect", EventIDs: []string{"01JVARDUP00000000000000000"}, Message: "1 events took effect more than once"}}}),
			RecoveryMS: 1200, DurationMS: 12000, Started: at(-7000),
		},
		{
			// Fails, but not with the violation its missing guard causes.
			Name: "broker-nack", Variant: "published-before-confirm", Seed: 7, Window: protocol.BrokerNack, Verdict: result.Fail, Counts: counts(80),
			Invariants: invariants(result.Invariant{Name: "outbox-truth", OK: false,
				Violations: []result.Violation{{Kind: "stuck-row", EventIDs: []string{"01JSTUCK000000000000000000"}, Message: "1 rows left Processing"}}}),
			DurationMS: 16000, Started: at(-7000),
		},
		{Name: "relay-pause-past-lease", Variant: "no-fencing", Seed: 7, Window: protocol.ClaimPastLease, Verdict: result.NotRun, Reason: "interrupted"},
	}
	return result.Run{
		Schema: result.Schema, Target: "reference", TargetFile: "/home/team/orders/system/faultline.yaml", Version: "v0.9.0",
		Seed: 7, Started: t0, DurationMS: 95_000, Pass: false, Infra: "local",
		Scenarios: scenarios,
		Timing: &result.Timing{InfraStartMS: 6100, StartPartsMS: map[string]int64{"infra": 6000, "rabbitmq": 5900, "postgres": 1400, "build": 2100, "toxiproxy": 90},
			RunsMS: 95_000, ExclusiveMS: 22_000, TotalMS: 101_500, ScenarioMedianMS: 14_200, ScenarioMaxMS: 25_000,
			GoalTotalMS: 120_000, GoalScenarioMedianMS: 10_000},
		Variants: []result.Variant{
			{Name: "commit-then-publish", Guard: "outbox row in the order's transaction", Expected: "lost", Caught: true, CaughtBy: []string{"producer-crash-after-commit"}},
			{Name: "no-inbox", Guard: "inbox row", Expected: "duplicate-effect", Caught: true, CaughtBy: []string{"consumer-crash-after-commit"}, Missed: []string{"relay-crash-after-confirm"}},
			{Name: "published-before-confirm", Guard: "Published only after a positive confirm", Expected: "lost", Caught: false, CaughtBy: []string{}, Missed: []string{"broker-nack"}},
			{Name: "no-fencing", Guard: "claim id in every status write", Expected: "stale-write", Caught: false, CaughtBy: []string{}},
			// The gate lists every variant the target lists; these had no run.
			{Name: "publish-then-commit", Expected: "phantom", CaughtBy: []string{}, NotRun: []string{"producer-crash-before-commit"}},
			{Name: "no-lease", Expected: "stuck-row", CaughtBy: []string{}, NotRun: []string{"relay-crash-after-claim"}},
			{Name: "no-mandatory", Expected: "lost", CaughtBy: []string{}, NotRun: []string{"unroutable-then-routable"}},
			{Name: "ignore-return", Expected: "lost", CaughtBy: []string{}, NotRun: []string{"unroutable-then-routable"}},
			{Name: "ack-before-commit", Expected: "lost", CaughtBy: []string{}, NotRun: []string{"consumer-crash-after-receive"}},
			{Name: "inbox-own-transaction", Expected: "lost", CaughtBy: []string{}, NotRun: []string{"consumer-crash-before-commit"}},
		},
		TargetVariants: []result.TargetVariant{
			{Name: "commit-then-publish", Guard: "outbox row in the order's transaction", Expect: "lost", CaughtBy: []string{"producer-crash-after-commit"}},
			{Name: "publish-then-commit", Guard: "outbox row in the order's transaction", Expect: "phantom", CaughtBy: []string{"producer-crash-before-commit"}},
			{Name: "no-mandatory", Guard: "mandatory publish", Expect: "lost", CaughtBy: []string{"unroutable-then-routable"}},
			{Name: "ignore-return", Guard: "basic.return matched to its own publish", Expect: "lost", CaughtBy: []string{"unroutable-then-routable"}},
			{Name: "published-before-confirm", Guard: "Published only after a positive confirm", Expect: "lost", CaughtBy: []string{"broker-nack"}},
			{Name: "no-fencing", Guard: "claim id in every status write", Expect: "stale-write", CaughtBy: []string{"relay-pause-past-lease", "relay-db-slow-past-lease"}},
			{Name: "no-lease", Guard: "lease expiry", Expect: "stuck-row", CaughtBy: []string{"relay-crash-after-claim"}},
			{Name: "ack-before-commit", Guard: "manual ack after commit", Expect: "lost", CaughtBy: []string{"consumer-crash-after-receive"}},
			{Name: "no-inbox", Guard: "inbox row", Expect: "duplicate-effect", CaughtBy: []string{"relay-crash-after-confirm", "consumer-crash-after-commit"}},
			{Name: "inbox-own-transaction", Guard: "inbox row and effect in one transaction", Expect: "lost", CaughtBy: []string{"consumer-crash-before-commit"}},
		},
	}
}

// caseName is how a result appears in junit.xml.
func caseName(s result.Scenario) string { return fmt.Sprintf("%s/%s", variantOf(s), s.Name) }

// lostIDs are n eventIds of lost events, numbered from prefix.
func lostIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

// fixtureBlackBox is a gate run on a black-box target (a pipeline built
// from outbox libraries): it lists no variants, offers none of the
// reference's crash points, and two of its runs lost events. The other
// helpers' figures: 40 lost events consumed without effect (more than a
// screenful of ids) and 3 routed nowhere in one run, 1 skipped in another.
func fixtureBlackBox() result.Run {
	consumed := lostIDs("01JCONSUMED", 40)
	nowhere := append(lostIDs("01JNOWHERE", 2), "01JNOWHERE"+evil)
	lost := result.Violation{Kind: "lost", EventIDs: append(append([]string{}, consumed[:20]...), nowhere...),
		Message: "43 committed events never took effect",
		Stages:  map[result.Stage][]string{result.StageConsumedNoEffect: consumed, result.StageRoutedNowhere: nowhere}}
	skipped := result.Violation{Kind: "lost", EventIDs: []string{"01JSKIPPED0000000000000000"}, Message: "1 committed events never took effect",
		Stages: map[result.Stage][]string{result.StageSkipped: {"01JSKIPPED0000000000000000"}}}
	lostCounts := func(n int) result.Counts {
		c := counts(150)
		c.Lost, c.Reservations = n, 150-n
		return c
	}
	notOffered := func(name, window, why string) result.Scenario {
		return result.Scenario{Name: name, Variant: "correct", Seed: 7, Window: window, Verdict: result.NotRun, Reason: "not run on target outbox-libs: " + why}
	}
	scenarios := []result.Scenario{
		{
			Name: "blackbox-relay-frozen-past-lease", Variant: "correct", Seed: 7, Window: protocol.ClaimPastLease, Verdict: result.Fail,
			Reason: "invariant broken: no-lost-event: 43 committed events have no effect", Counts: lostCounts(43),
			Faults:     []result.Fault{{Kind: "pause", Target: "relay-1", Detail: "claim committed pause 5s", Hit: true, Start: at(3000), End: at(5000)}},
			Invariants: invariants(result.Invariant{Name: "no-lost-event", Detail: "43 committed events have no effect", Violations: []result.Violation{lost}}),
			RecoveryMS: 2600, DurationMS: 18000, Started: at(-7000),
		},
		{
			Name: "blackbox-relay-answers-lost", Variant: "correct", Seed: 7, Window: protocol.RelayAfterPublish, Verdict: result.Fail,
			Reason: "invariant broken: no-lost-event: 1 committed events have no effect", Counts: lostCounts(1),
			Faults:     []result.Fault{{Kind: "toxic", Target: "relay-1->broker", Detail: "confirms dropped", Hit: true}},
			Invariants: invariants(result.Invariant{Name: "no-lost-event", Detail: "1 committed events have no effect", Violations: []result.Violation{skipped}}),
			RecoveryMS: 1900, DurationMS: 16000, Started: at(-7000),
		},
		{
			Name: "blackbox-consumer-acks-dropped", Variant: "correct", Seed: 8, Attempt: 2, Window: protocol.ConsumerAfterCommit, Verdict: result.Indeterminate,
			Reason: "window not shown: evidence not seen: redelivered", DurationMS: 15000, Started: at(-7000),
			Faults: []result.Fault{{Kind: "crash", Target: "consumer", Detail: "consumer killed (SIGKILL) holding deliveries unacked", Error: "the broker counted no delivery held",
				Waits: []result.Wait{{Cause: "the broker to count deliveries consumer holds unacked on inventory", TookMS: 30010, BoundMS: 30000,
					Detail: "the broker counted no delivery held by the consumer on inventory within 30s " + evil}}}},
		},
		{Name: "amqp-reset-before-confirm", Variant: "correct", Seed: 7, Window: protocol.RelayAfterPublish, Verdict: result.Pass, Counts: counts(120), Invariants: invariants(), DurationMS: 12000, Started: at(-7000)},
		{Name: "broker-restart", Variant: "correct", Seed: 7, Window: protocol.BrokerRestart, Verdict: result.Pass, Counts: counts(120), Invariants: invariants(), DurationMS: 20000, Started: at(-7000)},
		notOffered("producer-crash-after-commit", protocol.ProducerAfterCommit, "no crash point producer.after-commit"),
		notOffered("relay-crash-after-claim", protocol.RelayAfterClaim, "no crash point relay.after-claim"),
		notOffered("relay-crash-after-confirm", protocol.RelayAfterConfirm, "no crash point relay.after-confirm"),
		notOffered("relay-pause-past-lease", protocol.ClaimPastLease, "no crash point relay.after-confirm"),
		notOffered("consumer-crash-after-commit", protocol.ConsumerAfterCommit, "no crash point consumer.after-commit"),
		notOffered("inbox-retention-replay", protocol.InboxRetention, "no inbox cleanup to replay past"),
	}
	return result.Run{
		Schema: result.Schema, Target: "outbox-libs", Seed: 7, Started: t0, DurationMS: 80_000, Verdict: result.Fail, Infra: "local",
		Scenarios: scenarios,
		Retried:   []result.Scenario{{Name: "blackbox-consumer-acks-dropped", Variant: "correct", Seed: 7, Attempt: 1, Verdict: result.Indeterminate, Reason: "window not shown: evidence not seen: redelivered"}},
		Variants:  []result.Variant{},
		// The target lists no variants.
		TargetVariants: []result.TargetVariant{},
	}
}
