package scenarios

import "faultline/harness/gate"

// Catches says, for every broken variant of the pipeline, which scenario
// must catch it and with which violation — the one its missing guard causes.
func Catches() []gate.Catch {
	return []gate.Catch{
		{Variant: "commit-then-publish", Scenario: "order-crash-after-commit", Expect: "lost", Guard: "outbox row in the order's transaction"},
		{Variant: "publish-then-commit", Scenario: "order-crash-before-commit", Expect: "phantom", Guard: "outbox row in the order's transaction"},
		{Variant: "no-mandatory", Scenario: "unroutable-then-routable", Expect: "lost", Guard: "mandatory publish"},
		{Variant: "ignore-return", Scenario: "unroutable-then-routable", Expect: "lost", Guard: "basic.return correlated by MessageId"},
		{Variant: "published-before-confirm", Scenario: "broker-nack", Expect: "lost", Guard: "Published only after a positive confirm"},
		{Variant: "no-fencing", Scenario: "relay-pause-past-lease", Expect: "stale-write", Guard: "claim id in every status write"},
		{Variant: "no-fencing", Scenario: "relay-db-slow-past-lease", Expect: "stale-write", Guard: "claim id in every status write"},
		{Variant: "no-lease", Scenario: "relay-crash-after-claim", Expect: "stuck-row", Guard: "lease expiry"},
		{Variant: "ack-before-commit", Scenario: "inventory-crash-after-receive", Expect: "lost", Guard: "manual ack after commit"},
		{Variant: "no-inbox", Scenario: "relay-crash-after-confirm", Expect: "duplicate-effect", Guard: "inbox row"},
		{Variant: "no-inbox", Scenario: "inventory-crash-after-commit", Expect: "duplicate-effect", Guard: "inbox row"},
		{Variant: "inbox-own-transaction", Scenario: "inventory-crash-before-commit", Expect: "lost", Guard: "inbox row and effect in one transaction"},
	}
}
