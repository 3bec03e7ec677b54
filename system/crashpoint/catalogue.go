// Package crashpoint is the reference pipeline's catalogue of crash points
// on top of the protocol's (github.com/faultline-dev/faultline/protocol/crashpoint).
//
// The catalogue: every crash point in the pipeline, the process it lives in,
// and the failure window a crash there opens. A call site names its point
// with one of these constants; system/faultline.yaml maps the protocol's
// windows to them.
package crashpoint

const (
	OrderBeforeCommit     = "order.before-commit"
	OrderAfterCommit      = "order.after-commit"
	RelayAfterClaim       = "relay.after-claim"
	RelayAfterPublish     = "relay.after-publish"
	RelayAfterConfirm     = "relay.after-confirm"
	RelayAfterMark        = "relay.after-mark"
	RelayBeforeRenew      = "relay.before-renew"
	RelayBeforeRetry      = "relay.before-retry"
	InventoryAfterReceive = "inventory.after-receive"
	InventoryBeforeCommit = "inventory.before-commit"
	InventoryAfterCommit  = "inventory.after-commit"
)

// Point describes one crash point.
type Point struct {
	Name    string `json:"name"`
	Process string `json:"process"` // order, relay or inventory
	Window  string `json:"window"`  // what a crash here leaves half done
	Guard   string `json:"guard"`   // what in the correct pipeline closes that window
}

// Catalogue returns every crash point, in pipeline order.
func Catalogue() []Point {
	return []Point{
		{OrderBeforeCommit, "order", "order and outbox rows written, transaction not committed (with direct publishing: event already published)", "outbox row in the order's transaction"},
		{OrderAfterCommit, "order", "order committed, event not yet published", "outbox row in the same transaction"},
		{RelayAfterClaim, "relay", "rows claimed (Processing, lease held), nothing published", "lease expiry: another relay claims the rows again"},
		{RelayAfterPublish, "relay", "batch published, confirms not yet seen: unknown outcome", "never Published without a confirm; same eventId republished after the lease"},
		{RelayAfterConfirm, "relay", "confirms seen, Published update not yet written", "lease expiry + republish with the same eventId; inbox absorbs the duplicate"},
		{RelayAfterMark, "relay", "Published written, next batch not yet claimed", "none needed: the batch is complete"},
		{RelayBeforeRenew, "relay", "lease about to be renewed while confirms are slow", "lease expiry: rows taken over by another relay"},
		{RelayBeforeRetry, "relay", "a return or nack seen, retry (or Failed) not yet written", "retry and Failed writes conditional on the claim id"},
		{InventoryAfterReceive, "inventory", "message delivered, nothing committed", "manual ack after commit: the broker redelivers"},
		{InventoryBeforeCommit, "inventory", "inbox and effect written, transaction not committed", "inbox row and effect in one transaction: both roll back together"},
		{InventoryAfterCommit, "inventory", "inbox row and reservation committed, ack not yet sent", "inbox row in the same transaction absorbs the redelivery"},
	}
}

// Lookup returns the catalogued point with that name.
func Lookup(name string) (Point, bool) {
	for _, p := range Catalogue() {
		if p.Name == name {
			return p, true
		}
	}
	return Point{}, false
}
