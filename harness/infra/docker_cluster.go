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
	"strconv"
	"strings"
	"sync"
	"time"

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

// A docker cluster (Docker.StartCluster) is three RabbitMQ containers and
// a PostgreSQL container beside them, on the provider's network, where
// the provider's Toxiproxy container reaches them by aliases of their own
// (rabbitmq-<id>-<i+1>:5672, postgres-<id>:5432): the runs' links to the
// cluster are on that Toxiproxy, as every other run's.
//
// What holds, and why:
//   - The nodes' distribution traffic (epmd and Erlang distribution) goes
//     over a second network of the cluster's own, internal (no gateway, so
//     the nodes' published ports stay on the provider's network). A node
//     is named rabbit@<host> (RABBITMQ_NODENAME), and <host> is its alias
//     on that network only: the nodes resolve it there (Docker's DNS
//     answers a container with the aliases of the networks it is on), the
//     provider's network does not know it. <host> is not the container's
//     hostname, which Docker's DNS answers on every network.
//   - Partition(i) is docker network disconnect of node i from that
//     network: its connections to the others lose their route and its
//     name stops resolving, so neither side reaches the other, while its
//     clients' connections (AMQP, management, on the provider's network
//     and its published ports) are not touched. Heal connects it again
//     under its alias. This is chosen over the local provider's
//     Toxiproxy links with epmd registrations: inside containers each
//     node runs its own epmd that Erlang asks by hostname, and a cut of
//     the network is what a real partition is. The difference: a cut
//     link closes connections at once; a cut network leaves them
//     silent, so the others count the node down after net_ticktime
//     (7.5 to 12.5 s), not at once.
//   - The nodes share a random Erlang cookie, written to
//     /var/lib/rabbitmq/.erlang.cookie (mode 0400; the image's entrypoint
//     makes the rabbitmq user its owner), never in the environment.
//   - net_ticktime and pause_minority as the local cluster has them (see
//     netTicktime and clusterConfig); quorum queues tick every 500 ms.
//   - The first node starts alone; the others start once it runs and join
//     it (classic peer discovery). Starting them side by side, as the
//     local cluster does, makes a joiner fail now and then while the first
//     node is still enabling its feature flags.
//   - KillNode is docker kill (SIGKILL to every process of the node);
//     StartNode starts the container again on its data: Docker may publish
//     its ports on new host ports, so the addresses are read again, and
//     the Infra methods ask for them each time. PauseNode is docker pause
//     (the cgroup freezer: every process stopped, as SIGSTOP would).

// DockerCluster is a three-node RabbitMQ cluster with a PostgreSQL beside
// it, in containers: it implements Cluster. Its Infra methods speak to the
// first running node (neither killed nor paused).
type DockerCluster struct {
	parent  *Docker // its network and Toxiproxy; the cluster does not stop them
	logw    io.Writer
	id      string
	api     *testcontainers.DockerProvider
	distNet *testcontainers.DockerNetwork
	pgC     *tcpostgres.PostgresContainer
	pg      pgServer
	pgAlias string
	nodes   []*dockerNode

	pgPass, rmqUser, rmqPass, cookie string

	mu      sync.Mutex // held by Stop and whole-broker restarts
	stopped bool
	stopErr error
}

// dockerNode is one node of a DockerCluster.
type dockerNode struct {
	i     int
	host  string // the node name's host: its alias on the distribution network only
	alias string // alias on the provider's network
	c     *testcontainers.DockerContainer

	ops sync.Mutex // serialises node operations on this node

	mu       sync.Mutex // guards the fields below
	amqpAddr string     // host:port as this host reaches it
	mgmtAddr string
	down     bool // killed
	paused   bool
	cut      bool // disconnected from the distribution network
}

func (n *dockerNode) name() string { return "rabbit@" + n.host }

func (n *dockerNode) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.down && !n.paused
}

var (
	_ Cluster        = (*DockerCluster)(nil)
	_ ClusterStarter = (*Docker)(nil)
)

// dockerClusterNodes is how many nodes a docker cluster has.
const dockerClusterNodes = 3

// StartCluster implements ClusterStarter: a DockerCluster on d's network,
// reached through d's Toxiproxy (links is not used: the runs' links are
// on it already, and a partition is a network cut, not a link's).
func (d *Docker) StartCluster(ctx context.Context, _ proxies.Links) (Cluster, error) {
	c, err := d.startCluster(ctx)
	if err != nil {
		return nil, err // not a nil *DockerCluster in a non-nil Cluster
	}
	return c, nil
}

func (d *Docker) startCluster(ctx context.Context) (*DockerCluster, error) {
	begin := time.Now()
	d.mu.Lock()
	stopped := d.stopped
	d.mu.Unlock()
	if stopped {
		return nil, fmt.Errorf("docker infra: start cluster: %w", errStopped)
	}
	pgPass, rmqUser, rmqPass, err := credentials()
	if err != nil {
		return nil, fmt.Errorf("docker infra: start cluster: %w", err)
	}
	cookie, err := erlangCookie()
	if err != nil {
		return nil, fmt.Errorf("docker infra: start cluster: %w", err)
	}
	var idb [4]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return nil, fmt.Errorf("docker infra: start cluster: %w", err)
	}
	id := hex.EncodeToString(idb[:])
	logw := redact.New(pgPass, rmqPass, cookie).Writer(d.logw)
	c := &DockerCluster{parent: d, logw: logw, id: id, pgAlias: "postgres-" + id,
		pgPass: pgPass, rmqUser: rmqUser, rmqPass: rmqPass, cookie: cookie}
	fail := func(err error) (*DockerCluster, error) {
		if stopErr := c.Stop(context.WithoutCancel(ctx)); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", stopErr))
		}
		return nil, fmt.Errorf("docker infra: start cluster: %w", err)
	}
	tcLog := testcontainers.WithLogger(stdlog.New(logw, "docker cluster: ", 0))
	if c.api, err = testcontainers.NewDockerProvider(tcLog); err != nil {
		return fail(err)
	}
	if c.distNet, err = tcnetwork.New(ctx, tcnetwork.WithInternal()); err != nil {
		return fail(fmt.Errorf("create the distribution network: %w", err))
	}
	for i := range dockerClusterNodes {
		c.nodes = append(c.nodes, &dockerNode{i: i,
			host:  fmt.Sprintf("rmq%s-%d", id, i+1),
			alias: fmt.Sprintf("rabbitmq-%s-%d", id, i+1)})
	}

	// PostgreSQL and the first node side by side; the others once the
	// first runs.
	var (
		wg    sync.WaitGroup
		pgErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		pgC, err := runDockerPostgres(ctx, d.opts.PostgresImage, tcLog, d.network, c.pgAlias, pgPass)
		if pgC != nil {
			c.pgC = pgC
		}
		if err != nil {
			pgErr = fmt.Errorf("postgres (%s): %w", d.opts.PostgresImage, err)
		}
	}()
	firstErr := c.runNode(ctx, c.nodes[0], tcLog)
	firstTook := time.Since(begin)
	errs := []error{firstErr}
	if firstErr == nil {
		errs = append(errs, make([]error, len(c.nodes)-1)...)
		for _, n := range c.nodes[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[n.i] = c.runNode(ctx, n, tcLog)
			}()
		}
	}
	wg.Wait()
	if err := errors.Join(append(errs, pgErr)...); err != nil {
		return fail(err)
	}
	pgAddr, err := c.pgC.PortEndpoint(ctx, "5432/tcp", "")
	if err != nil {
		return fail(fmt.Errorf("postgres port: %w", err))
	}
	c.pg = pgServer{ownServer: true, base: &url.URL{
		Scheme: "postgres", User: url.UserPassword("postgres", pgPass),
		Host: pgAddr, Path: "/postgres", RawQuery: "sslmode=disable",
	}}
	hctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := c.WaitHealthy(hctx); err != nil {
		return fail(err)
	}
	if err := c.brokers().enableFeatureFlags(hctx); err != nil {
		return fail(err)
	}
	c.logf("docker cluster %s: nodes %v, postgres %s, first node in %s, all in %s", id, c.nodeNames(), pgAddr,
		firstTook.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond))
	return c, nil
}

// dockerClusterAdvanced is a cluster node's advanced.config: quorum ticks
// as the single broker's (quorumTickConfig), net_ticktime as the local
// cluster's.
var dockerClusterAdvanced = "[{kernel, [{net_ticktime, " + strconv.Itoa(netTicktime) + "}]},\n" +
	" {rabbit, [{quorum_tick_interval, 500}]}].\n"

// nodeStartAttempts bounds how often a node's start is tried: RabbitMQ
// 3.10 nodes that boot at the same time (a joiner and the node it joins
// still syncing feature flags, or every node after a whole-cluster kill)
// can stop with incompatible_feature_flags when their boots overlap;
// started again, they boot.
const nodeStartAttempts = 3

// runNode creates node n's container and waits until its broker has
// started (for a joining node: joined) and its management API answers. A
// joiner whose container exits is removed and created again (a fresh
// container: its half-joined database is gone with it).
func (c *DockerCluster) runNode(ctx context.Context, n *dockerNode, tcLog testcontainers.LoggerOption) error {
	for attempt := 1; ; attempt++ {
		err := c.createNode(ctx, n, tcLog)
		if err == nil || n.i == 0 || attempt == nodeStartAttempts || ctx.Err() != nil {
			return err
		}
		state, serr := n.c.State(ctx)
		if serr != nil || state.Running {
			return err
		}
		c.logf("docker cluster: node %s stopped while it joined (attempt %d: %v); joining again from a new container", n.name(), attempt, err)
		if terr := testcontainers.TerminateContainer(n.c, testcontainers.StopContext(ctx)); terr != nil {
			return errors.Join(err, fmt.Errorf("remove its container: %w", terr))
		}
		n.c = nil
	}
}

func (c *DockerCluster) createNode(ctx context.Context, n *dockerNode, tcLog testcontainers.LoggerOption) error {
	d := c.parent
	first := c.nodes[0].name()
	ctr, err := testcontainers.Run(ctx, d.opts.RabbitMQImage, tcLog, onLoopback(),
		tcnetwork.WithNetwork([]string{n.alias}, d.network),
		tcnetwork.WithNetwork([]string{n.host}, c.distNet),
		testcontainers.WithEnv(map[string]string{
			// Not the hostname: Docker's DNS answers a container's
			// hostname on every network it is on.
			"RABBITMQ_NODENAME":     n.name(),
			"RABBITMQ_DEFAULT_USER": c.rmqUser,
			"RABBITMQ_DEFAULT_PASS": c.rmqPass,
		}),
		testcontainers.WithExposedPorts("5672/tcp", "15672/tcp"),
		testcontainers.WithFiles(testcontainers.ContainerFile{
			Reader:            strings.NewReader(dockerRabbitConf + clusterConfig(first, n.i)),
			ContainerFilePath: "/etc/rabbitmq/conf.d/90-faultline.conf",
			FileMode:          0o644,
		}, testcontainers.ContainerFile{
			Reader:            strings.NewReader(dockerClusterAdvanced),
			ContainerFilePath: "/etc/rabbitmq/advanced.config",
			FileMode:          0o644,
		}, testcontainers.ContainerFile{
			Reader:            strings.NewReader(c.cookie),
			ContainerFilePath: "/var/lib/rabbitmq/.erlang.cookie",
			FileMode:          0o400,
		}),
		testcontainers.WithWaitStrategyAndDeadline(startTimeout, wait.ForLog("Server startup complete")),
	)
	if ctr != nil {
		n.c = ctr
	}
	if err != nil {
		return fmt.Errorf("node %s (%s): %w", n.name(), d.opts.RabbitMQImage, err)
	}
	if err := c.refreshNode(ctx, n); err != nil {
		return fmt.Errorf("node %s: %w", n.name(), err)
	}
	if err := c.waitNodeUp(ctx, n); err != nil {
		return fmt.Errorf("node %s: %w", n.name(), err)
	}
	return nil
}

// refreshNode reads node n's published ports.
func (c *DockerCluster) refreshNode(ctx context.Context, n *dockerNode) error {
	amqpAddr, err := n.c.PortEndpoint(ctx, "5672/tcp", "")
	if err != nil {
		return fmt.Errorf("AMQP port: %w", err)
	}
	mgmtAddr, err := n.c.PortEndpoint(ctx, "15672/tcp", "")
	if err != nil {
		return fmt.Errorf("management port: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.amqpAddr, n.mgmtAddr = amqpAddr, mgmtAddr
	return nil
}

// errNodeExited: a node's container stopped while it started.
var errNodeExited = errors.New("its container stopped while it started")

// waitNodeUp waits until node n's AMQP port and management API answer,
// within startTimeout, or until its container stops (errNodeExited).
func (c *DockerCluster) waitNodeUp(ctx context.Context, n *dockerNode) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		err := waitBroker(ctx, amqpServer{base: c.amqpBase(n)}, c.nodeAPI(n), true, 2*time.Second)
		if err == nil || ctx.Err() != nil {
			return err
		}
		state, serr := n.c.State(ctx)
		if serr != nil {
			return fmt.Errorf("container state: %w", serr)
		}
		if !state.Running {
			return fmt.Errorf("%w (exit code %d)", errNodeExited, state.ExitCode)
		}
	}
}

func (c *DockerCluster) amqpBase(n *dockerNode) *url.URL {
	n.mu.Lock()
	defer n.mu.Unlock()
	return &url.URL{Scheme: "amqp", User: url.UserPassword(c.rmqUser, c.rmqPass), Host: n.amqpAddr, Path: "/"}
}

// nodeAPI is node n's management API as the run's user.
func (c *DockerCluster) nodeAPI(n *dockerNode) mgmtAPI {
	n.mu.Lock()
	addr := n.mgmtAddr
	n.mu.Unlock()
	return newMgmtAPI(&url.URL{Scheme: "http", Host: addr}, c.rmqUser, c.rmqPass)
}

func (c *DockerCluster) logf(format string, args ...any) {
	fmt.Fprintf(c.logw, format+"\n", args...)
}

func (c *DockerCluster) nodeNames() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.name())
	}
	return out
}

// node returns node i, or an error naming the valid range.
func (c *DockerCluster) node(i int) (*dockerNode, error) {
	if i < 0 || i >= len(c.nodes) {
		return nil, fmt.Errorf("node %d: the broker has nodes 0 to %d", i, len(c.nodes)-1)
	}
	return c.nodes[i], nil
}

// candidates are the nodes to ask, in order: those running (neither
// killed nor paused).
func (c *DockerCluster) candidates() []*dockerNode {
	var out []*dockerNode
	for _, n := range c.nodes {
		if n.running() {
			out = append(out, n)
		}
	}
	return out
}

// firstRunning is the first node that runs, or the first node.
func (c *DockerCluster) firstRunning() *dockerNode {
	if cs := c.candidates(); len(cs) > 0 {
		return cs[0]
	}
	return c.nodes[0]
}

// onNode calls call with the management API of the first running node,
// failing over to the next that runs (see mgmtCluster.onNode).
func (c *DockerCluster) onNode(ctx context.Context, call func(ctx context.Context, api mgmtAPI) error) error {
	return c.brokers().onNode(ctx, call)
}

// brokers is c's nodes as mgmtCluster sees them.
func (c *DockerCluster) brokers() mgmtCluster {
	return mgmtCluster{nodes: c.mgmtNodes(c.nodes), running: func() []mgmtNode { return c.mgmtNodes(c.candidates()) }}
}

func (c *DockerCluster) mgmtNodes(nodes []*dockerNode) []mgmtNode {
	out := make([]mgmtNode, len(nodes))
	for k, n := range nodes {
		out[k] = mgmtNode{name: n.name(), api: func() mgmtAPI { return c.nodeAPI(n) }}
	}
	return out
}

// Name implements Infra.
func (c *DockerCluster) Name() string { return "docker" }

// Nodes implements Cluster: the nodes' published AMQP ports as they are
// now (a restarted node may have new ones), and their aliases on the
// provider's network.
func (c *DockerCluster) Nodes() []BrokerNode {
	out := make([]BrokerNode, len(c.nodes))
	for i, n := range c.nodes {
		n.mu.Lock()
		out[i] = BrokerNode{Name: n.name(), AMQPAddr: n.amqpAddr, Upstream: net.JoinHostPort(n.alias, "5672")}
		n.mu.Unlock()
	}
	return out
}

// AMQPURLOf implements Cluster; an i out of range gives the first node's.
func (c *DockerCluster) AMQPURLOf(i int, vhost string) string {
	n, err := c.node(i)
	if err != nil {
		n = c.nodes[0]
	}
	return c.amqpURL(n, vhost)
}

func (c *DockerCluster) amqpURL(n *dockerNode, vhost string) string {
	u := c.amqpBase(n)
	u.Path, u.RawPath = "/"+vhost, "/"+url.PathEscape(vhost)
	return u.String()
}

// PostgresAddr implements Infra.
func (c *DockerCluster) PostgresAddr() string { return c.pg.base.Host }

// PostgresURL implements Infra.
func (c *DockerCluster) PostgresURL(database string) string { return c.pg.url(database) }

// CreateDatabase implements Infra.
func (c *DockerCluster) CreateDatabase(ctx context.Context, name string) error {
	if err := c.pg.createDatabase(ctx, name); err != nil {
		return fmt.Errorf("docker cluster: %w", err)
	}
	return nil
}

// DropDatabase implements Infra.
func (c *DockerCluster) DropDatabase(ctx context.Context, name string) error {
	if err := c.pg.dropDatabase(ctx, name); err != nil {
		return fmt.Errorf("docker cluster: %w", err)
	}
	return nil
}

// AMQPAddr implements Infra: the first running node's published port.
func (c *DockerCluster) AMQPAddr() string {
	n := c.firstRunning()
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.amqpAddr
}

// AMQPURL implements Infra: on the first running node.
func (c *DockerCluster) AMQPURL(vhost string) string { return c.amqpURL(c.firstRunning(), vhost) }

// LinkUpstreams implements Infra: the aliases of the database and of the
// first running node on the provider's network.
func (c *DockerCluster) LinkUpstreams() (postgres, amqp string) {
	return net.JoinHostPort(c.pgAlias, "5432"), net.JoinHostPort(c.firstRunning().alias, "5672")
}

// Secrets implements Infra: the passwords and the Erlang cookie.
func (c *DockerCluster) Secrets() []string { return []string{c.pgPass, c.rmqPass, c.cookie} }

// CreateVHost implements Infra; the run's user gets all permissions, and
// it returns once the vhost runs on every running node (see
// mgmtCluster.createVHost and vhostRunning).
func (c *DockerCluster) CreateVHost(ctx context.Context, name string) error {
	if err := c.brokers().createVHost(ctx, name, c.rmqUser); err != nil {
		return fmt.Errorf("docker cluster: %w", err)
	}
	return c.vhostRunning(ctx, name)
}

// vhostRunning waits until vhost name runs on every running node (see
// mgmtCluster.vhostRunning).
func (c *DockerCluster) vhostRunning(ctx context.Context, name string) error {
	if err := c.brokers().vhostRunning(ctx, name); err != nil {
		return fmt.Errorf("docker cluster: create vhost %q: %w", name, err)
	}
	return nil
}

// TraceVHost implements Infra.
func (c *DockerCluster) TraceVHost(ctx context.Context, name string, on bool) error {
	if err := c.brokers().traceVHost(ctx, name, "", on); err != nil {
		return fmt.Errorf("docker cluster: %w", err)
	}
	return nil
}

// DeleteVHost implements Infra.
func (c *DockerCluster) DeleteVHost(ctx context.Context, name string) error {
	if err := c.onNode(ctx, func(ctx context.Context, api mgmtAPI) error { return api.deleteVHost(ctx, name) }); err != nil {
		return fmt.Errorf("docker cluster: %w", err)
	}
	return nil
}

// Queue implements Infra.
func (c *DockerCluster) Queue(ctx context.Context, vhost, queue string) (history.QueueInfo, error) {
	var q history.QueueInfo
	err := c.onNode(ctx, func(ctx context.Context, api mgmtAPI) (err error) {
		q, err = api.queue(ctx, vhost, queue)
		return err
	})
	if err != nil {
		return history.QueueInfo{}, fmt.Errorf("docker cluster: %w", err)
	}
	return q, nil
}

// ClientConnections implements Infra.
func (c *DockerCluster) ClientConnections(ctx context.Context, vhost string) (int, error) {
	var n int
	err := c.onNode(ctx, func(ctx context.Context, api mgmtAPI) (err error) {
		n, err = api.clientConnections(ctx, vhost)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("docker cluster: %w", err)
	}
	return n, nil
}

// VHost implements Infra.
func (c *DockerCluster) VHost(ctx context.Context, vhost string) (VHostInfo, error) {
	var v VHostInfo
	err := c.onNode(ctx, func(ctx context.Context, api mgmtAPI) (err error) {
		v, err = api.vhost(ctx, vhost)
		return err
	})
	if err != nil {
		return VHostInfo{}, fmt.Errorf("docker cluster: %w", err)
	}
	return v, nil
}

// QueueServersSaved implements QueueRegistry: the queues from the
// management API, each node's registry copied out of its container.
func (c *DockerCluster) QueueServersSaved(ctx context.Context) (RegistryCheck, error) {
	check, err := queueServersSaved(ctx, c.onNode, func(ctx context.Context, node string) ([]byte, error) {
		for _, n := range c.nodes {
			if n.name() == node {
				return containerRegistry(ctx, n.c, node)
			}
		}
		return nil, fmt.Errorf("no node of this cluster is named %s", node)
	})
	if err != nil {
		return RegistryCheck{}, fmt.Errorf("docker cluster: %w", err)
	}
	return check, nil
}

// QueueLeader implements Cluster. A quorum queue between leaders gives an
// error: poll.
func (c *DockerCluster) QueueLeader(ctx context.Context, vhost, queue string) (string, error) {
	leader, err := c.brokers().queueLeader(ctx, vhost, queue)
	if err != nil {
		return "", fmt.Errorf("docker cluster: %w", err)
	}
	return leader, nil
}

// QueueType implements Cluster.
func (c *DockerCluster) QueueType(ctx context.Context, vhost, queue string) (string, error) {
	typ, err := c.brokers().queueType(ctx, vhost, queue)
	if err != nil {
		return "", fmt.Errorf("docker cluster: %w", err)
	}
	return typ, nil
}

// KillNode implements Cluster: docker kill (SIGKILL) of node i's
// container, also when it is paused; it returns once the container no
// longer runs.
func (c *DockerCluster) KillNode(ctx context.Context, i int) error {
	n, err := c.node(i)
	if err != nil {
		return fmt.Errorf("docker cluster: kill node: %w", err)
	}
	n.ops.Lock()
	defer n.ops.Unlock()
	if err := c.killNode(ctx, n); err != nil {
		return fmt.Errorf("docker cluster: kill node %s: %w", n.name(), err)
	}
	return nil
}

func (c *DockerCluster) killNode(ctx context.Context, n *dockerNode) error {
	if err := killContainer(ctx, c.api.Client(), n.c); err != nil {
		return err
	}
	n.mu.Lock()
	n.down, n.paused = true, false
	n.mu.Unlock()
	return nil
}

// killContainer SIGKILLs ctr (docker kill works on a paused container
// too) and waits until it no longer runs.
func killContainer(ctx context.Context, api client.APIClient, ctr testcontainers.Container) error {
	id := ctr.GetContainerID()
	state, err := ctr.State(ctx)
	if err != nil {
		return fmt.Errorf("container state: %w", err)
	}
	if state.Running {
		if _, err := api.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
			return fmt.Errorf("docker kill %.12s: %w", id, err)
		}
	}
	for {
		state, err := ctr.State(ctx)
		if err != nil {
			return fmt.Errorf("container state: %w", err)
		}
		if !state.Running {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for container %.12s to stop: %w", id, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StartNode implements Cluster: node i's container starts again on its
// data; StartNode reads its published ports anew and returns once it
// answers and every other running node sees it running. A node still
// partitioned has no address for its own name (the alias is on the
// network it is cut from), and its start is not tested: Heal it first,
// as Restore does.
func (c *DockerCluster) StartNode(ctx context.Context, i int) error {
	n, err := c.node(i)
	if err != nil {
		return fmt.Errorf("docker cluster: start node: %w", err)
	}
	n.ops.Lock()
	defer n.ops.Unlock()
	if err := c.startNode(ctx, n); err != nil {
		return fmt.Errorf("docker cluster: start node %s: %w", n.name(), err)
	}
	if err := c.brokers().seenRunning(ctx, n.name()); err != nil {
		return fmt.Errorf("docker cluster: start node %s: wait until the others see it: %w", n.name(), err)
	}
	return nil
}

// startNode starts node n's container again, and again if it stops while
// it boots (see nodeStartAttempts).
func (c *DockerCluster) startNode(ctx context.Context, n *dockerNode) error {
	if state, err := n.c.State(ctx); err == nil && state.Running {
		return errors.New("it is running")
	}
	t := time.Now()
	for attempt := 1; ; attempt++ {
		// The wait strategy (a log line) is met by the first start's log
		// already; waitNodeUp is what counts.
		if err := n.c.Start(ctx); err != nil {
			return err
		}
		if err := c.refreshNode(ctx, n); err != nil {
			return err
		}
		n.mu.Lock()
		n.down, n.paused = false, false
		n.mu.Unlock()
		err := c.waitNodeUp(ctx, n)
		if err == nil {
			break
		}
		if !errors.Is(err, errNodeExited) || attempt == nodeStartAttempts {
			if errors.Is(err, errNodeExited) {
				n.mu.Lock()
				n.down = true // Restore starts it again
				n.mu.Unlock()
			}
			return err
		}
		c.logf("docker cluster: node %s stopped while it booted (attempt %d: %v); starting it again", n.name(), attempt, err)
	}
	c.logf("docker cluster: node %s started in %s", n.name(), time.Since(t).Round(100*time.Millisecond))
	return nil
}

// PauseNode implements Cluster: docker pause (every process of the node
// frozen). Its peers count it down after net_ticktime (7.5 to 12.5 s).
func (c *DockerCluster) PauseNode(i int) error {
	return c.freeze(i, true)
}

// ResumeNode implements Cluster: docker unpause.
func (c *DockerCluster) ResumeNode(i int) error {
	return c.freeze(i, false)
}

func (c *DockerCluster) freeze(i int, pause bool) error {
	what := "pause"
	if !pause {
		what = "unpause"
	}
	n, err := c.node(i)
	if err != nil {
		return fmt.Errorf("docker cluster: %s: %w", what, err)
	}
	n.ops.Lock()
	defer n.ops.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n.mu.Lock()
	down := n.down
	n.mu.Unlock()
	if down {
		return fmt.Errorf("docker cluster: %s node %s: it is not running", what, n.name())
	}
	id := n.c.GetContainerID()
	if pause {
		_, err = c.api.Client().ContainerPause(ctx, id, client.ContainerPauseOptions{})
	} else {
		_, err = c.api.Client().ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
	}
	if err != nil {
		return fmt.Errorf("docker cluster: %s node %s: %w", what, n.name(), err)
	}
	n.mu.Lock()
	n.paused = pause
	n.mu.Unlock()
	return nil
}

// Partition implements Cluster: node i is disconnected from the
// distribution network (see the notes at the top of this file); its
// clients' connections are not touched.
func (c *DockerCluster) Partition(ctx context.Context, i int) error {
	if err := c.setCut(ctx, i, true); err != nil {
		return fmt.Errorf("docker cluster: partition: %w", err)
	}
	return nil
}

// Heal implements Cluster: node i is connected to the distribution
// network again, under its hostname; healing a node that is not cut off
// does nothing.
func (c *DockerCluster) Heal(ctx context.Context, i int) error {
	if err := c.setCut(ctx, i, false); err != nil {
		return fmt.Errorf("docker cluster: heal: %w", err)
	}
	return nil
}

func (c *DockerCluster) setCut(ctx context.Context, i int, cut bool) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	n.ops.Lock()
	defer n.ops.Unlock()
	n.mu.Lock()
	was := n.cut
	n.mu.Unlock()
	if was == cut {
		return nil
	}
	id := n.c.GetContainerID()
	if cut {
		_, err = c.api.Client().NetworkDisconnect(ctx, c.distNet.ID, client.NetworkDisconnectOptions{Container: id, Force: true})
	} else {
		_, err = c.api.Client().NetworkConnect(ctx, c.distNet.ID, client.NetworkConnectOptions{Container: id,
			EndpointConfig: &network.EndpointSettings{Aliases: []string{n.host}}})
	}
	if err != nil {
		return fmt.Errorf("node %s: %w", n.name(), err)
	}
	n.mu.Lock()
	n.cut = cut
	n.mu.Unlock()
	return nil
}

// Status implements Cluster: the union of what the running nodes that
// answer report. A node cut off from the majority stops its broker
// (pause_minority) and no longer answers, so it shows as down.
func (c *DockerCluster) Status(ctx context.Context) (ClusterStatus, error) {
	st, err := c.brokers().status(ctx)
	if err != nil {
		return ClusterStatus{}, fmt.Errorf("docker cluster: status: %w", err)
	}
	return st, nil
}

// WaitHealthy implements Cluster: it polls until every node runs (neither
// killed nor paused nor cut off) and each node's management API shows
// every node running and no partition.
func (c *DockerCluster) WaitHealthy(ctx context.Context) error {
	err := c.brokers().waitHealthy(ctx, func() error {
		for _, n := range c.nodes {
			n.mu.Lock()
			down, paused, cut := n.down, n.paused, n.cut
			n.mu.Unlock()
			if down || paused || cut {
				return fmt.Errorf("node %s is killed, paused or cut off", n.name())
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("docker cluster: wait for a healthy cluster: %w", err)
	}
	return nil
}

// Restore implements Cluster as Local.Restore does: every node connected
// again, thawed, started; then, while some node reports a partition, the
// node that reports the most is killed and started again; then
// WaitHealthy, and every vhost running on every node.
func (c *DockerCluster) Restore(ctx context.Context) ([]string, error) {
	var did []string
	for i, n := range c.nodes {
		n.mu.Lock()
		cut := n.cut
		n.mu.Unlock()
		if cut {
			if err := c.Heal(ctx, i); err != nil {
				return did, fmt.Errorf("docker cluster: restore: %w", err)
			}
			did = append(did, n.name()+" connected")
		}
	}
	for i, n := range c.nodes {
		n.mu.Lock()
		paused, down := n.paused, n.down
		n.mu.Unlock()
		switch {
		case paused:
			if err := c.ResumeNode(i); err != nil {
				return did, fmt.Errorf("docker cluster: restore: %w", err)
			}
			did = append(did, n.name()+" thawed")
		case down:
			if err := c.StartNode(ctx, i); err != nil {
				return did, fmt.Errorf("docker cluster: restore: %w", err)
			}
			did = append(did, n.name()+" started")
		}
	}
	for range c.nodes {
		// A partition shows a moment after the network comes back: look
		// for one for a few seconds before taking the cluster for whole.
		sctx, cancel := context.WithTimeout(ctx, restoreSettle)
		err := c.WaitHealthy(sctx)
		cancel()
		if err == nil {
			return did, c.vhostsRunning(ctx)
		}
		st, serr := c.Status(ctx)
		if serr != nil || len(st.Partitions) == 0 {
			continue
		}
		worst, most := -1, 0
		for i, n := range c.nodes {
			if k := len(st.Partitions[n.name()]); k > most {
				worst, most = i, k
			}
		}
		if worst < 0 {
			continue
		}
		name := c.nodes[worst].name()
		if err := c.KillNode(ctx, worst); err != nil {
			return did, fmt.Errorf("docker cluster: restore: %w", err)
		}
		if err := c.StartNode(ctx, worst); err != nil {
			return did, fmt.Errorf("docker cluster: restore: %w", err)
		}
		did = append(did, fmt.Sprintf("%s restarted (it reported a partition from %v)", name, st.Partitions[name]))
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return did, fmt.Errorf("docker cluster: restore: %w", err)
	}
	return did, c.vhostsRunning(ctx)
}

// vhostsRunning makes every vhost run on every node again.
func (c *DockerCluster) vhostsRunning(ctx context.Context) error {
	if err := c.brokers().vhostsRunning(ctx, c.vhostRunning); err != nil {
		return fmt.Errorf("docker cluster: restore: %w", err)
	}
	return nil
}

// CanRestartBroker implements Infra: the nodes' containers are ours.
func (c *DockerCluster) CanRestartBroker() bool { return true }

// StopBroker implements Infra: every node killed (see KillNode).
func (c *DockerCluster) StopBroker(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return fmt.Errorf("docker cluster: stop broker: %w", errStopped)
	}
	var errs []error
	for i := range c.nodes {
		errs = append(errs, c.KillNode(ctx, i))
	}
	return errors.Join(errs...)
}

// StartBroker implements Infra: every killed node started at once (each
// waits for the others it last saw), then WaitHealthy.
func (c *DockerCluster) StartBroker(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return fmt.Errorf("docker cluster: start broker: %w", errStopped)
	}
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		n.mu.Lock()
		down := n.down
		n.mu.Unlock()
		if !down {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.ops.Lock()
			defer n.ops.Unlock()
			if err := c.startNode(ctx, n); err != nil {
				errs[n.i] = fmt.Errorf("node %s: %w", n.name(), err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("docker cluster: start broker: %w", err)
	}
	return c.WaitHealthy(ctx)
}

// RestartBroker implements Infra.
func (c *DockerCluster) RestartBroker(ctx context.Context) error {
	if err := c.StopBroker(ctx); err != nil {
		return err
	}
	return c.StartBroker(ctx)
}

// Stop implements Infra: it removes the cluster's containers and its
// distribution network (the provider's network and Toxiproxy stay). A
// second Stop returns the first one's result.
func (c *DockerCluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopped = true
	begin := time.Now()
	var errs []error
	var wg sync.WaitGroup
	var errMu sync.Mutex
	terminate := func(name string, ctr testcontainers.Container) {
		defer wg.Done()
		if err := testcontainers.TerminateContainer(ctr, testcontainers.StopContext(ctx), testcontainers.StopTimeout(0)); err != nil {
			errMu.Lock()
			errs = append(errs, fmt.Errorf("remove %s container: %w", name, err))
			errMu.Unlock()
		}
	}
	for _, n := range c.nodes {
		if n.c != nil {
			wg.Add(1)
			go terminate(n.name(), n.c)
		}
	}
	wg.Add(1)
	go terminate("postgres", c.pgC) // a nil pointer is handled by TerminateContainer
	wg.Wait()
	if c.distNet != nil {
		if err := c.distNet.Remove(ctx); err != nil {
			errs = append(errs, fmt.Errorf("remove network %s: %w", c.distNet.Name, err))
		}
	}
	if c.api != nil {
		if err := c.api.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the docker client: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.stopErr = fmt.Errorf("docker cluster: stop: %w", err)
		return c.stopErr
	}
	c.logf("docker cluster %s: removed in %s", c.id, time.Since(begin).Round(10*time.Millisecond))
	return nil
}
