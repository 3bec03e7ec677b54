package infra

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcrabbitmq "github.com/testcontainers/testcontainers-go/modules/rabbitmq"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/redact"
	"github.com/faultline-dev/faultline/proxies"
)

// Environment variables of the docker provider.
const (
	EnvPostgresImage  = "FAULTLINE_POSTGRES_IMAGE"
	EnvRabbitMQImage  = "FAULTLINE_RABBITMQ_IMAGE"
	EnvToxiproxyImage = "FAULTLINE_TOXIPROXY_IMAGE"
	// EnvToxiproxyPorts is how many link ports the Toxiproxy container
	// publishes; each link of a run under way holds one (8 for a run with
	// two relays).
	EnvToxiproxyPorts = "FAULTLINE_TOXIPROXY_PORTS"
)

// Defaults of the docker provider. Toxiproxy stays at 2.5.0, the version
// the proxies package is written and tested against.
const (
	DefaultPostgresImage  = "postgres:15"
	DefaultRabbitMQImage  = "rabbitmq:3.10-management"
	DefaultToxiproxyImage = "ghcr.io/shopify/toxiproxy:2.5.0"
	// DefaultToxiproxyPorts covers 10 runs at once with two relays each
	// (the scenario tests' -parallel; 8 links a run), plus a margin.
	DefaultToxiproxyPorts = 100
)

// In-network names and ports of the docker provider.
const (
	dockerPGAlias     = "postgres"
	dockerRabbitAlias = "rabbitmq"
	dockerToxiAlias   = "toxiproxy"
	dockerToxiAPI     = "8474/tcp"
	dockerToxiFirst   = 8666
	// Like the local broker: queue counters every 500 ms (quorum queues'
	// through quorumTickConfig).
	dockerRabbitConf = `collect_statistics_interval = 500
management.sample_retention_policies.global.minute = 1
management.sample_retention_policies.global.hour = 60
management.sample_retention_policies.basic.minute = 1
management.sample_retention_policies.basic.hour = 60
management.sample_retention_policies.detailed.10 = 1
`
)

// DockerOptions configure StartDocker.
type DockerOptions struct {
	// Images; empty: the Default* ones.
	PostgresImage, RabbitMQImage, ToxiproxyImage string
	// ToxiproxyPorts is how many link ports to publish; 0: DefaultToxiproxyPorts.
	ToxiproxyPorts int
	// Log receives progress lines, testcontainers' included; nil discards them.
	Log io.Writer
}

// DockerOptionsFromEnv reads DockerOptions from env (os.Getenv if nil).
func DockerOptionsFromEnv(env func(string) string) (DockerOptions, error) {
	if env == nil {
		env = os.Getenv
	}
	o := DockerOptions{
		PostgresImage:  strings.TrimSpace(env(EnvPostgresImage)),
		RabbitMQImage:  strings.TrimSpace(env(EnvRabbitMQImage)),
		ToxiproxyImage: strings.TrimSpace(env(EnvToxiproxyImage)),
	}
	if v := strings.TrimSpace(env(EnvToxiproxyPorts)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return DockerOptions{}, fmt.Errorf("docker infra: %s=%q: want a number of ports from 1 to 1000", EnvToxiproxyPorts, v)
		}
		o.ToxiproxyPorts = n
	}
	return o, nil
}

func (o *DockerOptions) applyDefaults() {
	if o.PostgresImage == "" {
		o.PostgresImage = DefaultPostgresImage
	}
	if o.RabbitMQImage == "" {
		o.RabbitMQImage = DefaultRabbitMQImage
	}
	if o.ToxiproxyImage == "" {
		o.ToxiproxyImage = DefaultToxiproxyImage
	}
	if o.ToxiproxyPorts == 0 {
		o.ToxiproxyPorts = DefaultToxiproxyPorts
	}
}

// DockerAnswers returns nil when a Docker daemon answers, as testcontainers
// finds it (DOCKER_HOST, the Docker context, ~/.testcontainers.properties,
// the default and rootless sockets), or why not. ctx bounds the wait.
func DockerAnswers(ctx context.Context) error {
	done := make(chan error, 1)
	go func() {
		p, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(stdlog.New(io.Discard, "", 0)))
		if err != nil {
			done <- err
			return
		}
		done <- p.Health(ctx) // Health closes the provider
	}()
	select {
	case err := <-done:
		return describeDockerErr(err)
	case <-ctx.Done():
		return describeDockerErr(fmt.Errorf("no answer: %w", ctx.Err()))
	}
}

// describeDockerErr says where testcontainers looked: its own errors name
// only the last place it tried (e.g. "rootless Docker not found").
func describeDockerErr(err error) error {
	if err == nil {
		return nil
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return fmt.Errorf("DOCKER_HOST=%s: %w", h, err)
	}
	if _, statErr := os.Stat("/var/run/docker.sock"); statErr != nil {
		return fmt.Errorf("DOCKER_HOST is not set and there is no /var/run/docker.sock (testcontainers: %w)", err)
	}
	return fmt.Errorf("/var/run/docker.sock: %w", err)
}

// Docker is the docker provider: PostgreSQL, RabbitMQ and Toxiproxy in
// containers on one network of their own, started with testcontainers-go.
// Toxiproxy reaches the services by their aliases (postgres:5432,
// rabbitmq:5672) and publishes a pool of ports for links, which this host
// dials. It implements Infra and ToxiproxyProvider.
//
// Containers and network carry testcontainers' labels: Ryuk removes them
// when this process dies, unless TESTCONTAINERS_RYUK_DISABLED=true.
type Docker struct {
	opts    DockerOptions // with defaults applied
	logw    io.Writer
	network *testcontainers.DockerNetwork
	pgC     *tcpostgres.PostgresContainer
	rabbitC *tcrabbitmq.RabbitMQContainer
	toxiC   *testcontainers.DockerContainer
	pg      pgServer
	toxi    *proxies.RemoteServer

	// Credentials of this run, random (see credentials), fixed at start:
	// the postgres user's password and the broker's administrator (not
	// guest, which RabbitMQ may confine to loopback connections and which
	// anyone could guess).
	pgPass, rmqUser, rmqPass string

	addrMu sync.Mutex // guards amqp and mgmt, whose host ports a broker start may change
	amqp   amqpServer
	mgmt   mgmtAPI

	mu      sync.Mutex // held by broker restarts and Stop
	stopped bool
	stopErr error
}

var (
	_ Infra             = (*Docker)(nil)
	_ ToxiproxyProvider = (*Docker)(nil)
)

// StartDocker creates a network and starts the three containers on it, in
// parallel, and waits until each answers: PostgreSQL with the postgres
// module's basic wait strategies (fsync stays on, max_connections=500),
// RabbitMQ with the rabbitmq module (management image, a random
// administrator), both with random passwords made for the run, Toxiproxy 2.5.0 with its API and opts.ToxiproxyPorts link
// ports published. On error everything started is removed again. ctx
// bounds the start-up (image pulls included).
func StartDocker(ctx context.Context, opts DockerOptions) (*Docker, error) {
	begin := time.Now()
	opts.applyDefaults()
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	if err := DockerAnswers(ctx); err != nil {
		return nil, fmt.Errorf("docker infra: no Docker daemon answers (install Docker and start its daemon, or choose another %s): %w", EnvInfra, err)
	}
	pgPass, rmqUser, rmqPass, err := credentials()
	if err != nil {
		return nil, fmt.Errorf("docker infra: %w", err)
	}
	// testcontainers logs what it does; never the run's passwords.
	logw = redact.New(pgPass, rmqPass).Writer(logw)
	d := &Docker{opts: opts, logw: logw, pgPass: pgPass, rmqUser: rmqUser, rmqPass: rmqPass}
	fail := func(err error) (*Docker, error) {
		if stopErr := d.Stop(context.WithoutCancel(ctx)); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", stopErr))
		}
		return nil, fmt.Errorf("docker infra: %w", err)
	}
	tcLog := testcontainers.WithLogger(stdlog.New(logw, "docker infra: ", 0))
	nw, err := tcnetwork.New(ctx)
	if err != nil {
		return fail(fmt.Errorf("create network: %w", err))
	}
	d.network = nw

	var (
		wg   sync.WaitGroup
		errs [3]error
	)
	wg.Add(3)
	go func() {
		defer wg.Done()
		c, err := runDockerPostgres(ctx, opts.PostgresImage, tcLog, nw, dockerPGAlias, pgPass)
		if c != nil {
			d.pgC = c
		}
		if err != nil {
			errs[0] = fmt.Errorf("postgres (%s): %w", opts.PostgresImage, err)
		}
	}()
	go func() {
		defer wg.Done()
		c, err := tcrabbitmq.Run(ctx, opts.RabbitMQImage, tcLog, onLoopback(),
			tcnetwork.WithNetwork([]string{dockerRabbitAlias}, nw),
			tcrabbitmq.WithAdminUsername(rmqUser),
			tcrabbitmq.WithAdminPassword(rmqPass),
			testcontainers.WithFiles(testcontainers.ContainerFile{
				Reader:            strings.NewReader(dockerRabbitConf),
				ContainerFilePath: "/etc/rabbitmq/conf.d/90-faultline.conf",
				FileMode:          0o644,
			}, testcontainers.ContainerFile{
				// The image's RABBITMQ_ADVANCED_CONFIG_FILE.
				Reader:            strings.NewReader(quorumTickConfig),
				ContainerFilePath: "/etc/rabbitmq/advanced.config",
				FileMode:          0o644,
			}),
		)
		if c != nil {
			d.rabbitC = c
		}
		if err != nil {
			errs[1] = fmt.Errorf("rabbitmq (%s): %w", opts.RabbitMQImage, err)
		}
	}()
	go func() {
		defer wg.Done()
		ports := []string{dockerToxiAPI}
		for i := range opts.ToxiproxyPorts {
			ports = append(ports, strconv.Itoa(dockerToxiFirst+i)+"/tcp")
		}
		c, err := testcontainers.Run(ctx, opts.ToxiproxyImage, tcLog, onLoopback(),
			tcnetwork.WithNetwork([]string{dockerToxiAlias}, nw),
			testcontainers.WithExposedPorts(ports...),
			// Only the API listens at start; the link ports open as links
			// are added.
			testcontainers.WithWaitStrategy(wait.ForHTTP("/version").WithPort(dockerToxiAPI)),
		)
		if c != nil {
			d.toxiC = c
		}
		if err != nil {
			errs[2] = fmt.Errorf("toxiproxy (%s): %w", opts.ToxiproxyImage, err)
		}
	}()
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return fail(err)
	}

	pgAddr, err := d.pgC.PortEndpoint(ctx, "5432/tcp", "")
	if err != nil {
		return fail(fmt.Errorf("postgres port: %w", err))
	}
	d.pg = pgServer{ownServer: true, base: &url.URL{
		Scheme: "postgres", User: url.UserPassword("postgres", pgPass),
		Host: pgAddr, Path: "/postgres", RawQuery: "sslmode=disable",
	}}
	if err := d.refreshBrokerAddrs(ctx); err != nil {
		return fail(err)
	}
	if d.toxi, err = d.remoteToxiproxy(ctx, opts.ToxiproxyPorts); err != nil {
		return fail(err)
	}
	d.logf("docker infra: postgres %s, rabbitmq %s, toxiproxy %s (%d link ports), network %s, in %s",
		pgAddr, d.AMQPAddr(), d.toxi.APIAddr(), opts.ToxiproxyPorts, nw.Name, time.Since(begin).Round(100*time.Millisecond))
	return d, nil
}

// runDockerPostgres runs a PostgreSQL container on nw under alias, the
// postgres user's password pass, with the provider's settings and args
// after them.
func runDockerPostgres(ctx context.Context, image string, tcLog testcontainers.LoggerOption, nw *testcontainers.DockerNetwork,
	alias, pass string, args ...string) (*tcpostgres.PostgresContainer, error) {
	// The module's command is postgres -c fsync=off: a crash must be
	// real, so fsync stays on.
	cmd := append(append([]string{"postgres", "-c", "fsync=on", "-c", "max_connections=500", "-c", "shared_buffers=128MB"}, logicalArgs()...), args...)
	return tcpostgres.Run(ctx, image, tcLog, onLoopback(),
		tcnetwork.WithNetwork([]string{alias}, nw),
		tcpostgres.WithPassword(pass),
		tcpostgres.BasicWaitStrategies(),
		testcontainers.WithCmd(cmd...),
	)
}

// refreshBrokerAddrs reads the broker's host-side AMQP and management
// addresses; Docker may publish them on new ports after a restart.
func (d *Docker) refreshBrokerAddrs(ctx context.Context) error {
	amqpAddr, err := d.rabbitC.PortEndpoint(ctx, tcrabbitmq.DefaultAMQPPort, "")
	if err != nil {
		return fmt.Errorf("rabbitmq AMQP port: %w", err)
	}
	mgmtAddr, err := d.rabbitC.PortEndpoint(ctx, tcrabbitmq.DefaultHTTPPort, "")
	if err != nil {
		return fmt.Errorf("rabbitmq management port: %w", err)
	}
	user := url.UserPassword(d.rmqUser, d.rmqPass)
	d.addrMu.Lock()
	defer d.addrMu.Unlock()
	d.amqp = amqpServer{base: &url.URL{Scheme: "amqp", User: user, Host: amqpAddr, Path: "/"}}
	d.mgmt = newMgmtAPI(&url.URL{Scheme: "http", User: user, Host: mgmtAddr}, d.rmqUser, d.rmqPass)
	return nil
}

func (d *Docker) broker() (amqpServer, mgmtAPI) {
	d.addrMu.Lock()
	defer d.addrMu.Unlock()
	return d.amqp, d.mgmt
}

// remoteToxiproxy maps the Toxiproxy container's published ports.
func (d *Docker) remoteToxiproxy(ctx context.Context, n int) (*proxies.RemoteServer, error) {
	api, err := d.toxiC.PortEndpoint(ctx, dockerToxiAPI, "")
	if err != nil {
		return nil, fmt.Errorf("toxiproxy API port: %w", err)
	}
	inspect, err := d.toxiC.Inspect(ctx)
	if err != nil {
		return nil, fmt.Errorf("toxiproxy ports: %w", err)
	}
	host, err := d.toxiC.Host(ctx)
	if err != nil {
		return nil, fmt.Errorf("toxiproxy host: %w", err)
	}
	published := map[int]string{}
	for port, bindings := range inspect.NetworkSettings.Ports {
		if len(bindings) > 0 && bindings[0].HostPort != "" {
			published[int(port.Num())] = bindings[0].HostPort
		}
	}
	var pool []proxies.PortMapping
	for i := range n {
		p := dockerToxiFirst + i
		hostPort, ok := published[p]
		if !ok {
			return nil, fmt.Errorf("toxiproxy port %d is not published", p)
		}
		pool = append(pool, proxies.PortMapping{Port: p, Addr: net.JoinHostPort(host, hostPort)})
	}
	s, err := proxies.NewRemoteServer(ctx, api, "0.0.0.0", pool)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (d *Docker) logf(format string, args ...any) {
	fmt.Fprintf(d.logw, format+"\n", args...)
}

// Name implements Infra.
func (d *Docker) Name() string { return "docker" }

// Toxiproxy implements ToxiproxyProvider: the Toxiproxy container, whose
// links listen on the published ports.
func (d *Docker) Toxiproxy() proxies.Links { return d.toxi }

// LinkUpstreams implements Infra: the services' aliases on the network,
// which Toxiproxy reaches whatever ports Docker publishes.
func (d *Docker) LinkUpstreams() (postgres, amqp string) {
	return net.JoinHostPort(dockerPGAlias, "5432"), net.JoinHostPort(dockerRabbitAlias, "5672")
}

// Secrets implements Infra: the run's PostgreSQL and RabbitMQ passwords.
func (d *Docker) Secrets() []string { return []string{d.pgPass, d.rmqPass} }

// PostgresAddr implements Infra: the published PostgreSQL port.
func (d *Docker) PostgresAddr() string { return d.pg.base.Host }

// PostgresURL implements Infra (user postgres, the run's password).
func (d *Docker) PostgresURL(database string) string { return d.pg.url(database) }

// CreateDatabase implements Infra.
func (d *Docker) CreateDatabase(ctx context.Context, name string) error {
	if err := d.pg.createDatabase(ctx, name); err != nil {
		return fmt.Errorf("docker infra: %w", err)
	}
	return nil
}

// DropDatabase implements Infra.
func (d *Docker) DropDatabase(ctx context.Context, name string) error {
	if err := d.pg.dropDatabase(ctx, name); err != nil {
		return fmt.Errorf("docker infra: %w", err)
	}
	return nil
}

// AMQPAddr implements Infra: the published AMQP port, which can change
// when the broker restarts.
func (d *Docker) AMQPAddr() string {
	a, _ := d.broker()
	return a.base.Host
}

// AMQPURL implements Infra (the run's administrator and password).
func (d *Docker) AMQPURL(vhost string) string {
	a, _ := d.broker()
	return a.url(vhost)
}

// ManagementURL is the management API's base URL, without credentials
// (AMQPURL's user and password).
func (d *Docker) ManagementURL() string {
	_, m := d.broker()
	return m.base
}

// CreateVHost implements Infra; it returns once the vhost runs.
func (d *Docker) CreateVHost(ctx context.Context, name string) error {
	_, m := d.broker()
	if err := m.createVHost(ctx, name, d.rmqUser); err != nil {
		return fmt.Errorf("docker infra: %w", err)
	}
	if err := m.vhostRunning(ctx, name); err != nil {
		return fmt.Errorf("docker infra: %w", err)
	}
	return nil
}

// DeleteVHost implements Infra.
func (d *Docker) DeleteVHost(ctx context.Context, name string) error {
	_, m := d.broker()
	if err := m.deleteVHost(ctx, name); err != nil {
		return fmt.Errorf("docker infra: %w", err)
	}
	return nil
}

// TraceVHost implements Infra.
func (d *Docker) TraceVHost(ctx context.Context, name string, on bool) error {
	_, m := d.broker()
	if err := m.traceVHost(ctx, name, "", on); err != nil {
		return fmt.Errorf("docker infra: %w", err)
	}
	return nil
}

// VHost implements Infra.
func (d *Docker) VHost(ctx context.Context, vhost string) (VHostInfo, error) {
	_, m := d.broker()
	v, err := m.vhost(ctx, vhost)
	if err != nil {
		return VHostInfo{}, fmt.Errorf("docker infra: %w", err)
	}
	return v, nil
}

// ClientConnections implements Infra.
func (d *Docker) ClientConnections(ctx context.Context, vhost string) (int, error) {
	_, m := d.broker()
	n, err := m.clientConnections(ctx, vhost)
	if err != nil {
		return 0, fmt.Errorf("docker infra: %w", err)
	}
	return n, nil
}

// Queue implements Infra; the counters are emitted every 500 ms.
func (d *Docker) Queue(ctx context.Context, vhost, queue string) (history.QueueInfo, error) {
	_, m := d.broker()
	q, err := m.queue(ctx, vhost, queue)
	if err != nil {
		return history.QueueInfo{}, fmt.Errorf("docker infra: %w", err)
	}
	return q, nil
}

// QueueServersSaved implements QueueRegistry: the queues from the
// management API, the registry copied out of the broker's container.
func (d *Docker) QueueServersSaved(ctx context.Context) (RegistryCheck, error) {
	onBroker := func(ctx context.Context, call func(ctx context.Context, api mgmtAPI) error) error {
		_, m := d.broker()
		return call(ctx, m)
	}
	c, err := queueServersSaved(ctx, onBroker, func(ctx context.Context, node string) ([]byte, error) {
		return containerRegistry(ctx, d.rabbitC, node)
	})
	if err != nil {
		return RegistryCheck{}, fmt.Errorf("docker infra: %w", err)
	}
	return c, nil
}

// containerRegistry copies node's names.dets out of container c, where
// the image keeps RabbitMQ's data (Debian's /var/lib/rabbitmq/mnesia):
// nil while the node has none.
func containerRegistry(ctx context.Context, c testcontainers.Container, node string) ([]byte, error) {
	r, err := c.CopyFileFromContainer(ctx, path.Join("/var/lib/rabbitmq/mnesia", node, "quorum", node, "names.dets"))
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// CanRestartBroker implements Infra: the broker's container is ours.
func (d *Docker) CanRestartBroker() bool { return true }

// StopBroker implements Infra: docker kill (SIGKILL) of the broker's
// container, then it waits until the container is no longer running.
func (d *Docker) StopBroker(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return fmt.Errorf("docker infra: stop broker: %w", errStopped)
	}
	if err := d.killBroker(ctx); err != nil {
		return fmt.Errorf("docker infra: stop broker: %w", err)
	}
	return nil
}

func (d *Docker) killBroker(ctx context.Context) error {
	p, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(stdlog.New(io.Discard, "", 0)))
	if err != nil {
		return err
	}
	defer p.Close()
	return killContainer(ctx, p.Client(), d.rabbitC)
}

// StartBroker implements Infra: it starts the broker's container again
// (same data), reads its published ports anew and waits until AMQP and the
// management API answer.
func (d *Docker) StartBroker(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return fmt.Errorf("docker infra: start broker: %w", errStopped)
	}
	t := time.Now()
	if state, err := d.rabbitC.State(ctx); err == nil && state.Running {
		return errors.New("docker infra: start broker: already running")
	}
	// The module's wait strategy (a log line) is met by the first start's
	// log already; the wait below is what counts.
	if err := d.rabbitC.Start(ctx); err != nil {
		return fmt.Errorf("docker infra: start broker: %w", err)
	}
	if err := d.refreshBrokerAddrs(ctx); err != nil {
		return fmt.Errorf("docker infra: start broker: %w", err)
	}
	a, m := d.broker()
	if err := waitBroker(ctx, a, m, true, startTimeout); err != nil {
		return fmt.Errorf("docker infra: start broker: %w", err)
	}
	d.logf("docker infra: broker started in %s", time.Since(t).Round(100*time.Millisecond))
	return nil
}

// RestartBroker implements Infra.
func (d *Docker) RestartBroker(ctx context.Context) error {
	if err := d.StopBroker(ctx); err != nil {
		return err
	}
	return d.StartBroker(ctx)
}

// Stop implements Infra: it removes the three containers (and their
// volumes) and the network. A second Stop returns the first one's result.
func (d *Docker) Stop(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return d.stopErr
	}
	d.stopped = true
	begin := time.Now()
	var errs []error
	terminate := func(name string, c testcontainers.Container) {
		if err := testcontainers.TerminateContainer(c, testcontainers.StopContext(ctx), testcontainers.StopTimeout(0)); err != nil {
			errs = append(errs, fmt.Errorf("remove %s container: %w", name, err))
		}
	}
	// A nil pointer in an interface is handled by TerminateContainer.
	terminate("toxiproxy", d.toxiC)
	terminate("rabbitmq", d.rabbitC)
	terminate("postgres", d.pgC)
	if d.network != nil {
		if err := d.network.Remove(ctx); err != nil {
			errs = append(errs, fmt.Errorf("remove network %s: %w", d.network.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		d.stopErr = fmt.Errorf("docker infra: stop: %w", err)
		return d.stopErr
	}
	d.logf("docker infra: removed in %s", time.Since(begin).Round(10*time.Millisecond))
	return nil
}
