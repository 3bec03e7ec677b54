// Package protocol is what a pipeline under test speaks to faultline, in
// any language: a small, versioned vocabulary. docs/protocol.md is its
// specification; this module is its Go implementation, with no dependency
// beyond the standard library, so a Go service imports it and a service in
// another language writes the same in a page of code.
//
// Three parts, each optional:
//
//   - crash points (package crashpoint): named places in the code, armed
//     from outside by FAULTLINE_CRASHPOINTS at start or PUT
//     /crashpoints/{name} at run time, that kill, freeze or delay the
//     process; the hit is announced on the event log before the action;
//   - the event log (package eventlog): one JSON object per line, so
//     faultline can judge fencing and show evidence in detail;
//   - health and control (package control): GET /healthz and the crash
//     point endpoints on a loopback address faultline hands out.
//
// The windows below are the protocol's names for the places a crash point
// can sit, by role. A target file maps each window it offers to the name of
// its own crash point; faultline's scenarios speak only of windows.
package protocol

// Version of the protocol. A change that an existing implementation would
// misread bumps it.
const Version = 1

// EnvCrashPoints arms crash points at process start:
// FAULTLINE_CRASHPOINTS="relay.after-confirm=kill@3,relay.after-claim=delay:200ms@*".
const EnvCrashPoints = "FAULTLINE_CRASHPOINTS"

// Roles of the processes of a pipeline.
const (
	Producer = "producer" // commits the business fact and its outbox row
	Relay    = "relay"    // claims outbox rows, publishes them, marks them
	Consumer = "consumer" // applies each event once: inbox row and effect, ack after commit
)

// Roles lists the roles, in pipeline order.
func Roles() []string { return []string{Producer, Relay, Consumer} }

// Window names: role.place.
const (
	ProducerBeforeCommit = "producer.before-commit"
	ProducerAfterCommit  = "producer.after-commit"
	RelayAfterClaim      = "relay.after-claim"
	RelayAfterPublish    = "relay.after-publish"
	RelayAfterConfirm    = "relay.after-confirm"
	RelayAfterMark       = "relay.after-mark"
	RelayBeforeRenew     = "relay.before-renew"
	RelayBeforeRetry     = "relay.before-retry"
	ConsumerAfterReceive = "consumer.after-receive"
	ConsumerBeforeCommit = "consumer.before-commit"
	ConsumerAfterCommit  = "consumer.after-commit"
)

// Window is one place a crash point can sit: what a crash there leaves
// half done, and what in a correct pipeline closes it.
type Window struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Opens string `json:"opens"`
	Guard string `json:"guard"`
}

// Windows returns every window of the protocol, in pipeline order.
func Windows() []Window {
	return []Window{
		{ProducerBeforeCommit, Producer, "fact and outbox row written, transaction not committed (with direct publishing: event already published)", "outbox row in the fact's transaction"},
		{ProducerAfterCommit, Producer, "fact committed, event not yet published", "outbox row in the same transaction"},
		{RelayAfterClaim, Relay, "rows claimed (Processing, lease held), nothing published", "lease expiry: another relay claims the rows again"},
		{RelayAfterPublish, Relay, "batch published, confirms not yet seen: unknown outcome", "never Published without a confirm; same eventId republished after the lease"},
		{RelayAfterConfirm, Relay, "confirms seen, Published update not yet written", "lease expiry + republish with the same eventId; inbox absorbs the duplicate"},
		{RelayAfterMark, Relay, "Published written, next batch not yet claimed", "none needed: the batch is complete"},
		{RelayBeforeRenew, Relay, "lease about to be renewed while confirms are slow", "lease expiry: rows taken over by another relay; renewal conditional on the claim id"},
		{RelayBeforeRetry, Relay, "a return or nack seen, retry (or Failed) not yet written", "retry and Failed writes conditional on the claim id"},
		{ConsumerAfterReceive, Consumer, "message delivered, nothing committed", "manual ack after commit: the broker redelivers"},
		{ConsumerBeforeCommit, Consumer, "inbox row and effect written, transaction not committed", "inbox row and effect in one transaction: both roll back together"},
		{ConsumerAfterCommit, Consumer, "inbox row and effect committed, ack not yet sent", "inbox row in the same transaction absorbs the redelivery"},
	}
}

// LookupWindow returns the window with that name.
func LookupWindow(name string) (Window, bool) {
	for _, w := range Windows() {
		if w.Name == name {
			return w, true
		}
	}
	return Window{}, false
}
