package infra

import (
	"context"
	"time"

	"github.com/faultline-dev/faultline/proxies"
)

// What production adds to one broker node and one database server: a
// clustered broker (Cluster) and a database with a standby that is
// promoted when the primary dies (Replicated). A provider offers them as
// optional interfaces of its Infra; a scenario that needs one runs only on
// an infrastructure that has it, and is not run, with the reason, on any
// other.

// BrokerNode is one node of a clustered broker.
type BrokerNode struct {
	// Name is the Erlang node name, e.g. "fl1a2b3c-2@localhost": the name
	// the management API reports as a queue's leader and in partitions.
	Name string
	// AMQPAddr is the node's AMQP host:port as this host reaches it.
	AMQPAddr string
	// Upstream is the node's AMQP address as the Toxiproxy server reaches
	// it (the same as AMQPAddr for the local provider).
	Upstream string
}

// ClusterStatus is the cluster as the management API of the running nodes
// reports it.
type ClusterStatus struct {
	// Running names the nodes some running node sees running.
	Running []string
	// Down names the nodes no node sees running (killed, frozen, or cut off).
	Down []string
	// Partitions maps a node to the nodes it reports it is partitioned
	// from (the management API's "partitions" field).
	Partitions map[string][]string
}

// Cluster is a provider whose broker is several nodes joined into one
// cluster. Its Infra methods (AMQPAddr, AMQPURL, LinkUpstreams, CreateVHost,
// Queue, ...) speak to the first node, or to any running node where one is
// down; Nodes names every node. Node operations are safe for concurrent
// use with each other and with the Infra methods.
type Cluster interface {
	Infra
	// Nodes are the cluster's nodes, in a fixed order.
	Nodes() []BrokerNode
	// AMQPURLOf is AMQPURL for vhost on node i (0-based).
	AMQPURLOf(i int, vhost string) string
	// QueueLeader names the node that leads a quorum queue, or the node a
	// classic queue lives on, from the management API.
	QueueLeader(ctx context.Context, vhost, queue string) (string, error)
	// QueueType says "quorum", "classic" or "stream".
	QueueType(ctx context.Context, vhost, queue string) (string, error)
	// KillNode SIGKILLs node i and waits until it is gone; StartNode starts
	// it again on its data and ports and waits until it runs in the cluster.
	KillNode(ctx context.Context, i int) error
	StartNode(ctx context.Context, i int) error
	// PauseNode freezes node i (SIGSTOP); ResumeNode thaws it (SIGCONT).
	PauseNode(i int) error
	ResumeNode(i int) error
	// Partition cuts node i from every other node: the links the nodes'
	// distribution traffic goes through are down, the node's clients keep
	// their links. Heal restores them.
	Partition(ctx context.Context, i int) error
	Heal(ctx context.Context, i int) error
	// Status reads the cluster's state.
	Status(ctx context.Context) (ClusterStatus, error)
	// WaitHealthy waits until every node runs, none reports a partition,
	// and each sees all the others: what a run on the cluster starts from.
	WaitHealthy(ctx context.Context) error
	// Restore makes the cluster whole again, whatever a fault left (links
	// down, nodes frozen or killed, a partition that does not heal by
	// itself), and says what it did; then WaitHealthy.
	Restore(ctx context.Context) ([]string, error)
}

// Failover is what a promotion cost: the primary's WAL position when it
// died, the standby's when it was promoted, and the range between, which
// the promoted server never had.
type Failover struct {
	PrimaryLSN string // pg_current_wal_lsn() on the primary, last read before it died
	StandbyLSN string // pg_last_wal_replay_lsn() on the standby at promotion
	LostBytes  int64  // PrimaryLSN - StandbyLSN, 0 when nothing was lost
	Took       time.Duration
}

// Replicated is a provider whose PostgreSQL is a primary with a streaming
// standby. PostgresAddr, PostgresURL and LinkUpstreams name the primary:
// after Failover, the promoted standby.
type Replicated interface {
	Infra
	// Synchronous says whether the standby is synchronous
	// (synchronous_standby_names names it, synchronous_commit on).
	Synchronous() bool
	// HoldReplication cuts the standby from the primary: the primary goes
	// on committing (a synchronous primary's commits wait, and a cancelled
	// wait leaves the commit visible on the primary) and the standby falls
	// behind. ReleaseReplication lets it catch up.
	HoldReplication(ctx context.Context) error
	ReleaseReplication(ctx context.Context) error
	// Failover SIGKILLs the primary and promotes the standby, and returns
	// once the promoted server accepts writes.
	Failover(ctx context.Context) (Failover, error)
}

// ClusterStarter is a provider that can start a clustered broker (with a
// database of its own beside it). links is the Toxiproxy the runs' links
// are on: the local provider puts the inter-node links there too (it
// must be a *proxies.Server on this host), so a partition is a cut of
// real links; the docker provider cuts a network of its own instead and
// needs none of it. The caller stops the cluster.
type ClusterStarter interface {
	StartCluster(ctx context.Context, links proxies.Links) (Cluster, error)
}

// ReplicatedStarter is a provider that can start a database with a
// promotable standby (and a broker beside it), synchronous or not. The
// caller stops it.
type ReplicatedStarter interface {
	StartReplicated(ctx context.Context, synchronous bool) (Replicated, error)
}
