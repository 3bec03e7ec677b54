package reports

// Window is one failure window of docs/design.md's table: a crash inside
// one of the article's boundaries, the guard that closes it, and where the
// run measured it. The renderer finds, in the run's results, the run of
// Scenario on the correct pipeline and the run of VariantScenario (default:
// Scenario) on Variant, and fills the measured columns from them.
//
// Consecutive windows with the same Boundary, Window and Scenario are one
// window with several variants (e.g. no-mandatory and ignore-return).
type Window struct {
	Boundary   string // the article's boundary: app transaction, publisher → broker, ...
	Window     string // what a crash inside it leaves half done
	CrashPoint string // the crash point (or fault) that opens it
	Guard      string // what closes it on the correct pipeline
	Scenario   string // the scenario that opens it on the correct pipeline
	Variant    string // the variant without the guard; "" for a documented limit
	Without    string // the outcome expected without the guard

	// VariantScenario is the scenario run on Variant when it is not
	// Scenario (e.g. published-before-confirm is caught by broker-nack).
	VariantScenario string
	// Expect is the violation kind that catches Variant; when empty, the
	// run's Variants entry says it, and failing at all counts otherwise.
	Expect string
	// Also are further scenarios that open the same window on the correct
	// pipeline; each gets its own line in the table.
	Also []string
}

func (w Window) variantScenario() string {
	if w.VariantScenario != "" {
		return w.VariantScenario
	}
	return w.Scenario
}

// DefaultWindows is docs/design.md's failure-window table with the
// scenarios and variants of the catalogue, in the pipeline's order.
func DefaultWindows() []Window {
	const (
		app       = "app transaction"
		publisher = "publisher → broker"
		broker    = "broker → consumer"
		consumer  = "consumer transaction"
	)
	return []Window{
		{
			Boundary: app, Window: "fact committed, event not yet published", CrashPoint: "producer.after-commit",
			Guard: "outbox row in the same transaction", Scenario: "producer-crash-after-commit",
			Variant: "commit-then-publish", Expect: "lost", Without: "event lost",
		},
		{
			Boundary: app, Window: "event published, fact's transaction not committed", CrashPoint: "producer.before-commit",
			Guard: "outbox row in the same transaction", Scenario: "producer-crash-before-commit",
			Variant: "publish-then-commit", Expect: "phantom", Without: "phantom event",
		},
		{
			Boundary: publisher, Window: "rows claimed, nothing published yet", CrashPoint: "relay.after-claim",
			Guard: "lease expiry", Scenario: "relay-crash-after-claim",
			Variant: "no-lease", Expect: "stuck-row", Without: "row stuck in Processing",
		},
		{
			Boundary: publisher, Window: "published, confirm not yet seen (unknown outcome)", CrashPoint: "relay.after-publish",
			Guard: "retry with the same eventId; never mark Published", Scenario: "relay-crash-after-publish",
			Also:    []string{"amqp-reset-before-confirm"},
			Variant: "published-before-confirm", VariantScenario: "broker-nack", Expect: "lost",
			Without: "event lost (marked early)",
		},
		{
			Boundary: publisher, Window: "unroutable message gets a positive confirm", CrashPoint: "none: the queue is unbound",
			Guard: "mandatory + basic.return matched to its own publish (MessageId + claim id)", Scenario: "unroutable-then-routable",
			Variant: "no-mandatory", Expect: "lost", Without: "event lost",
		},
		{
			Boundary: publisher, Window: "unroutable message gets a positive confirm", CrashPoint: "none: the queue is unbound",
			Guard: "mandatory + basic.return matched to its own publish (MessageId + claim id)", Scenario: "unroutable-then-routable",
			Variant: "ignore-return", Expect: "lost", Without: "event lost",
		},
		{
			Boundary: publisher, Window: "confirm seen, Published update not yet written", CrashPoint: "relay.after-confirm",
			Guard: "lease expiry + re-publish with the same eventId", Scenario: "relay-crash-after-confirm",
			Variant: "no-inbox", Expect: "duplicate-effect",
			Without: "duplicate publish (the correct outcome); without the inbox, a duplicate effect",
		},
		{
			Boundary: publisher, Window: "claim held past its lease (pause, slow DB)", CrashPoint: "relay.after-confirm (pause)",
			Guard: "claim id in every status write (fencing)", Scenario: "relay-pause-past-lease",
			Also:    []string{"relay-db-slow-past-lease"},
			Variant: "no-fencing", Expect: "stale-write", Without: "stale worker overwrites the new claim",
		},
		{
			Boundary: broker, Window: "delivered, not yet committed", CrashPoint: "consumer.after-receive",
			Guard: "manual ack after commit", Scenario: "consumer-crash-after-receive",
			Variant: "ack-before-commit", Expect: "lost", Without: "effect lost (ack first)",
		},
		{
			Boundary: consumer, Window: "inbox row written, effect not yet committed", CrashPoint: "consumer.before-commit",
			Guard: "inbox row and effect in one transaction", Scenario: "consumer-crash-before-commit",
			Variant: "inbox-own-transaction", Expect: "lost", Without: "effect lost (the inbox says done)",
		},
		{
			Boundary: consumer, Window: "committed, ack not yet sent", CrashPoint: "consumer.after-commit",
			Guard: "inbox row in the same transaction", Scenario: "consumer-crash-after-commit",
			Variant: "no-inbox", Expect: "duplicate-effect", Without: "duplicate effect",
		},
		{
			Boundary: consumer, Window: "replay older than the inbox retention", CrashPoint: "none: an old event is replayed",
			Guard: "retention ≥ replay window", Scenario: "inbox-retention-replay",
			Without: "duplicate effect: the documented limit, reported by the checker",
		},
	}
}
