// Package infra provides the PostgreSQL and RabbitMQ that scenarios run
// against, whatever starts them. One Infra serves a whole test binary; each
// scenario creates its own databases and its own vhost on it, so scenarios
// can run in parallel.
//
// Three providers: local (StartLocal), docker (StartDocker) and external
// (StartExternal). Select picks one from FAULTLINE_INFRA (auto: local when
// the binaries are installed, else docker when a daemon answers), Start
// starts it, Open does both.
//
// The local provider (StartLocal) runs a private PostgreSQL (13 or later) and a private
// RabbitMQ 3.10 node from the installed Debian binaries, on free loopback
// ports, inside one temporary folder, and removes every process, port and
// file again at Stop. Both are locked with random credentials made for the
// run: PostgreSQL asks every connection (TCP and socket) for the password
// (scram-sha-256), and RabbitMQ has one random administrator and no guest. A run that dies without Stop is cleaned up by the next
// StartLocal (see sweepStale). With LocalOptions.Standby, PostgreSQL is a
// primary with a streaming standby, and Local.Replicated gives the
// Replicated provider (see local_standby.go). With LocalOptions.BrokerNodes
// 3 its broker is a three-node cluster whose inter-node traffic goes
// through Toxiproxy links, and it implements Cluster (see local_cluster.go).
package infra

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
)

// Infra is what scenarios need from PostgreSQL and RabbitMQ, whatever
// provides them. All methods are safe for concurrent use.
type Infra interface {
	// Name names the provider, e.g. "local".
	Name() string

	// PostgresAddr is the server's host:port as this host reaches it
	// ("127.0.0.1:port" for local).
	PostgresAddr() string
	// PostgresURL is a superuser URL for database with its password, e.g.
	// postgres://postgres:<password>@127.0.0.1:port/db?sslmode=disable.
	// Never log it as it is: see Secrets.
	PostgresURL(database string) string
	// CreateDatabase creates database name; it fails if it exists. The name
	// must be an identifier of [a-z0-9_]+ (at most 63 bytes).
	CreateDatabase(ctx context.Context, name string) error
	// DropDatabase drops database name if it exists, disconnecting its
	// sessions (DROP DATABASE IF EXISTS ... WITH (FORCE)).
	DropDatabase(ctx context.Context, name string) error

	// AMQPAddr is the broker's AMQP host:port as this host reaches it
	// ("127.0.0.1:port" for local). On docker it can change when the
	// broker restarts: ask again rather than keep it.
	AMQPAddr() string
	// AMQPURL is amqp://<user>:<password>@host:port/<url-escaped vhost>.
	// Never log it as it is: see Secrets.
	AMQPURL(vhost string) string
	// CreateVHost creates vhost name through the management HTTP API and
	// grants AMQPURL's user all permissions on it; it fails if the vhost
	// exists.
	CreateVHost(ctx context.Context, name string) error
	// DeleteVHost deletes vhost name with everything in it; a vhost that
	// does not exist is not an error.
	DeleteVHost(ctx context.Context, name string) error
	// TraceVHost turns the firehose of vhost name on or off on every
	// running node: each message published in it is copied to the
	// amq.rabbitmq.trace exchange ("publish.<exchange>"), whether or not
	// it is routed, and routing itself is unchanged (a mandatory message
	// routed nowhere is still returned). The vhost must exist.
	TraceVHost(ctx context.Context, name string, on bool) error
	// Queue reads a queue's counters from the management API. They are
	// eventually consistent: the broker publishes them every stats interval
	// (500 ms on the local provider), so poll rather than read once. A
	// missing queue gives an error that matches ErrNotFound.
	Queue(ctx context.Context, vhost, queue string) (history.QueueInfo, error)
	// VHost reads a vhost's message counters from the management API,
	// eventually consistent as Queue's are.
	VHost(ctx context.Context, vhost string) (VHostInfo, error)
	// ClientConnections counts the AMQP connections open in vhost, on
	// every running node, that are not faultline's own (those carry
	// OwnConnectionName): the target's clients, as the broker sees them.
	ClientConnections(ctx context.Context, vhost string) (int, error)

	// LinkUpstreams are the addresses a Toxiproxy link forwards to, as the
	// Toxiproxy server sees them: PostgresAddr and AMQPAddr where the
	// server runs on this host (local, external); the containers' network
	// aliases (postgres:5432, rabbitmq:5672) for docker, whose Toxiproxy
	// runs in the containers' network (see ToxiproxyProvider).
	LinkUpstreams() (postgres, amqp string)

	// CanRestartBroker says whether StopBroker/StartBroker work.
	CanRestartBroker() bool
	// StopBroker crashes the broker (SIGKILL, not a clean stop) and waits
	// until it is gone. Stopping a stopped broker is not an error.
	//
	// On RabbitMQ 3.10 (Ra 2.2) a quorum queue whose server a node has
	// not yet saved in its Ra registry on disk comes back leaderless: a
	// caller that can waits for QueueRegistry first (fault.BrokerRestart
	// does).
	StopBroker(ctx context.Context) error
	// StartBroker starts the broker again with the same data and waits
	// until AMQP and the management API answer. Local keeps its ports;
	// docker keeps the in-network address, not always the host port.
	StartBroker(ctx context.Context) error
	// RestartBroker is StopBroker then StartBroker.
	RestartBroker(ctx context.Context) error

	// Secrets are the passwords inside the URLs this provider hands out
	// and the credentials its clients use: the random ones of a local or
	// docker run, the external provider's real ones. Whatever faultline
	// writes (logs, reports, the terminal) goes through a redactor of
	// them (package redact).
	Secrets() []string

	// Stop removes everything the provider started. It is idempotent.
	Stop(ctx context.Context) error
}

// Replicable is a provider that can start another instance of itself: its
// own PostgreSQL and broker, with credentials of its own, on the same
// port allocator. A run that restarts the broker runs on one, so that it
// stops no other run (the local provider: about 5 s to start, 150 MiB).
// The caller stops the instance.
type Replicable interface {
	Replicate(ctx context.Context) (Infra, error)
}

// DatabaseRestarter is a provider that can crash its PostgreSQL server
// and start it again on the same data, port and credentials: the server
// recovers from its WAL, as after a power cut, an OOM kill or a host
// reboot. Every database on the server goes with it, so a run that
// restarts it runs on an infrastructure of its own (Replicable).
type DatabaseRestarter interface {
	// CrashPostgres SIGKILLs the server's postmaster and every backend at
	// once (no checkpoint, no shutdown record: what was not flushed to
	// the WAL is gone) and waits until they are gone. Crashing a server
	// that is down is not an error.
	CrashPostgres(ctx context.Context) error
	// StartPostgres starts the crashed server again and waits until it
	// has recovered and answers a query.
	StartPostgres(ctx context.Context) error
}

// StartTimer is a provider that timed its services' start-up; the local
// provider starts postgres and rabbitmq side by side.
type StartTimer interface {
	StartTimes() map[string]time.Duration
}

// VHostInfo are a vhost's message counters since it was created, as the
// management API reports them.
type VHostInfo struct {
	Published int
	// Unroutable counts the messages the vhost's exchanges could route to
	// no queue: returned to a mandatory publisher or dropped.
	Unroutable int
}

// ErrNotFound is matched (errors.Is) by errors about a queue that does not
// exist.
var ErrNotFound = errors.New("not found")

// validIdentifier checks a database name: [a-z0-9_]+, at most 63 bytes
// (PostgreSQL's NAMEDATALEN-1).
func validIdentifier(name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("invalid database name %q: want 1 to 63 characters of [a-z0-9_]", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return fmt.Errorf("invalid database name %q: want only [a-z0-9_]", name)
		}
	}
	return nil
}
