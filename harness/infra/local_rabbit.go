package infra

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/safe"
)

// rabbitServer is the broker's start script. /usr/sbin/rabbitmq-server
// would switch to the rabbitmq user with su; this one runs as we start it.
const rabbitServer = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// quorumTickConfig is an advanced.config: a quorum queue publishes its
// counters (the management API's unacked count among them) on its Ra tick,
// every 5 s by default whatever collect_statistics_interval says, and
// rabbitmq.conf has no key for it in 3.10. Every 500 ms, like the other
// counters, so a scenario's convergence wait does not sit out a stale
// unacked count for up to 5 s.
const quorumTickConfig = "[{rabbit, [{quorum_tick_interval, 500}]}].\n"

// rabbitNode is one RabbitMQ node of the local provider: its folder, its
// ports (fixed for the run, so a restarted node keeps them), its epmd and
// its broker.
type rabbitNode struct {
	i    int    // its index in Local.nodes
	name string // Erlang node name, alive@localhost
	dir  string // data, configuration and HOME
	// childName names its children's logs and pid files in the folder.
	childName func(what string) string

	amqpPort, mgmtPort, distPort, epmdPort int
	argv, env                              []string

	// ops serialises the node operations (start, kill, pause, resume) on
	// this node; they take Local.mu only to read and swap the children.
	ops sync.Mutex

	// Guarded by Local.mu.
	epmd, rabbit *child
	paused       bool
}

// alive is the node name's part before '@', as epmd knows it.
func (n *rabbitNode) alive() string {
	a, _, _ := strings.Cut(n.name, "@")
	return a
}

func (n *rabbitNode) amqpAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.amqpPort))
}

// running says whether the node's broker process lives and is not frozen
// by PauseNode; l.mu is held.
func (n *rabbitNode) running() bool {
	return n.rabbit != nil && !n.rabbit.exited() && !n.paused
}

// prepareRabbit writes node n's configuration under <dir>/rmq (one node)
// or <dir>/rmq-<i+1> (a cluster) and builds its command line and
// environment.
func (l *Local) prepareRabbit(n *rabbitNode) error {
	cluster := len(l.nodes) > 1
	// The folder's random suffix makes the node names unique on this host.
	alive := "fl" + strings.TrimPrefix(filepath.Base(l.dir), strings.TrimSuffix(dirPattern, "*"))
	rmq := filepath.Join(l.dir, "rmq")
	n.childName = func(what string) string { return what }
	if cluster {
		suffix := "-" + strconv.Itoa(n.i+1)
		alive += suffix
		rmq += suffix
		n.childName = func(what string) string { return what + suffix }
	}
	n.name = alive + "@localhost"
	n.dir = rmq
	for _, d := range []string{rmq, filepath.Join(rmq, "mnesia"), filepath.Join(rmq, "log")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("rabbitmq: %w", err)
		}
	}
	// default_user replaces guest: on its first boot (an empty mnesia) the
	// node creates this user, an administrator with all permissions on /,
	// and no guest. The password is this run's, so the file is 0600.
	conf := fmt.Sprintf(`listeners.tcp.default = 127.0.0.1:%d
management.tcp.port = %d
management.tcp.ip = 127.0.0.1
default_user = %s
default_pass = %s
default_user_tags.administrator = true
default_permissions.configure = .*
default_permissions.read = .*
default_permissions.write = .*
collect_statistics_interval = 500
management.sample_retention_policies.global.minute = 1
management.sample_retention_policies.global.hour = 60
management.sample_retention_policies.basic.minute = 1
management.sample_retention_policies.basic.hour = 60
management.sample_retention_policies.detailed.10 = 1
`, n.amqpPort, n.mgmtPort, l.rmqUser, l.rmqPass)
	files := map[string]string{
		"advanced.config":   quorumTickConfig,
		"enabled_plugins":   "[rabbitmq_management].\n",
		"rabbitmq-env.conf": "# empty: keeps /etc/rabbitmq/rabbitmq-env.conf out\n",
	}
	erlArgs := "-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}"
	if cluster {
		conf += clusterConfig(l.nodes[0].name, n.i)
		// Erlang reads the cookie from $HOME/.erlang.cookie, which only
		// its owner may read; every node has the run's.
		files[".erlang.cookie"] = l.cookie
		// A node that has not been heard from for net_ticktime (±25%) is
		// down to the others: a node frozen for longer counts as cut off.
		// rabbitmq.conf has no key for it in 3.10, and the VM reads it at
		// boot, so it goes on the command line.
		erlArgs += " -kernel net_ticktime " + strconv.Itoa(netTicktime)
	}
	files["rabbitmq.conf"] = conf
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(rmq, name), []byte(content), 0o600); err != nil {
			return fmt.Errorf("rabbitmq: %w", err)
		}
	}
	n.argv = []string{rabbitServer}
	n.env = []string{
		"PATH=" + pathEnv(),
		"HOME=" + rmq,
		"LANG=C.UTF-8",
		"RABBITMQ_NODENAME=" + n.name,
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(rmq, "rabbitmq-env.conf"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(rmq, "rabbitmq"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(rmq, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(rmq, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(rmq, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(rmq, "log"),
		"RABBITMQ_LOGS=-",
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(n.distPort),
		"ERL_EPMD_PORT=" + strconv.Itoa(n.epmdPort),
		// Exec erl directly instead of forking it behind a signal-handling shell.
		"RUNNING_UNDER_SYSTEMD=true",
		// Never start an `epmd -daemon` (it would outlive us): ours runs
		// already. Keep Erlang distribution on loopback.
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=" + erlArgs,
	}
	return nil
}

// startRabbit starts the broker: epmd and the node, or a cluster (see
// startCluster).
func (l *Local) startRabbit(ctx context.Context) error {
	if len(l.nodes) > 1 {
		if err := l.startCluster(ctx); err != nil {
			return fmt.Errorf("rabbitmq cluster: %w", err)
		}
		return nil
	}
	n := l.nodes[0]
	if err := l.startEpmd(ctx, n); err != nil {
		return fmt.Errorf("rabbitmq: %w", err)
	}
	// Not locked: l is not shared yet, and the PostgreSQL start-up running
	// alongside must not wait for the lock.
	if err := l.bootNode(ctx, n); err != nil {
		return fmt.Errorf("rabbitmq: %w", err)
	}
	return nil
}

// bootNode starts node n for the first time. A first boot that did not
// answer within its bound, or stopped, is tried once more from an empty
// database, with a bound of its own: what the first boot wrote is only
// its own start-up (RabbitMQ 3.10 can stall for good while it enables its
// feature flags at a first boot, the node alive but never listening).
func (l *Local) bootNode(ctx context.Context, n *rabbitNode) error {
	err := l.startNode(ctx, n)
	if err == nil || ctx.Err() != nil {
		return err
	}
	l.logf("local infra: node %s did not start (%s)", n.name, firstLine(err.Error()))
	if again := l.restartEmpty(ctx, n); again != nil {
		return errors.Join(err, fmt.Errorf("started again: %w", again))
	}
	return nil
}

// startEpmd starts node n's epmd and waits until it answers.
func (l *Local) startEpmd(ctx context.Context, n *rabbitNode) error {
	epmdPath, err := findEpmd()
	if err != nil {
		return err
	}
	epmd, err := spawn(l.dir, n.childName("epmd"), []string{
		epmdPath, "-port", strconv.Itoa(n.epmdPort), "-address", "127.0.0.1",
	}, []string{"PATH=" + pathEnv(), "HOME=" + l.dir}, l.cred)
	if err != nil {
		return err
	}
	l.mu.Lock()
	n.epmd = epmd
	l.mu.Unlock()
	return waitReady(ctx, epmd, "epmd", func(ctx context.Context) error {
		return dialOK(ctx, n.epmdPort)
	})
}

// findEpmd finds the epmd binary of the installed Erlang.
func findEpmd() (string, error) {
	if m, _ := filepath.Glob("/usr/lib/erlang/erts-*/bin/epmd"); len(m) > 0 {
		return m[len(m)-1], nil
	}
	p, err := exec.LookPath("epmd")
	if err != nil {
		return "", fmt.Errorf("find epmd: %w", err)
	}
	return p, nil
}

// startNode spawns node n's broker and waits until its AMQP and
// management API answer. n.ops is held, or l is not shared yet.
func (l *Local) startNode(ctx context.Context, n *rabbitNode) error {
	l.mu.Lock()
	switch {
	case l.stopped:
		l.mu.Unlock()
		return errors.New("start broker: infrastructure is stopped")
	case n.rabbit != nil && !n.rabbit.exited():
		l.mu.Unlock()
		return errors.New("start broker: already running")
	case n.epmd == nil || n.epmd.exited():
		l.mu.Unlock()
		return errors.New("start broker: epmd is not running")
	}
	// Spawned under the lock, so that Stop either comes first (and the
	// node is not started) or finds the child and kills it.
	c, err := spawn(l.dir, n.childName("rabbitmq"), n.argv, n.env, l.cred)
	if err == nil {
		n.rabbit, n.paused = c, false
	}
	l.mu.Unlock()
	if err != nil {
		return err
	}
	api := l.nodeAPI(n)
	err = waitReady(ctx, c, n.childName("rabbitmq"), func(ctx context.Context) error {
		if err := l.amqpOK(ctx, n); err != nil {
			return err
		}
		_, err := api.do(ctx, http.MethodGet, "/api/overview", nil, nil, http.StatusOK)
		return err
	})
	if err != nil {
		c.kill(syscall.SIGKILL)
		kctx, cancel := context.WithTimeout(context.Background(), killWait)
		defer cancel()
		return errors.Join(err, c.wait(kctx))
	}
	return nil
}

func (l *Local) amqpOK(ctx context.Context, n *rabbitNode) error {
	deadline, ok := ctx.Deadline()
	timeout := probeTimeout
	if ok {
		timeout = time.Until(deadline)
	}
	conn, err := amqp.DialConfig(l.amqpURL(n, "/"), amqp.Config{Dial: amqp.DefaultDial(timeout)})
	if err != nil {
		return err
	}
	return conn.Close()
}

func dialOK(ctx context.Context, port int) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return c.Close()
}

// StopBroker implements Infra: it SIGKILLs every node's process group (a
// crash, not a clean stop) and waits until the nodes are gone and their
// AMQP ports are closed. The epmds keep running. See Infra.StopBroker for
// quorum queues declared just before the crash.
func (l *Local) StopBroker(ctx context.Context) error {
	if l.isStopped() {
		return errors.New("local infra: stop broker: infrastructure is stopped")
	}
	err := l.eachNode(func(n *rabbitNode) error { return l.killNode(ctx, n) })
	if err != nil {
		return fmt.Errorf("local infra: stop broker: %w", err)
	}
	return nil
}

// QueueServersSaved implements QueueRegistry: the queues from the
// management API, each node's registry from its folder.
func (l *Local) QueueServersSaved(ctx context.Context) (RegistryCheck, error) {
	c, err := queueServersSaved(ctx, l.onNode, func(_ context.Context, node string) ([]byte, error) {
		for _, n := range l.nodes {
			if n.name == node {
				b, err := os.ReadFile(filepath.Join(n.dir, "mnesia", n.name, "quorum", n.name, "names.dets"))
				if errors.Is(err, fs.ErrNotExist) {
					return nil, nil
				}
				return b, err
			}
		}
		return nil, fmt.Errorf("no node of this broker is named %s", node)
	})
	if err != nil {
		return RegistryCheck{}, fmt.Errorf("local infra: %w", err)
	}
	return c, nil
}

func (l *Local) isStopped() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopped
}

// eachNode runs fn on every node side by side, each under its node's
// ops lock.
func (l *Local) eachNode(fn func(n *rabbitNode) error) error {
	errs := make([]error, len(l.nodes))
	var wg sync.WaitGroup
	for i, n := range l.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.ops.Lock()
			defer n.ops.Unlock()
			errs[i] = safe.Do("node "+n.name, func() error { return fn(n) })
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// killNode SIGKILLs node n's broker and waits until it is gone and its
// AMQP port closed. n.ops is held.
func (l *Local) killNode(ctx context.Context, n *rabbitNode) error {
	l.mu.Lock()
	c := n.rabbit
	n.paused = false
	l.mu.Unlock()
	if c == nil {
		return nil
	}
	c.kill(syscall.SIGKILL)
	if err := c.wait(ctx); err != nil {
		return err
	}
	// erl_child_setup and port programs share the group; they die with the
	// VM, but wait for it so the next start finds a clean slate. Only the
	// group: PostgreSQL and epmd work in the same folder.
	if left := killStrays("", map[int]bool{c.pid: true}, killWait); len(left) > 0 {
		return fmt.Errorf("processes %v of the broker survive SIGKILL", left)
	}
	for {
		err := dialOK(ctx, n.amqpPort)
		if err != nil && ctx.Err() == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for AMQP port %d to close: %w", n.amqpPort, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// StartBroker implements Infra: every node starts again on its data, side
// by side (a cluster's nodes wait for each other's tables at boot, so none
// can come up alone), and for a cluster it waits until they see each
// other. A node that stopped or did not answer within its bound starts
// once more on the same data.
func (l *Local) StartBroker(ctx context.Context) error {
	t := time.Now()
	err := l.eachNode(func(n *rabbitNode) error {
		err := l.startNode(ctx, n)
		if err != nil && ctx.Err() == nil {
			// Nodes of a cluster that start side by side sync their
			// feature flags with each other; on 3.10 one of them may stop
			// doing so (incompatible_feature_flags, a badrpc from a peer
			// still booting), and a boot can stall for good. Its data is
			// the broker's, kept: it starts again on it.
			l.logf("local infra: node %s did not start again (%v); starting it once more", n.name, firstLine(err.Error()))
			err = l.startNode(ctx, n)
		}
		return err
	})
	if err == nil && len(l.nodes) > 1 {
		err = l.WaitHealthy(ctx)
	}
	if err != nil {
		return fmt.Errorf("local infra: start broker: %w", err)
	}
	l.logf("local infra: broker started in %s", time.Since(t).Round(100*time.Millisecond))
	return nil
}

// RestartBroker implements Infra.
func (l *Local) RestartBroker(ctx context.Context) error {
	if err := l.StopBroker(ctx); err != nil {
		return err
	}
	return l.StartBroker(ctx)
}

// AMQPAddr implements Infra: the first node's, or on a cluster the first
// node that runs (neither killed nor paused).
func (l *Local) AMQPAddr() string {
	return l.firstRunning().amqpAddr()
}

// firstRunning is the first node that runs, or the first node.
func (l *Local) firstRunning() *rabbitNode {
	if c := l.candidates(); len(c) > 0 {
		return c[0]
	}
	return l.nodes[0]
}

// candidates are the nodes to ask, in order: those running (neither
// killed nor paused).
func (l *Local) candidates() []*rabbitNode {
	if len(l.nodes) == 1 {
		return l.nodes
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*rabbitNode
	for _, n := range l.nodes {
		if n.running() {
			out = append(out, n)
		}
	}
	return out
}

// AMQPURL implements Infra: the run's user and password, on AMQPAddr.
func (l *Local) AMQPURL(vhost string) string {
	return l.amqpURL(l.firstRunning(), vhost)
}

func (l *Local) amqpURL(n *rabbitNode, vhost string) string {
	u := url.URL{Scheme: "amqp", User: url.UserPassword(l.rmqUser, l.rmqPass), Host: n.amqpAddr(),
		Path: "/" + vhost, RawPath: "/" + url.PathEscape(vhost)}
	return u.String()
}

// ManagementURL is the base URL of the management HTTP API (of the first
// running node of a cluster), without credentials: the API wants the
// run's user and password (AMQPURL's) as basic authentication.
func (l *Local) ManagementURL() string {
	return l.managementURL(l.firstRunning())
}

func (l *Local) managementURL(n *rabbitNode) string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(n.mgmtPort))
}

// nodeAPI is the management API client of node n, as the run's user.
func (l *Local) nodeAPI(n *rabbitNode) mgmtAPI {
	return mgmtAPI{base: l.managementURL(n), user: l.rmqUser, pass: l.rmqPass, http: l.http}
}

// clusterCallTimeout bounds one management call to one node of a cluster
// before the next node is asked: a paused node's API accepts and never
// answers, and a node cut off from the others can hang on what it would
// ask them.
const clusterCallTimeout = 5 * time.Second

// clusterFailover bounds how long onNode goes round a cluster's running
// nodes when none answers: a frozen node that the others do not yet count
// as down (up to net_ticktime, 12.5 s) holds up what needs every node,
// such as creating a vhost, on all of them.
const clusterFailover = 4 * netTicktime * time.Second

// onNode calls call with the management API of the first running node.
// On a cluster, a node that gives no answer passes the call to the next
// running node (see mgmtCluster.onNode).
func (l *Local) onNode(ctx context.Context, call func(ctx context.Context, api mgmtAPI) error) error {
	if len(l.nodes) == 1 {
		return call(ctx, l.nodeAPI(l.nodes[0]))
	}
	return l.brokers().onNode(ctx, call)
}

// brokers is l's broker nodes as mgmtCluster sees them.
func (l *Local) brokers() mgmtCluster {
	return mgmtCluster{nodes: l.mgmtNodes(l.nodes), running: func() []mgmtNode { return l.mgmtNodes(l.candidates()) }}
}

func (l *Local) mgmtNodes(nodes []*rabbitNode) []mgmtNode {
	out := make([]mgmtNode, len(nodes))
	for k, n := range nodes {
		out[k] = mgmtNode{name: n.name, api: func() mgmtAPI { return l.nodeAPI(n) }}
	}
	return out
}

// answered says whether err is the broker's answer (a status below 500,
// a missing queue or vhost), which another node would give too.
func answered(err error) bool {
	var status *statusError
	if errors.As(err, &status) {
		return status.Code < 500
	}
	return errors.Is(err, ErrNotFound) || errors.Is(err, errVHostExists)
}

// CreateVHost implements Infra; the run's user gets all permissions. It
// returns once the vhost runs (on a cluster, on every running node: see
// mgmtCluster.createVHost and vhostRunning).
func (l *Local) CreateVHost(ctx context.Context, name string) error {
	if len(l.nodes) == 1 {
		api := l.nodeAPI(l.nodes[0])
		if err := api.createVHost(ctx, name, l.rmqUser); err != nil {
			return err
		}
		return api.vhostRunning(ctx, name)
	}
	if err := l.brokers().createVHost(ctx, name, l.rmqUser); err != nil {
		return err
	}
	return l.vhostRunning(ctx, name)
}

// vhostRunning waits until vhost name runs on every running node of a
// cluster (see mgmtCluster.vhostRunning).
func (l *Local) vhostRunning(ctx context.Context, name string) error {
	if err := l.brokers().vhostRunning(ctx, name); err != nil {
		return fmt.Errorf("local infra: create vhost %q: %w", name, err)
	}
	return nil
}

// vhostStartTimeout bounds the wait for a new vhost to run on every node.
const vhostStartTimeout = time.Minute

// DeleteVHost implements Infra.
func (l *Local) DeleteVHost(ctx context.Context, name string) error {
	return l.onNode(ctx, func(ctx context.Context, api mgmtAPI) error { return api.deleteVHost(ctx, name) })
}

// TraceVHost implements Infra.
func (l *Local) TraceVHost(ctx context.Context, name string, on bool) error {
	if len(l.nodes) == 1 {
		return l.nodeAPI(l.nodes[0]).traceVHost(ctx, name, "", on)
	}
	return l.brokers().traceVHost(ctx, name, "", on)
}

// Queue implements Infra. The counters are eventually consistent: the
// broker emits them every 500 ms (collect_statistics_interval), so a just
// published message shows up within about a second.
func (l *Local) Queue(ctx context.Context, vhost, queue string) (history.QueueInfo, error) {
	var q history.QueueInfo
	err := l.onNode(ctx, func(ctx context.Context, api mgmtAPI) (err error) {
		q, err = api.queue(ctx, vhost, queue)
		return err
	})
	return q, err
}

// VHost implements Infra.
func (l *Local) VHost(ctx context.Context, vhost string) (VHostInfo, error) {
	var v VHostInfo
	err := l.onNode(ctx, func(ctx context.Context, api mgmtAPI) (err error) {
		v, err = api.vhost(ctx, vhost)
		return err
	})
	return v, err
}

// ClientConnections implements Infra: the list comes from any running
// node, which reports every running node's connections.
func (l *Local) ClientConnections(ctx context.Context, vhost string) (int, error) {
	var n int
	err := l.onNode(ctx, func(ctx context.Context, api mgmtAPI) (err error) {
		n, err = api.clientConnections(ctx, vhost)
		return err
	})
	return n, err
}

// mgmt calls the management API of the first running node as the run's
// user (see mgmtAPI.do).
func (l *Local) mgmt(ctx context.Context, method, path string, in, out any, want ...int) (int, error) {
	return l.nodeAPI(l.firstRunning()).do(ctx, method, path, in, out, want...)
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
