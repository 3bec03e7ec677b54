package infra

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/redact"
	"github.com/faultline-dev/faultline/proxies"
)

// A docker PostgreSQL with a streaming standby (Docker.StartReplicated):
// two PostgreSQL containers on the provider's network, beside the
// provider's broker, which it shares (see DockerReplicated).
//
// What holds, and why:
//   - The standby is a pg_basebackup of the primary, taken by the standby
//     container's own command before its server starts, as the role
//     replicator, whose random password reaches the container in its
//     environment (as POSTGRES_PASSWORD reaches the primary's: docker
//     inspect shows both) and is written to a 0600 passfile of the
//     postgres user; primary_conninfo names the passfile, not the
//     password. pg_hba (hba_file, copied in) asks it for the password.
//   - Its WAL receiver reaches the primary through a link of the
//     provider's Toxiproxy, never directly: HoldReplication takes the link
//     down, which closes the replication connection and refuses every
//     reconnect, and ReleaseReplication brings it up. The timeouts are the
//     local standby's (2 s, retry every 100 ms), as are wal_keep_size and
//     the "sync" set-up: the primary names the standby in
//     synchronous_standby_names once it streams (see local_standby.go).
//   - "The primary" is reached under names that move at Failover, so no
//     client needs a new address: in the containers' world, the alias
//     postgres-<id> on a network of the pair's own, which the provider's
//     Toxiproxy joins (LinkUpstreams; the processes' links forward to
//     it): the primary has it; Failover disconnects the killed primary
//     from that network and connects the promoted standby under the
//     alias. On this host, a forwarder of this process (PostgresAddr),
//     re-pointed from the primary's published port to the standby's.
//   - Failover is docker kill (SIGKILL to every process of the primary's
//     container at once), then pg_promote on the standby.

// DockerReplicated is a primary and a streaming standby in containers,
// beside the provider's broker: it implements Replicated. Its broker
// methods are the provider's (its vhosts are the runs' own), except that
// it does not restart the broker, which other runs share.
type DockerReplicated struct {
	parent *Docker
	logw   io.Writer
	id     string
	sync   bool
	api    *testcontainers.DockerProvider

	frontNet              *testcontainers.DockerNetwork // where the alias of "the primary" lives
	toxiJoined            bool                          // the provider's Toxiproxy joined frontNet
	primaryC              *tcpostgres.PostgresContainer
	standbyC              *testcontainers.DockerContainer
	repl                  *proxies.Link // the standby's WAL receiver → the primary
	front                 *forwarder    // PostgresAddr: the primary's published port, then the standby's
	primaryAddr, sbAddr   string        // published ports, as this host reaches them
	pgPass, replPass      string
	frontAlias, primAlias string
	sbAlias               string

	mu      sync.Mutex  // serializes Hold, Release, Failover and Stop
	moved   atomic.Bool // promoted: the standby is the primary
	killed  atomic.Bool // the primary was killed by Failover
	stopped bool
	stopErr error
}

var (
	_ Replicated        = (*DockerReplicated)(nil)
	_ ReplicatedStarter = (*Docker)(nil)
)

// dockerHBA is the servers' pg_hba.conf: passwords for everyone, the
// replication role included, from anywhere on the networks.
const dockerHBA = `local all all scram-sha-256
host all all all scram-sha-256
host replication ` + replicationRole + ` all scram-sha-256
`

// StartReplicated implements ReplicatedStarter.
func (d *Docker) StartReplicated(ctx context.Context, synchronous bool) (Replicated, error) {
	r, err := d.startReplicated(ctx, synchronous)
	if err != nil {
		return nil, err // not a nil *DockerReplicated in a non-nil Replicated
	}
	return r, nil
}

func (d *Docker) startReplicated(ctx context.Context, synchronous bool) (*DockerReplicated, error) {
	begin := time.Now()
	d.mu.Lock()
	stopped := d.stopped
	d.mu.Unlock()
	if stopped {
		return nil, fmt.Errorf("docker infra: start replicated: %w", errStopped)
	}
	pgPass, _, replPass, err := credentials()
	if err != nil {
		return nil, fmt.Errorf("docker infra: start replicated: %w", err)
	}
	var idb [4]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return nil, fmt.Errorf("docker infra: start replicated: %w", err)
	}
	id := hex.EncodeToString(idb[:])
	logw := redact.New(pgPass, replPass).Writer(d.logw)
	r := &DockerReplicated{parent: d, logw: logw, id: id, sync: synchronous, pgPass: pgPass, replPass: replPass,
		frontAlias: "postgres-" + id, primAlias: "postgres-" + id + "-primary", sbAlias: "postgres-" + id + "-standby"}
	fail := func(err error) (*DockerReplicated, error) {
		if stopErr := r.Stop(context.WithoutCancel(ctx)); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", stopErr))
		}
		return nil, fmt.Errorf("docker infra: start replicated: %w", err)
	}
	tcLog := testcontainers.WithLogger(stdlog.New(logw, "docker replicated: ", 0))
	if r.api, err = testcontainers.NewDockerProvider(tcLog); err != nil {
		return fail(err)
	}
	// Internal: no gateway, so the provider's network stays the
	// containers' way out and their published ports' way in.
	if r.frontNet, err = tcnetwork.New(ctx, tcnetwork.WithInternal()); err != nil {
		return fail(fmt.Errorf("create the front network: %w", err))
	}
	if _, err := r.api.Client().NetworkConnect(ctx, r.frontNet.ID, client.NetworkConnectOptions{Container: d.toxiC.GetContainerID()}); err != nil {
		return fail(fmt.Errorf("connect toxiproxy to the front network: %w", err))
	}
	r.toxiJoined = true

	// A reader is read once: each container gets its own.
	hba := func() testcontainers.CustomizeRequestOption {
		return testcontainers.WithFiles(testcontainers.ContainerFile{
			Reader: strings.NewReader(dockerHBA), ContainerFilePath: "/etc/faultline/pg_hba.conf", FileMode: 0o644,
		})
	}
	primary, err := tcpostgres.Run(ctx, d.opts.PostgresImage, tcLog, onLoopback(),
		tcnetwork.WithNetwork([]string{r.primAlias}, d.network),
		tcnetwork.WithNetwork([]string{r.frontAlias}, r.frontNet),
		tcpostgres.WithPassword(pgPass),
		tcpostgres.BasicWaitStrategies(),
		hba(),
		testcontainers.WithCmd(append(append([]string{"postgres", "-c", "fsync=on", "-c", "max_connections=500", "-c", "shared_buffers=128MB"}, logicalArgs()...),
			"-c", "hba_file=/etc/faultline/pg_hba.conf", "-c", "wal_keep_size=1GB", "-c", "wal_sender_timeout=2s")...),
	)
	if primary != nil {
		r.primaryC = primary
	}
	if err != nil {
		return fail(fmt.Errorf("primary (%s): %w", d.opts.PostgresImage, err))
	}
	if r.primaryAddr, err = primary.PortEndpoint(ctx, "5432/tcp", ""); err != nil {
		return fail(fmt.Errorf("primary's port: %w", err))
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return fail(fmt.Errorf("the primary's front port: %w", err))
	}
	r.front = newForwarder(ln, r.primaryAddr)
	primaryReady := time.Since(begin)

	// The password is hex: safe inside a literal.
	if err := r.exec(ctx, r.primaryAddr, "CREATE ROLE "+replicationRole+" WITH REPLICATION LOGIN PASSWORD '"+replPass+"'"); err != nil {
		return fail(fmt.Errorf("create the replication role: %w", err))
	}
	if r.repl, err = d.toxi.AddLink(ctx, "pg-"+id+".replication", net.JoinHostPort(r.primAlias, "5432")); err != nil {
		return fail(fmt.Errorf("replication link: %w", err))
	}
	_, replPort, err := net.SplitHostPort(r.repl.Listen())
	if err != nil {
		return fail(fmt.Errorf("replication link: %w", err))
	}
	sbBegin := time.Now()
	standby, err := testcontainers.Run(ctx, d.opts.PostgresImage, tcLog, onLoopback(),
		tcnetwork.WithNetwork([]string{r.sbAlias}, d.network),
		hba(),
		testcontainers.WithEnv(map[string]string{"FL_REPLICATION_PASSWORD": replPass}),
		testcontainers.WithExposedPorts("5432/tcp"),
		testcontainers.WithCmd("sh", "-c", standbyScript(r.primAlias, dockerToxiAlias, replPort)),
		testcontainers.WithWaitStrategyAndDeadline(startTimeout,
			wait.ForLog("database system is ready to accept read-only connections"), wait.ForListeningPort("5432/tcp")),
	)
	if standby != nil {
		r.standbyC = standby
	}
	if err != nil {
		return fail(fmt.Errorf("standby (%s): %w", d.opts.PostgresImage, err))
	}
	if r.sbAddr, err = standby.PortEndpoint(ctx, "5432/tcp", ""); err != nil {
		return fail(fmt.Errorf("standby's port: %w", err))
	}
	if synchronous {
		if err := r.exec(ctx, r.primaryAddr, "ALTER SYSTEM SET synchronous_standby_names = '"+standbyAppName+"'"); err != nil {
			return fail(fmt.Errorf("name the standby synchronous: %w", err))
		}
		if err := r.exec(ctx, r.primaryAddr, "SELECT pg_reload_conf()"); err != nil {
			return fail(fmt.Errorf("reload the primary's configuration: %w", err))
		}
	}
	want := "async"
	if synchronous {
		want = "sync"
	}
	wctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	err = poll(wctx, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, r.urlOn(r.primaryAddr, "postgres"))
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var state, syncState string
		err = conn.QueryRow(ctx, `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1`, standbyAppName).Scan(&state, &syncState)
		if err != nil {
			return fmt.Errorf("pg_stat_replication: %w", err)
		}
		if state != "streaming" || syncState != want {
			return fmt.Errorf("standby is %s, %s", state, syncState)
		}
		return nil
	})
	if err != nil {
		return fail(fmt.Errorf("wait for the standby to stream (%s): %w", want, err))
	}
	r.logf("docker replicated %s: primary %s (ready in %s), standby %s (%s, streaming after %s more), front %s, in %s",
		id, r.primaryAddr, primaryReady.Round(100*time.Millisecond), r.sbAddr, want, time.Since(sbBegin).Round(100*time.Millisecond),
		r.front.Addr(), time.Since(begin).Round(100*time.Millisecond))
	return r, nil
}

// standbyScript is the standby container's command, run as root by the
// image's entrypoint: the passfile, a base backup of the primary (at
// primary:5432, directly) on the first start, then the server as the
// postgres user, its WAL receiver on toxi:replPort (the link).
func standbyScript(primary, toxi, replPort string) string {
	pass := "/var/lib/postgresql/replication.pgpass"
	conninfo := fmt.Sprintf("host=%s port=%s user=%s passfile=%s application_name=%s sslmode=disable connect_timeout=2",
		toxi, replPort, replicationRole, pass, standbyAppName)
	asPG := "setpriv --reuid=postgres --regid=postgres --init-groups "
	return strings.Join([]string{
		"set -eu",
		`mkdir -p "$PGDATA" /var/run/postgresql`,
		`chown postgres:postgres "$PGDATA" /var/run/postgresql`,
		`chmod 700 "$PGDATA"`,
		"umask 077",
		`printf '*:*:*:` + replicationRole + `:%s\n' "$FL_REPLICATION_PASSWORD" > ` + pass,
		"chown postgres:postgres " + pass,
		`if [ ! -s "$PGDATA/PG_VERSION" ]; then`,
		"  " + asPG + "env PGPASSFILE=" + pass + ` pg_basebackup -D "$PGDATA" -h ` + primary + " -p 5432 -U " + replicationRole +
			" -w -X stream -c fast --no-sync",
		"  " + asPG + `touch "$PGDATA/standby.signal"`,
		"fi",
		"unset FL_REPLICATION_PASSWORD",
		"exec " + asPG + "postgres -c fsync=on -c max_connections=500 -c shared_buffers=128MB " + strings.Join(logicalArgs(), " ") +
			" -c hba_file=/etc/faultline/pg_hba.conf -c hot_standby=on" +
			" -c 'primary_conninfo=" + conninfo + "'" +
			" -c wal_receiver_timeout=2s -c wal_receiver_status_interval=1s -c wal_retrieve_retry_interval=100ms" +
			" -c wal_sender_timeout=2s -c wal_keep_size=1GB",
	}, "\n")
}

func (r *DockerReplicated) logf(format string, args ...any) {
	fmt.Fprintf(r.logw, format+"\n", args...)
}

// urlOn is the postgres user's URL for database on the server at addr.
func (r *DockerReplicated) urlOn(addr, database string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", r.pgPass), Host: addr,
		Path: "/" + database, RawQuery: "sslmode=disable"}
	return u.String()
}

// exec runs one statement on the server at addr.
func (r *DockerReplicated) exec(ctx context.Context, addr, sql string) error {
	conn, err := pgx.Connect(ctx, r.urlOn(addr, "postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// server is "the primary" as this host reaches it: the front forwarder.
func (r *DockerReplicated) server() pgServer {
	return pgServer{ownServer: true, base: &url.URL{Scheme: "postgres", User: url.UserPassword("postgres", r.pgPass),
		Host: r.front.Addr(), Path: "/postgres", RawQuery: "sslmode=disable"}}
}

// Name implements Infra.
func (r *DockerReplicated) Name() string { return "docker" }

// Synchronous implements Replicated.
func (r *DockerReplicated) Synchronous() bool { return r.sync }

// PostgresAddr implements Infra: the front forwarder, which leads to the
// primary, and after Failover to the promoted standby.
func (r *DockerReplicated) PostgresAddr() string { return r.front.Addr() }

// PostgresURL implements Infra.
func (r *DockerReplicated) PostgresURL(database string) string { return r.server().url(database) }

// CreateDatabase implements Infra.
func (r *DockerReplicated) CreateDatabase(ctx context.Context, name string) error {
	if err := r.server().createDatabase(ctx, name); err != nil {
		return fmt.Errorf("docker replicated: %w", err)
	}
	return nil
}

// DropDatabase implements Infra.
func (r *DockerReplicated) DropDatabase(ctx context.Context, name string) error {
	if err := r.server().dropDatabase(ctx, name); err != nil {
		return fmt.Errorf("docker replicated: %w", err)
	}
	return nil
}

// LinkUpstreams implements Infra: the alias that moves to the promoted
// standby, and the provider's broker.
func (r *DockerReplicated) LinkUpstreams() (postgres, amqp string) {
	_, amqp = r.parent.LinkUpstreams()
	return net.JoinHostPort(r.frontAlias, "5432"), amqp
}

// AMQPAddr implements Infra: the provider's broker.
func (r *DockerReplicated) AMQPAddr() string { return r.parent.AMQPAddr() }

// AMQPURL implements Infra: the provider's broker.
func (r *DockerReplicated) AMQPURL(vhost string) string { return r.parent.AMQPURL(vhost) }

// CreateVHost implements Infra: on the provider's broker.
func (r *DockerReplicated) CreateVHost(ctx context.Context, name string) error {
	return r.parent.CreateVHost(ctx, name)
}

// DeleteVHost implements Infra: on the provider's broker.
func (r *DockerReplicated) DeleteVHost(ctx context.Context, name string) error {
	return r.parent.DeleteVHost(ctx, name)
}

// TraceVHost implements Infra.
func (r *DockerReplicated) TraceVHost(ctx context.Context, name string, on bool) error {
	return r.parent.TraceVHost(ctx, name, on)
}

// Queue implements Infra: on the provider's broker.
func (r *DockerReplicated) Queue(ctx context.Context, vhost, queue string) (history.QueueInfo, error) {
	return r.parent.Queue(ctx, vhost, queue)
}

// VHost implements Infra: on the provider's broker.
func (r *DockerReplicated) VHost(ctx context.Context, vhost string) (VHostInfo, error) {
	return r.parent.VHost(ctx, vhost)
}

// ClientConnections implements Infra: on the provider's broker.
func (r *DockerReplicated) ClientConnections(ctx context.Context, vhost string) (int, error) {
	return r.parent.ClientConnections(ctx, vhost)
}

var errSharedBroker = errors.New("the broker beside a docker standby is the provider's, which other runs share: it is not restarted")

// CanRestartBroker implements Infra: no (see errSharedBroker).
func (r *DockerReplicated) CanRestartBroker() bool { return false }

// StopBroker implements Infra: an error (see errSharedBroker).
func (r *DockerReplicated) StopBroker(context.Context) error {
	return fmt.Errorf("docker replicated: %w", errSharedBroker)
}

// StartBroker implements Infra: an error (see errSharedBroker).
func (r *DockerReplicated) StartBroker(context.Context) error {
	return fmt.Errorf("docker replicated: %w", errSharedBroker)
}

// RestartBroker implements Infra: an error (see errSharedBroker).
func (r *DockerReplicated) RestartBroker(context.Context) error {
	return fmt.Errorf("docker replicated: %w", errSharedBroker)
}

// Secrets implements Infra: the postgres user's and the replication
// role's passwords, and the provider's broker's.
func (r *DockerReplicated) Secrets() []string {
	return append([]string{r.pgPass, r.replPass}, r.parent.Secrets()...)
}

// HoldReplication implements Replicated: the replication link goes down,
// which closes the standby's connection to the primary and refuses its
// reconnects until ReleaseReplication (see LocalReplicated.HoldReplication
// for what a synchronous primary's commits do meanwhile).
func (r *DockerReplicated) HoldReplication(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.moved.Load() || r.killed.Load() {
		return fmt.Errorf("docker replicated: hold replication: %w", errPromoted)
	}
	if err := r.repl.Down(ctx); err != nil {
		return fmt.Errorf("docker replicated: hold replication: %w", err)
	}
	return nil
}

// ReleaseReplication implements Replicated: the link comes up, and it
// waits until the standby has replayed the primary's WAL up to where it
// was then, bounded by ctx.
func (r *DockerReplicated) ReleaseReplication(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.moved.Load() || r.killed.Load() {
		return fmt.Errorf("docker replicated: release replication: %w", errPromoted)
	}
	if err := r.repl.Up(ctx); err != nil {
		return fmt.Errorf("docker replicated: release replication: %w", err)
	}
	if err := waitReplayed(ctx, r.urlOn(r.primaryAddr, "postgres"), r.urlOn(r.sbAddr, "postgres"), nil, nil); err != nil {
		return fmt.Errorf("docker replicated: release replication: %w", err)
	}
	return nil
}

// Failover implements Replicated. It reads the primary's pg_current_wal_lsn
// (on a connection opened before, so the read is right before the kill),
// docker kills the primary's container, promotes the standby (pg_promote,
// waiting), waits until a transaction id can be assigned on it, and moves
// "the primary" to it: the alias on the front network and the front
// forwarder. Took runs from the kill to the end of that move, when a
// client on either name reaches the promoted server. StandbyLSN and
// LostBytes as LocalReplicated.Failover has them.
//
// A second Failover is an error: there is no standby left. A failover that
// fails after the kill leaves no primary.
func (r *DockerReplicated) Failover(ctx context.Context) (Failover, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.moved.Load() || r.killed.Load() {
		return Failover{}, fmt.Errorf("docker replicated: failover: %w", errPromoted)
	}
	f, err := r.failover(ctx)
	if err != nil {
		return f, fmt.Errorf("docker replicated: failover: %w", err)
	}
	r.logf("docker replicated %s: failover in %s: primary at %s, standby at %s, %d bytes lost",
		r.id, f.Took.Round(time.Millisecond), f.PrimaryLSN, f.StandbyLSN, f.LostBytes)
	return f, nil
}

func (r *DockerReplicated) failover(ctx context.Context) (Failover, error) {
	sconn, err := pgx.Connect(ctx, r.urlOn(r.sbAddr, "postgres"))
	if err != nil {
		return Failover{}, fmt.Errorf("standby: %w", err)
	}
	defer sconn.Close(context.WithoutCancel(ctx))
	pconn, err := pgx.Connect(ctx, r.urlOn(r.primaryAddr, "postgres"))
	if err != nil {
		return Failover{}, fmt.Errorf("primary: %w", err)
	}
	var f Failover
	if err := pconn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&f.PrimaryLSN); err != nil {
		_ = pconn.Close(context.WithoutCancel(ctx))
		return Failover{}, fmt.Errorf("primary's LSN: %w", err)
	}
	begin := time.Now()
	r.killed.Store(true)
	if err := killContainer(ctx, r.api.Client(), r.primaryC.Container); err != nil {
		return Failover{}, fmt.Errorf("kill the primary: %w", err)
	}
	_ = pconn.Close(context.WithoutCancel(ctx)) // its server is gone
	killed := time.Since(begin)

	var promoted bool
	if err := sconn.QueryRow(ctx, `SELECT pg_promote(true, $1)`, promoteWait).Scan(&promoted); err != nil {
		return Failover{}, fmt.Errorf("promote: %w", err)
	}
	if !promoted {
		return Failover{}, fmt.Errorf("promote: not promoted within %d s", promoteWait)
	}
	err = poll(ctx, func(ctx context.Context) error {
		var inRecovery bool
		if err := sconn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery); err != nil {
			return err
		}
		if inRecovery {
			return errors.New("still in recovery")
		}
		var xid int64
		return sconn.QueryRow(ctx, `SELECT txid_current()`).Scan(&xid) // fails in recovery: it writes
	})
	if err != nil {
		return Failover{}, fmt.Errorf("wait until the promoted server writes: %w", err)
	}
	writes := time.Since(begin)
	r.moved.Store(true)
	// The killed primary's endpoint goes first, so the alias names one
	// container only.
	nw := r.frontNet.ID
	if _, err := r.api.Client().NetworkDisconnect(ctx, nw, client.NetworkDisconnectOptions{Container: r.primaryC.GetContainerID(), Force: true}); err != nil {
		return Failover{}, fmt.Errorf("disconnect the killed primary from the front network: %w", err)
	}
	if _, err := r.api.Client().NetworkConnect(ctx, nw, client.NetworkConnectOptions{Container: r.standbyC.GetContainerID(),
		EndpointConfig: &network.EndpointSettings{Aliases: []string{r.frontAlias}}}); err != nil {
		return Failover{}, fmt.Errorf("give the promoted standby the alias %s: %w", r.frontAlias, err)
	}
	r.front.SetUpstream(r.sbAddr)
	f.Took = time.Since(begin)
	r.logf("docker replicated %s: primary killed in %s, promoted standby writes after %s, named the primary after %s",
		r.id, killed.Round(time.Millisecond), writes.Round(time.Millisecond), f.Took.Round(time.Millisecond))

	if err := sconn.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn()::text`).Scan(&f.StandbyLSN); err != nil {
		return f, fmt.Errorf("promoted server's replay LSN: %w", err)
	}
	p, err := parseLSN(f.PrimaryLSN)
	if err != nil {
		return f, err
	}
	sb, err := parseLSN(f.StandbyLSN)
	if err != nil {
		return f, err
	}
	if p > sb {
		f.LostBytes = int64(p - sb)
	}
	return f, nil
}

// Stop implements Infra: it removes the two containers, then the
// replication link and the front network (after taking the provider's Toxiproxy off
// it), and closes the front forwarder; the provider's broker stays. A
// second Stop returns the first one's result.
func (r *DockerReplicated) Stop(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return r.stopErr
	}
	r.stopped = true
	begin := time.Now()
	var errs []error
	if r.front != nil {
		if err := r.front.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the front forwarder: %w", err))
		}
	}
	for _, c := range []struct {
		name string
		c    testcontainers.Container
	}{{"standby", r.standbyC}, {"primary", r.primaryC}} {
		if err := testcontainers.TerminateContainer(c.c, testcontainers.StopContext(ctx), testcontainers.StopTimeout(0)); err != nil {
			errs = append(errs, fmt.Errorf("remove the %s container: %w", c.name, err))
		}
	}
	// After the containers: a link whose connections are gone is removed
	// at once, one with a connection to a killed primary waits for that
	// connection, and can take the Toxiproxy API past its 25 s limit.
	if r.repl != nil {
		if err := r.parent.toxi.RemoveLink(ctx, r.repl.Name()); err != nil {
			errs = append(errs, err)
		}
	}
	if r.toxiJoined {
		if _, err := r.api.Client().NetworkDisconnect(ctx, r.frontNet.ID, client.NetworkDisconnectOptions{Container: r.parent.toxiC.GetContainerID(), Force: true}); err != nil {
			errs = append(errs, fmt.Errorf("disconnect toxiproxy from the front network: %w", err))
		}
	}
	if r.frontNet != nil {
		if err := r.frontNet.Remove(ctx); err != nil {
			errs = append(errs, fmt.Errorf("remove network %s: %w", r.frontNet.Name, err))
		}
	}
	if r.api != nil {
		if err := r.api.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the docker client: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.stopErr = fmt.Errorf("docker replicated: stop: %w", err)
		return r.stopErr
	}
	r.logf("docker replicated %s: removed in %s", r.id, time.Since(begin).Round(10*time.Millisecond))
	return nil
}
