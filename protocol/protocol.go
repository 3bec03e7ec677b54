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
// The windows below are the protocol's names for the places a pipeline can
// be attacked at: those a crash point can sit at, by role (a target file
// maps each one it offers to the name of its own crash point), and those
// faultline opens from outside, with no crash point. Faultline's
// scenarios, its explorer and its reports speak only of windows, by these
// names, and word them from here.
package protocol

import "strings"

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

// Windows faultline opens from outside, with no crash point: through the
// broker, the network, the databases or the messages it sends. They are
// defined here, beside the crash-point windows, because to a target they
// are the same thing — a moment its pipeline can be attacked at, and the
// guard that must close it — and its variants, faultline's scenarios and
// reports name them alike; a target file maps none of them (there is no
// crash point to name).
const (
	// QueueUnroutable: the queue's bindings taken away, so publishes come
	// back (and are retried, or end Failed).
	QueueUnroutable = "queue.unroutable"
	// OutboxCommitOrder: outbox inserts held at their commit while later
	// ones commit first.
	OutboxCommitOrder = "outbox.commit-order"
	// ClaimPastLease: a relay keeps a claim past its lease (frozen, or its
	// database slow) while another relay takes the rows over.
	ClaimPastLease = "claim.past-lease"
	// LogPositionAhead: a relay that tails logical replication is killed
	// holding changes it could not publish; its slot's confirmed position
	// must not have passed them.
	LogPositionAhead = "log.position-ahead"
	// LogStreamCut: a log relay's replication connection is cut with
	// changes streamed to it and not yet confirmed by the broker; it must
	// stream again from its slot's confirmed position.
	LogStreamCut  = "log.stream-cut"
	BrokerNack    = "broker.nack"
	BrokerRestart = "broker.restart"
	RelayDBDown   = "relay-db.down"
	// LinkFlapping: a process's link drops again and again, each
	// reconnection cut short.
	LinkFlapping   = "link.flapping"
	ConsumerDBDown = "consumer-db.down"
	// ProducerDBCommitCut: the producer's COMMIT meets a dead connection.
	ProducerDBCommitCut = "producer-db.commit-cut"
	// ConsumerDBCommitCut: the consumer's COMMIT meets a dead connection.
	ConsumerDBCommitCut = "consumer-db.commit-cut"
	QueuePoison         = "queue.poison"
	AggregateOvertaken  = "aggregate.overtaken"
	InboxRetention      = "inbox.retention"

	// What a clustered broker and a database with a standby add (a
	// scenario that opens one runs only where the infrastructure has them).

	// QueueLeaderLost: the node leading a quorum queue dies; a new leader
	// is elected from the replicas.
	QueueLeaderLost = "cluster.leader-lost"
	// NodePaused: a broker node frozen past net_ticktime, which the others
	// count as a partition.
	NodePaused = "cluster.node-paused"
	// NodePartitioned: a broker node cut off from the other nodes while
	// its clients still reach it.
	NodePartitioned = "cluster.partitioned"
	// ClientNodeLost: the node a process is connected to dies while the
	// process holds unconfirmed publishes or unacked deliveries.
	ClientNodeLost = "cluster.client-node-lost"
	// ConsumerCrashLoop: the consumer dies again and again holding the
	// same deliveries; each return counts against the queue's delivery
	// limit.
	ConsumerCrashLoop = "consumer.crash-loop"
	// PrimaryFailover: the database's primary dies with commits its
	// standby never received, and the standby is promoted.
	PrimaryFailover = "database.failover"
	// DatabaseRestart: the database server crashes with work in flight
	// and recovers from its WAL.
	DatabaseRestart = "database.restart"
)

// Boundaries a window sits in, in pipeline order: the transactions and
// hand-offs of the outbox pattern.
const (
	BoundaryApp       = "app transaction"
	BoundaryPublisher = "publisher → broker"
	BoundaryBroker    = "broker → consumer"
	BoundaryConsumer  = "consumer transaction"
)

// Window is one place a pipeline can be attacked at: what an attack there
// leaves half done, and what in a correct pipeline closes it. CrashPoint:
// a target's crash point can sit there (else faultline opens it from
// outside).
type Window struct {
	Name       string `json:"name"`
	Role       string `json:"role"`
	Opens      string `json:"opens"`
	Guard      string `json:"guard"`
	Boundary   string `json:"boundary"`
	CrashPoint bool   `json:"crash_point"`
}

// Windows returns every crash-point window of the protocol, in pipeline
// order.
func Windows() []Window {
	cp := func(name, role, boundary, opens, guard string) Window {
		return Window{Name: name, Role: role, Opens: opens, Guard: guard, Boundary: boundary, CrashPoint: true}
	}
	return []Window{
		cp(ProducerBeforeCommit, Producer, BoundaryApp, "fact and outbox row written, transaction not committed (with direct publishing: event already published)", "outbox row in the fact's transaction"),
		cp(ProducerAfterCommit, Producer, BoundaryApp, "fact committed, event not yet published", "outbox row in the same transaction"),
		cp(RelayAfterClaim, Relay, BoundaryPublisher, "rows claimed (Processing, lease held), nothing published", "lease expiry: another relay claims the rows again"),
		cp(RelayAfterPublish, Relay, BoundaryPublisher, "batch published, confirms not yet seen: unknown outcome", "never Published without a confirm; same eventId republished after the lease"),
		cp(RelayAfterConfirm, Relay, BoundaryPublisher, "confirms seen, Published update not yet written", "lease expiry + republish with the same eventId; inbox absorbs the duplicate"),
		cp(RelayAfterMark, Relay, BoundaryPublisher, "Published written, next batch not yet claimed", "none needed: the batch is complete"),
		cp(RelayBeforeRenew, Relay, BoundaryPublisher, "lease about to be renewed while confirms are slow", "lease expiry: rows taken over by another relay; renewal conditional on the claim id"),
		cp(RelayBeforeRetry, Relay, BoundaryPublisher, "a return or nack seen, retry (or Failed) not yet written", "retry and Failed writes conditional on the claim id"),
		cp(ConsumerAfterReceive, Consumer, BoundaryBroker, "message delivered, nothing committed", "manual ack after commit: the broker redelivers"),
		cp(ConsumerBeforeCommit, Consumer, BoundaryConsumer, "inbox row and effect written, transaction not committed", "inbox row and effect in one transaction: both roll back together"),
		cp(ConsumerAfterCommit, Consumer, BoundaryConsumer, "inbox row and effect committed, ack not yet sent", "inbox row in the same transaction absorbs the redelivery"),
	}
}

// OutsideWindows returns the windows faultline opens from outside, in
// pipeline order.
func OutsideWindows() []Window {
	return []Window{
		{Name: ProducerDBCommitCut, Role: Producer, Boundary: BoundaryApp,
			Opens: "the producer's COMMIT meets a dead connection (outcome unknown)", Guard: "a failed COMMIT is never answered as created: the client tries again (a fact that did commit becomes a second one, never a lost one)"},
		{Name: OutboxCommitOrder, Role: Producer, Boundary: BoundaryApp,
			Opens: "an outbox row commits after a later one", Guard: "rows claimed by status (SKIP LOCKED), never read past a position"},
		{Name: ClaimPastLease, Role: Relay, Boundary: BoundaryPublisher,
			Opens: "claim held past its lease (a frozen relay, a slow database) while another relay takes the rows over", Guard: "claim id in every status write (fencing)"},
		{Name: QueueUnroutable, Role: Relay, Boundary: BoundaryPublisher,
			Opens: "queue unbound: publishes are unroutable (without mandatory, confirmed all the same)", Guard: "mandatory + basic.return matched to its own publish (MessageId + claim id), retried with backoff"},
		{Name: LogPositionAhead, Role: Relay, Boundary: BoundaryPublisher,
			Opens: "a log relay (CDC) killed holding changes it could not publish", Guard: "the slot's position confirmed only past changes the broker confirmed; the server resends from it, the inbox absorbs the duplicates"},
		{Name: LogStreamCut, Role: Relay, Boundary: BoundaryPublisher,
			Opens: "a log relay's (CDC) replication connection cut with changes streamed and not yet confirmed by the broker", Guard: "every new stream starts from the slot's confirmed position, never from the last change received"},
		{Name: BrokerNack, Role: Relay, Boundary: BoundaryPublisher,
			Opens: "the broker refuses a publish (nack)", Guard: "Published only after a positive confirm; a nacked row retried"},
		{Name: BrokerRestart, Role: Relay, Boundary: BoundaryPublisher,
			Opens: "the broker goes away mid-stream", Guard: "reconnect; unconfirmed publishes and unacked deliveries resent"},
		{Name: RelayDBDown, Role: Relay, Boundary: BoundaryPublisher,
			Opens: "the relays' database goes away", Guard: "nothing marked without its write committed; rows claimed again after the lease"},
		{Name: LinkFlapping, Role: Relay, Boundary: BoundaryPublisher,
			Opens: "a link that keeps dropping: publishes in flight lose their confirms, each reconnection cut short", Guard: "unconfirmed rows published again with the same eventId; the inbox absorbs the duplicates"},
		{Name: QueuePoison, Role: Consumer, Boundary: BoundaryBroker,
			Opens: "a message that can never be processed", Guard: "dead-lettered, never blocking the events behind it"},
		{Name: AggregateOvertaken, Role: Consumer, Boundary: BoundaryBroker,
			Opens: "events of one aggregate overtake each other", Guard: "an event ahead of its predecessor parked until the predecessor is applied"},
		{Name: ConsumerDBDown, Role: Consumer, Boundary: BoundaryConsumer,
			Opens: "the consumer's database goes away", Guard: "manual ack after commit: the broker redelivers"},
		{Name: ConsumerDBCommitCut, Role: Consumer, Boundary: BoundaryConsumer,
			Opens: "the consumer's COMMIT meets a dead connection (outcome unknown)", Guard: "a failed COMMIT is never acked; the inbox absorbs a redelivery that did commit"},
		{Name: InboxRetention, Role: Consumer, Boundary: BoundaryConsumer,
			Opens: "replay older than the inbox retention", Guard: "retention ≥ replay window (a documented limit past it)"},
		{Name: QueueLeaderLost, Role: Relay, Boundary: BoundaryBroker,
			Opens: "the node leading the queue dies: publishes unconfirmed or nacked while a new leader is elected, unacked deliveries redelivered by it", Guard: "a replicated (quorum) queue; only a positive confirm marks Published; the inbox absorbs the redeliveries"},
		{Name: NodePaused, Role: Relay, Boundary: BoundaryBroker,
			Opens: "a broker node frozen past net_ticktime: its clients hang, the others count it partitioned", Guard: "heartbeats notice the frozen node; clients reconnect to another node; nothing marked or acked without an answer"},
		{Name: NodePartitioned, Role: Relay, Boundary: BoundaryBroker,
			Opens: "a broker node cut off from the others while its clients still reach it", Guard: "a quorum queue confirms only with a majority; the minority node pauses; clients reconnect elsewhere"},
		{Name: ClientNodeLost, Role: Relay, Boundary: BoundaryPublisher,
			Opens: "the node a process talks to dies with publishes unconfirmed and deliveries unacked", Guard: "reconnect to another node; unconfirmed rows republished; unacked deliveries redelivered"},
		{Name: ConsumerCrashLoop, Role: Consumer, Boundary: BoundaryBroker,
			Opens: "a consumer that dies again and again holding the same deliveries: each return counts one delivery attempt against the queue's x-delivery-limit", Guard: "a dead-letter exchange behind the delivery limit: a message past it is dead-lettered, never dropped (RabbitMQ 4 sets a limit of 20 by default)"},
		{Name: DatabaseRestart, Role: Relay, Boundary: BoundaryPublisher,
			Opens: "the database server crashes (every backend killed) with events committed and not yet taken effect, and recovers from its WAL; a log relay's slot comes back at the position last written to disk", Guard: "every write a process relies on committed before it acts on it; reconnect; a log relay streams again from its slot's position and the inbox absorbs what comes twice"},
		{Name: PrimaryFailover, Role: Producer, Boundary: BoundaryApp,
			Opens: "the primary dies with commits its standby never received; the standby is promoted", Guard: "synchronous replication (a documented limit with asynchronous: committed facts lost, their events already published)"},
	}
}

// blackBoxPrefix starts the name of a black-box window (BlackBoxWindow).
const blackBoxPrefix = "blackbox."

// BlackBoxWindow names the window at the commit of a role's write to one
// of the tables faultline watches (facts, outbox, effects), with the
// status of the write where it says one (a relay's claim: Processing):
// blackbox.<role>.<table>[.<status>]. Faultline sees the commit by a
// trigger of its own on the table, so no crash point is needed.
func BlackBoxWindow(role, table, status string) string {
	w := blackBoxPrefix + role + "." + table
	if status != "" {
		w += "." + strings.ToLower(status)
	}
	return w
}

// LookupWindow returns the crash-point window with that name: the only
// windows a target file maps.
func LookupWindow(name string) (Window, bool) {
	for _, w := range Windows() {
		if w.Name == name {
			return w, true
		}
	}
	return Window{}, false
}

// DescribeWindow returns any window by its name: a crash-point window, a
// window opened from outside, or a black-box window (BlackBoxWindow).
func DescribeWindow(name string) (Window, bool) {
	if w, ok := LookupWindow(name); ok {
		return w, true
	}
	for _, w := range OutsideWindows() {
		if w.Name == name {
			return w, true
		}
	}
	if rest, ok := strings.CutPrefix(name, blackBoxPrefix); ok {
		role, table, _ := strings.Cut(rest, ".")
		table, status, _ := strings.Cut(table, ".")
		if role == "" || table == "" || !isRole(role) {
			return Window{}, false
		}
		what := "a write by the " + role + " to its " + table + " table commits"
		if status != "" {
			what = "the " + role + " commits a " + status + " write to the " + table + " table"
		}
		return Window{Name: name, Role: role, Opens: what + " (seen by a trigger: no crash point)", Boundary: boundaryOf(role)}, true
	}
	return Window{}, false
}

func isRole(role string) bool {
	for _, r := range Roles() {
		if r == role {
			return true
		}
	}
	return false
}

// boundaryOf is the boundary a black-box window of the role sits in: the
// commit of the role's own transaction.
func boundaryOf(role string) string {
	switch role {
	case Producer:
		return BoundaryApp
	case Relay:
		return BoundaryPublisher
	}
	return BoundaryConsumer
}

// Boundaries lists the boundaries in pipeline order.
func Boundaries() []string {
	return []string{BoundaryApp, BoundaryPublisher, BoundaryBroker, BoundaryConsumer}
}
