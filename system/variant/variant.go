// Package variant is the catalogue of the deliberately broken pipelines:
// the negative controls. Each variant removes exactly one guard of the
// correct pipeline, in one process; everything else (logs, crash points,
// flags) stays as it is. A harness that cannot catch each of them proves
// nothing.
//
// Every program takes --variant NAME, with FAULTLINE_VARIANT as the
// environment fallback. The harness sets one variant for every process of a
// run, so each program accepts every name here and applies only the variants
// whose Process is its own; an unknown name is an error. Empty or "correct"
// is the correct pipeline. Names joined by commas combine variants
// ("ignore-return,ack-before-commit": two independent bugs in one
// pipeline, each in its own process), see Parse.
package variant

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

// EnvVar is the environment fallback of --variant, shared by every program.
const EnvVar = "FAULTLINE_VARIANT"

// Correct is the name of the correct pipeline (so is the empty name).
const Correct = "correct"

// The processes a variant lives in (the crash point catalogue's names).
const (
	Order     = "order"
	Relay     = "relay"
	Inventory = "inventory"
)

// Names of the variants.
const (
	CommitThenPublish      = "commit-then-publish"
	PublishThenCommit      = "publish-then-commit"
	CommitErrorAnswered    = "commit-error-answered"
	OutboxOwnTransaction   = "outbox-own-transaction"
	NoMandatory            = "no-mandatory"
	IgnoreReturn           = "ignore-return"
	PublishedBeforeConfirm = "published-before-confirm"
	NoFencing              = "no-fencing"
	NoLease                = "no-lease"
	LeaseIgnored           = "lease-ignored"
	UnfencedRetry          = "unfenced-retry"
	UnfencedRenewal        = "unfenced-renewal"
	NoBackoff              = "no-backoff"
	ReadsByID              = "reads-by-id"
	AckBeforeCommit        = "ack-before-commit"
	NoInbox                = "no-inbox"
	BatchDuplicatesApplied = "batch-duplicates-applied"
	InboxOwnTransaction    = "inbox-own-transaction"
	CommitErrorIgnored     = "commit-error-ignored"
	PoisonAcked            = "poison-acked"
	DeadLetterMultiple     = "dead-letter-multiple"
	CleanupRetentionInMS   = "cleanup-retention-in-ms"
	NackAsSuccess          = "nack-as-success"
	LastConfirmOnly        = "last-confirm-only"
	OwnBatchReturnsOnly    = "own-batch-returns-only"
	SingleNode             = "single-node"
	ClassicQueue           = "classic-queue"
	TransientQueue         = "transient-queue"
	LimitWithoutDLX        = "limit-without-dlx"
)

// Variant is one broken pipeline.
type Variant struct {
	Name    string `json:"name"`
	Process string `json:"process"` // order, relay or inventory; empty for the correct pipeline
	Guard   string `json:"guard"`   // the guard of the correct pipeline it removes
	Removes string `json:"removes"` // what the variant does instead, and what that breaks
}

// Catalogue returns the twenty-nine variants, in pipeline order.
func Catalogue() []Variant {
	return []Variant{
		{CommitThenPublish, Order,
			"outbox row in the order's transaction",
			"no outbox: the order commits, then the service publishes the event itself; a crash between the two (order.after-commit) loses the event"},
		{PublishThenCommit, Order,
			"outbox row in the order's transaction",
			"no outbox: the service publishes the event inside the open transaction, then commits; a crash between the two (order.before-commit) leaves a phantom event"},
		{CommitErrorAnswered, Order,
			"a failed COMMIT is never answered as created",
			"a COMMIT that fails (the connection cut while it is in flight: outcome unknown) is taken for done and the order answered 201: if nothing committed, the client was told of a fact that does not exist"},
		{OutboxOwnTransaction, Order,
			"outbox row in the order's transaction",
			"writes the outbox row in a transaction of its own, committed before the order's: a crash in between (order.before-commit) leaves an event the relay publishes for an order that never committed: a phantom"},
		{NoMandatory, Relay,
			"mandatory publish: an unroutable message comes back as basic.return",
			"publishes without mandatory: the broker drops an unroutable message, confirms it, and the row is marked Published: lost"},
		{IgnoreReturn, Relay,
			"a basic.return (matched to its publish by MessageId and claim id) keeps the row from Published",
			"publishes with mandatory but ignores the returns: an unroutable message is confirmed and marked Published: lost"},
		{PublishedBeforeConfirm, Relay,
			"Published only after a positive publisher confirm",
			"marks rows Published right after publishing, without waiting for confirms: a nacked or undelivered message is lost"},
		{NoFencing, Relay,
			"every status write conditional on the claim id (fencing)",
			"status writes ignore the claim id: a relay whose lease ran out overwrites the rows another claim now holds"},
		{NoLease, Relay,
			"lease expiry: a Processing row whose lease ran out is claimed again",
			"claims never expire: rows of a relay that died after claiming stay Processing for ever: lost"},
		{LeaseIgnored, Relay,
			"a Processing row is claimed again only once its lease ran out",
			"claims Processing rows whatever their lease: a relay takes the rows another relay holds and is still publishing (the claim's fencing refuses the holder's late writes, so nothing is lost, but every such row goes out twice and the lease promises nothing)"},
		{UnfencedRetry, Relay,
			"retry and Failed writes conditional on the claim id",
			"the retry write (attempt_count+1, last_error, next_attempt_at) and the Failed write ignore the claim id (the Published write keeps it): a relay held past its lease (relay.before-retry) overwrites the rows another claim now holds"},
		{UnfencedRenewal, Relay,
			"lease renewal conditional on the claim id: 0 rows means the claim is lost",
			"the --renew heartbeat extends locked_until without the claim id: a relay whose claim was taken over keeps renewing (and \"holding\") the rows another claim now holds"},
		{NoBackoff, Relay,
			"retries back off: next_attempt_at by exponential backoff with jitter, capped",
			"retries are due at once (next_attempt_at = now): a short outage burns the retry budget in milliseconds and the events end Failed"},
		{ReadsByID, Relay,
			"rows are taken by their status (Pending, FOR UPDATE SKIP LOCKED) under a claim, never by a position in the table",
			"reads the outbox by a bigserial id past the last id it saw (WHERE id > last ORDER BY id), publishing without claiming: the id is taken at insert, the row becomes visible at its commit, so a row whose transaction commits after a later row's is behind the position already and is never published: lost"},
		{NackAsSuccess, Relay,
			"a basic.nack keeps the row from Published: it is retried with backoff",
			"waits for every confirm but takes a basic.nack for an ack and marks the row Published: a message a quorum queue refused (no leader, no majority, or full with reject-publish) is lost"},
		{LastConfirmOnly, Relay,
			"each row's own publisher confirm decides it",
			"waits for the confirm of a batch's last publish and takes its answer for every row, as if confirms were cumulative: a publish the broker nacked (a quorum queue full with reject-publish) ahead of a confirmed last is marked Published: lost"},
		{OwnBatchReturnsOnly, Relay,
			"a basic.return drained while one batch settles is kept for the later batch it came back from",
			"keeps only the returns of the batch it is settling and drops the rest it drained: with a second batch published while the first awaits its confirms, that batch's returns can be in hand when the first settles, and the second then sees its unroutable rows confirmed with no return and marks them Published: lost"},
		{SingleNode, Relay,
			"failover: after losing its node the relay connects to the next address of --amqp-urls, round robin",
			"connects only to the first address of --amqp-urls and keeps retrying it after losing it: while that node is dead, cut off or frozen nothing is published although the cluster could take it, and a node that stays away stalls the pipeline"},
		{AckBeforeCommit, Inventory,
			"manual ack only after the transaction committed",
			"acks each delivery as soon as it is received, before the transaction: a crash before the commit loses the effect"},
		{NoInbox, Inventory,
			"inbox row (ON CONFLICT DO NOTHING) in the effect's transaction",
			"no inbox: every delivery is taken as new and applied, so a redelivery or republish takes effect twice"},
		{BatchDuplicatesApplied, Inventory,
			"of two deliveries of one eventId in one batch, only the first is new: the inbox row the batch inserted covers the second too",
			"takes every delivery of an eventId whose inbox row the batch inserted as new: two copies of one event in one batch (a republish queued behind its original while the consumer lagged) both take effect"},
		{InboxOwnTransaction, Inventory,
			"inbox row and effect in one transaction: both commit or neither",
			"the inbox row commits in a transaction of its own before the effect's: a crash in between (inventory.before-commit) leaves the eventId seen and its effect lost"},
		{CommitErrorIgnored, Inventory,
			"a failed COMMIT is never acked: the transaction is retried, or the broker redelivers",
			"a COMMIT that fails (the connection cut while it is in flight: outcome unknown) is taken for done and the batch is acked: if nothing committed, the effect is lost"},
		{PoisonAcked, Inventory,
			"a message that can never be processed is rejected without requeue: the dead-letter exchange keeps it",
			"acks a malformed message (unparsable, no eventId) instead of rejecting it: it is gone without a trace, and the dead-letter queue never sees it"},
		{DeadLetterMultiple, Inventory,
			"a poison message is rejected alone",
			"rejects a poison message with multiple set, which rejects every earlier unacked delivery of its channel with it: the valid deliveries of its batch ahead of it go to the dead-letter queue, though their effects commit; a replay of that queue delivers them again, and a consumer that died before its commit would never see them redelivered"},
		{CleanupRetentionInMS, Inventory,
			"the inbox cleanup deletes only rows older than the retention",
			"the cleanup reads its retention's seconds as milliseconds (4s becomes 4ms): it deletes nearly every inbox row as soon as it runs, so a redelivery or replay inside the configured retention takes effect again"},
		{ClassicQueue, Inventory,
			"the consumer's queue is a quorum queue (x-queue-type quorum), replicated on a majority of the cluster's nodes",
			"declares the consumer's queue as a classic durable queue, which lives on one node (the one the consumer declared it on): while that node is down the queue is gone from the cluster, messages routed to it are not enqueued and its content cannot be consumed"},
		{TransientQueue, Inventory,
			"the consumer's queue is durable: it and the messages waiting in it outlive a broker restart",
			"declares the consumer's queue classic and not durable: a broker restart deletes it with every message waiting in it (the relays had those confirmed and marked Published), and the consumer declares it anew, empty"},
		{LimitWithoutDLX, Inventory,
			"a dead-letter exchange behind the queue's delivery limit: a message past it is dead-lettered, never dropped",
			"declares the consumer's queue with x-delivery-limit 2 (RabbitMQ 4 gives every quorum queue a limit, 20 by default) and no dead-letter exchange: a message returned more times than that — a consumer crashing in a loop on what it holds — is dropped"},
	}
}

// Names returns the known names: correct, then the catalogue's.
func Names() []string {
	names := []string{Correct}
	for _, v := range Catalogue() {
		names = append(names, v.Name)
	}
	return names
}

// Lookup returns the variant called name. The empty name and "correct" give
// the correct pipeline: Name "correct", no Process. An unknown name is an
// error that lists the known ones.
func Lookup(name string) (Variant, error) {
	if name == "" || name == Correct {
		return Variant{Name: Correct, Removes: "nothing: every guard in place"}, nil
	}
	for _, v := range Catalogue() {
		if v.Name == name {
			return v, nil
		}
	}
	return Variant{}, fmt.Errorf("unknown variant %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Set is the variants of one --variant value: none for the correct
// pipeline.
type Set []Variant

// Parse reads a --variant value: one name, or several joined by commas,
// each removing its own guard. Empty or "correct" is the correct pipeline
// (and "correct" combines with nothing); an unknown name, or one given
// twice, is an error.
func Parse(value string) (Set, error) {
	if value == "" || value == Correct {
		return nil, nil
	}
	var s Set
	for _, name := range strings.Split(value, ",") {
		name = strings.TrimSpace(name)
		if name == "" || name == Correct {
			return nil, fmt.Errorf("variant %q: %q combines with no other name (known: %s)", value, Correct, strings.Join(Names(), ", "))
		}
		v, err := Lookup(name)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(s, func(w Variant) bool { return w.Name == v.Name }) {
			return nil, fmt.Errorf("variant %q names %s twice", value, name)
		}
		s = append(s, v)
	}
	return s, nil
}

// Of returns the variants of the set that break process, in the order
// given.
func (s Set) Of(process string) []Variant {
	var out []Variant
	for _, v := range s {
		if v.Breaks(process) {
			out = append(out, v)
		}
	}
	return out
}

// One returns the one variant of the set that breaks process (the correct
// pipeline's if none), for a process that applies one variant of its own at
// a time; two of its own are an error.
func (s Set) One(process string) (Variant, error) {
	own := s.Of(process)
	switch len(own) {
	case 0:
		return Variant{Name: Correct, Removes: "nothing: every guard in place"}, nil
	case 1:
		return own[0], nil
	}
	names := make([]string, len(own))
	for i, v := range own {
		names[i] = v.Name
	}
	return Variant{}, fmt.Errorf("variants %s all break %s: it runs one of its own at a time", strings.Join(names, ", "), process)
}

// Detail is how process names the set in its `started` line: each variant,
// and whether this process runs it or stays correct.
func (s Set) Detail(process string) string {
	if len(s) == 0 {
		return Variant{}.Detail(process)
	}
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = v.Detail(process)
	}
	return strings.Join(parts, " ")
}

// Breaks reports whether the variant removes a guard of process.
func (v Variant) Breaks(process string) bool {
	return v.Process != "" && v.Process == process
}

// Detail is how process names its variant in its `started` line: the
// variant, and whether this process runs it or stays correct.
func (v Variant) Detail(process string) string {
	switch {
	case v.Process == "":
		return "variant=" + Correct
	case v.Breaks(process):
		return "variant=" + v.Name
	default:
		return fmt.Sprintf("variant=%s (breaks %s; this process is correct)", v.Name, v.Process)
	}
}

// Register defines --variant on fs. Its default is FAULTLINE_VARIANT (or
// *p if already set), so the command line wins over the environment.
func Register(fs *flag.FlagSet, p *string) {
	def := *p
	if def == "" {
		def = os.Getenv(EnvVar)
	}
	fs.StringVar(p, "variant", def, fmt.Sprintf("deliberately broken variant to run (environment fallback %s; empty or %q: the correct pipeline); one of: %s",
		EnvVar, Correct, strings.Join(Names(), ", ")))
}
