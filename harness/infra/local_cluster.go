package infra

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/faultline-dev/faultline/harness/safe"
	"github.com/faultline-dev/faultline/proxies"
)

// A local cluster (LocalOptions.BrokerNodes > 1) is N RabbitMQ nodes on
// loopback, each with its own epmd, ports and folder (<dir>/rmq-<i+1>),
// named fl<suffix>-<i+1>@localhost. Their distribution traffic goes
// through Toxiproxy links, so a partition is a real network cut: in node
// A's epmd faultline registers every other node B under B's name with the
// port of the link "A->B", whose upstream is B's real distribution port. A
// asks its own epmd where B listens and so reaches B only through that
// link; B reaches A only through "B->A". Partition(i) takes down every
// link into and out of node i.

// netTicktime is the cluster's net_ticktime in seconds: a node that has
// not been heard from for 7.5 to 12.5 s is down to the others, so a node
// frozen (PauseNode) for 15 s counts as cut off. RabbitMQ's default is 60.
const netTicktime = 10

// clusterConfig is what a cluster node's rabbitmq.conf adds. The first
// node starts alone; the others join it on their first boot (classic peer
// discovery; a node with data rejoins from it and ignores this). They
// start once the first answers and retry until its database answers, for
// up to discoveryRetries seconds: a node that finds none boots alone,
// which WaitHealthy then reports.
//
// pause_minority is what production runs: a node that finds itself in a
// minority of the cluster (cut off from the others) stops its broker and
// starts it again when it sees a majority, instead of going on alone and
// diverging.
func clusterConfig(first string, i int) string {
	conf := "cluster_partition_handling = pause_minority\n"
	if i > 0 {
		conf += "cluster_formation.peer_discovery_backend = classic_config\n" +
			"cluster_formation.classic_config.nodes.1 = " + first + "\n" +
			"cluster_formation.discovery_retry_limit = " + strconv.Itoa(discoveryRetries) + "\n" +
			"cluster_formation.discovery_retry_interval = 1000\n"
	}
	return conf
}

// discoveryRetries bounds, in seconds, how long a joining node waits for
// the first node; startTimeout bounds the start-up as a whole.
const discoveryRetries = int(startTimeout / time.Second)

// erlangCookie makes a cluster's random Erlang cookie: whoever has it may
// run code on the nodes, so it is as secret as a password.
func erlangCookie() (string, error) {
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random erlang cookie: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// startCluster creates the inter-node links, starts the epmds and
// registers the other nodes in each, starts the first node, then the
// others side by side (they join it, see clusterConfig), and waits until every node
// sees every other. StartTimes then has "rabbitmq-first", until the first
// node answered, and "rabbitmq-join", from then until all see each other.
func (l *Local) startCluster(ctx context.Context) error {
	// The links and epmds, the first node (two boots at most), the joins:
	// each step bounded by startTimeout.
	ctx, cancel := context.WithTimeout(ctx, 4*startTimeout)
	defer cancel()
	begin := time.Now()
	setupCtx, setupCancel := context.WithTimeout(ctx, startTimeout)
	defer setupCancel()
	if err := l.addLinks(setupCtx); err != nil {
		return err
	}
	if err := l.eachNode(func(n *rabbitNode) error { return l.startEpmd(setupCtx, n) }); err != nil {
		return err
	}
	for _, a := range l.nodes {
		for _, b := range l.nodes {
			if a == b {
				continue
			}
			_, port, err := net.SplitHostPort(l.links[a.i][b.i].Addr())
			if err != nil {
				return fmt.Errorf("link %s: %w", l.links[a.i][b.i].Name(), err)
			}
			p, err := strconv.Atoi(port)
			if err != nil {
				return fmt.Errorf("link %s: port %q: %w", l.links[a.i][b.i].Name(), port, err)
			}
			c, err := registerEpmd(setupCtx, a.epmdPort, b.alive(), p)
			if err != nil {
				return fmt.Errorf("register %s in the epmd of %s: %w", b.name, a.name, err)
			}
			l.mu.Lock()
			l.regs = append(l.regs, c)
			l.mu.Unlock()
		}
	}
	// The first node starts alone; the others start once it answers, side
	// by side, and join it. A node that joins while the first is still
	// migrating its schema (enabling feature flags) stops with
	// schema_integrity_check_failed, after waiting for its tables as long
	// as the migration takes, and its start from an empty database must
	// not inherit what that wait left of a shared bound: each step has a
	// bound of its own.
	err := safe.Do("start "+l.nodes[0].name, func() error { return l.bootNode(ctx, l.nodes[0]) }) // bounded by waitReady
	if err != nil {
		return fmt.Errorf("node %s: %w", l.nodes[0].name, err)
	}
	firstTook := time.Since(begin)
	joinBegin := time.Now()
	joinCtx, joinCancel := context.WithTimeout(ctx, startTimeout)
	defer joinCancel()
	errs := make([]error, len(l.nodes))
	var wg sync.WaitGroup
	for _, n := range l.nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A node that stopped joining (a schema or feature flag
			// exchange cut short) joins again from an empty database.
			errs[n.i] = safe.Do("start "+n.name, func() error { return l.bootNode(joinCtx, n) })
			if errs[n.i] != nil {
				errs[n.i] = fmt.Errorf("node %s: %w", n.name, errs[n.i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := l.WaitHealthy(joinCtx); err != nil {
		return err
	}
	if err := l.brokers().enableFeatureFlags(joinCtx); err != nil {
		return err
	}
	l.rabbitParts = map[string]time.Duration{"rabbitmq-first": firstTook, "rabbitmq-join": time.Since(joinBegin)}
	return nil
}

// restartEmpty starts a node that failed its first start again, its
// database emptied first (what it had written was the failed start's).
func (l *Local) restartEmpty(ctx context.Context, n *rabbitNode) error {
	db := filepath.Join(n.dir, "mnesia")
	entries, err := os.ReadDir(db)
	if err != nil {
		return fmt.Errorf("empty its database: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(db, e.Name())); err != nil {
			return fmt.Errorf("empty its database: %w", err)
		}
	}
	l.logf("local infra: node %s starts again from an empty database", n.name)
	return l.startNode(ctx, n)
}

// addLinks creates the link a->b for every two nodes, forwarding to b's
// distribution port.
func (l *Local) addLinks(ctx context.Context) error {
	l.links = make([][]*proxies.Link, len(l.nodes))
	for _, a := range l.nodes {
		l.links[a.i] = make([]*proxies.Link, len(l.nodes))
		for _, b := range l.nodes {
			if a == b {
				continue
			}
			link, err := l.proxies.AddLink(ctx, a.alive()+".to."+b.alive(), net.JoinHostPort("127.0.0.1", strconv.Itoa(b.distPort)))
			if err != nil {
				return err
			}
			l.links[a.i][b.i] = link
		}
	}
	return nil
}

// removeLinks removes the inter-node links; l.mu is held by Stop. l.links
// stays as it is (it is read without the lock): a Partition after Stop
// fails on the removed links.
func (l *Local) removeLinks(ctx context.Context) error {
	var errs []error
	for _, row := range l.links {
		for _, link := range row {
			if link != nil {
				errs = append(errs, l.proxies.RemoveLink(ctx, link.Name()))
			}
		}
	}
	return errors.Join(errs...)
}

// epmd's protocol (erts' erl_dist_protocol): requests and answers.
const (
	epmdAlive2Req   = 120
	epmdAlive2XResp = 118
	epmdAlive2Resp  = 121
	epmdPortPlease2 = 122
	epmdPort2Resp   = 119
)

// registerEpmd registers node alive (a node name's part before '@') as
// listening on port in the epmd at 127.0.0.1:epmdPort, as a normal Erlang
// node (type 77) of distribution versions 5 to 6. The registration holds
// while the returned connection is open: epmd drops it when it closes.
func registerEpmd(ctx context.Context, epmdPort int, alive string, port int) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(epmdPort)))
	if err != nil {
		return nil, fmt.Errorf("epmd: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	req := []byte{epmdAlive2Req}
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	req = append(req, 77, 0)                    // NodeType: normal node; Protocol: tcp/ip-v4
	req = binary.BigEndian.AppendUint16(req, 6) // HighestVersion
	req = binary.BigEndian.AppendUint16(req, 5) // LowestVersion
	req = binary.BigEndian.AppendUint16(req, uint16(len(alive)))
	req = append(req, alive...)
	req = binary.BigEndian.AppendUint16(req, 0) // no Extra
	msg := binary.BigEndian.AppendUint16(nil, uint16(len(req)))
	if _, err := c.Write(append(msg, req...)); err != nil {
		c.Close()
		return nil, fmt.Errorf("epmd: send ALIVE2_REQ: %w", err)
	}
	var head [2]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		c.Close()
		return nil, fmt.Errorf("epmd: read ALIVE2 answer: %w", err)
	}
	creation := 0
	switch head[0] {
	case epmdAlive2XResp:
		creation = 4
	case epmdAlive2Resp:
		creation = 2
	default:
		c.Close()
		return nil, fmt.Errorf("epmd: answer %d to ALIVE2_REQ, want %d or %d", head[0], epmdAlive2XResp, epmdAlive2Resp)
	}
	if head[1] != 0 {
		c.Close()
		return nil, fmt.Errorf("epmd: ALIVE2_REQ for %s refused (result %d): the name is taken", alive, head[1])
	}
	if _, err := io.ReadFull(c, make([]byte, creation)); err != nil {
		c.Close()
		return nil, fmt.Errorf("epmd: read ALIVE2 creation: %w", err)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// epmdPortOf asks the epmd at 127.0.0.1:epmdPort where node alive listens
// (PORT_PLEASE2_REQ), as a node about to connect does; ok is false when it
// is not registered.
func epmdPortOf(ctx context.Context, epmdPort int, alive string) (port int, ok bool, err error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(epmdPort)))
	if err != nil {
		return 0, false, fmt.Errorf("epmd: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	msg := binary.BigEndian.AppendUint16(nil, uint16(1+len(alive)))
	msg = append(append(msg, epmdPortPlease2), alive...)
	if _, err := c.Write(msg); err != nil {
		return 0, false, fmt.Errorf("epmd: send PORT_PLEASE2_REQ: %w", err)
	}
	var head [2]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return 0, false, fmt.Errorf("epmd: read PORT2_RESP: %w", err)
	}
	if head[0] != epmdPort2Resp {
		return 0, false, fmt.Errorf("epmd: answer %d to PORT_PLEASE2_REQ, want %d", head[0], epmdPort2Resp)
	}
	if head[1] != 0 {
		return 0, false, nil
	}
	var p [2]byte
	if _, err := io.ReadFull(c, p[:]); err != nil {
		return 0, false, fmt.Errorf("epmd: read PORT2_RESP port: %w", err)
	}
	return int(binary.BigEndian.Uint16(p[:])), true, nil
}

// Nodes implements Cluster.
func (l *Local) Nodes() []BrokerNode {
	out := make([]BrokerNode, len(l.nodes))
	for i, n := range l.nodes {
		out[i] = BrokerNode{Name: n.name, AMQPAddr: n.amqpAddr(), Upstream: n.amqpAddr()}
	}
	return out
}

// node returns node i, or an error naming the valid range.
func (l *Local) node(i int) (*rabbitNode, error) {
	if i < 0 || i >= len(l.nodes) {
		return nil, fmt.Errorf("node %d: the broker has nodes 0 to %d", i, len(l.nodes)-1)
	}
	return l.nodes[i], nil
}

// AMQPURLOf implements Cluster; an i out of range gives the first node's.
func (l *Local) AMQPURLOf(i int, vhost string) string {
	n, err := l.node(i)
	if err != nil {
		n = l.nodes[0]
	}
	return l.amqpURL(n, vhost)
}

// QueueLeader implements Cluster. A quorum queue between leaders (its
// leader just died) gives an error: poll.
func (l *Local) QueueLeader(ctx context.Context, vhost, queue string) (string, error) {
	return l.brokers().queueLeader(ctx, vhost, queue)
}

// QueueType implements Cluster.
func (l *Local) QueueType(ctx context.Context, vhost, queue string) (string, error) {
	return l.brokers().queueType(ctx, vhost, queue)
}

// KillNode implements Cluster: SIGKILL to the node's process group; it
// returns once the node is gone and its AMQP port closed. Its epmd, and
// the registrations in it, stay.
func (l *Local) KillNode(ctx context.Context, i int) error {
	n, err := l.node(i)
	if err != nil {
		return fmt.Errorf("local infra: kill node: %w", err)
	}
	n.ops.Lock()
	defer n.ops.Unlock()
	if err := l.killNode(ctx, n); err != nil {
		return fmt.Errorf("local infra: kill node %s: %w", n.name, err)
	}
	return nil
}

// StartNode implements Cluster: the node starts on its data and ports, and
// StartNode returns once it answers and every other running node sees it
// running.
func (l *Local) StartNode(ctx context.Context, i int) error {
	n, err := l.node(i)
	if err != nil {
		return fmt.Errorf("local infra: start node: %w", err)
	}
	n.ops.Lock()
	defer n.ops.Unlock()
	if err := l.startNode(ctx, n); err != nil {
		return fmt.Errorf("local infra: start node %s: %w", n.name, err)
	}
	if err := l.brokers().seenRunning(ctx, n.name); err != nil {
		return fmt.Errorf("local infra: start node %s: wait until the others see it: %w", n.name, err)
	}
	return nil
}

// PauseNode implements Cluster: SIGSTOP to the node's process group. Its
// peers see it go after net_ticktime (7.5 to 12.5 s).
func (l *Local) PauseNode(i int) error {
	return l.signalNode(i, syscall.SIGSTOP, true)
}

// ResumeNode implements Cluster: SIGCONT to the node's process group.
func (l *Local) ResumeNode(i int) error {
	return l.signalNode(i, syscall.SIGCONT, false)
}

func (l *Local) signalNode(i int, sig syscall.Signal, paused bool) error {
	n, err := l.node(i)
	if err != nil {
		return fmt.Errorf("local infra: %s: %w", sig, err)
	}
	n.ops.Lock()
	defer n.ops.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if n.rabbit == nil || n.rabbit.exited() {
		return fmt.Errorf("local infra: %s node %s: it is not running", sig, n.name)
	}
	if err := syscall.Kill(-n.rabbit.pid, sig); err != nil {
		return fmt.Errorf("local infra: %s node %s: %w", sig, n.name, err)
	}
	n.paused = paused
	return nil
}

// Partition implements Cluster: every link into and out of node i goes
// down, which closes the nodes' connections through them and refuses new
// ones. The node's clients (AMQP, management) are not touched.
func (l *Local) Partition(ctx context.Context, i int) error {
	if err := l.setLinks(ctx, i, false); err != nil {
		return fmt.Errorf("local infra: partition: %w", err)
	}
	return nil
}

// Heal implements Cluster: node i's links come up again.
func (l *Local) Heal(ctx context.Context, i int) error {
	if err := l.setLinks(ctx, i, true); err != nil {
		return fmt.Errorf("local infra: heal: %w", err)
	}
	return nil
}

func (l *Local) setLinks(ctx context.Context, i int, up bool) error {
	if len(l.nodes) < 2 {
		return errors.New("the broker is one node")
	}
	n, err := l.node(i)
	if err != nil {
		return err
	}
	n.ops.Lock()
	defer n.ops.Unlock()
	var errs []error
	for j := range l.nodes {
		if j == i {
			continue
		}
		for _, link := range []*proxies.Link{l.links[i][j], l.links[j][i]} {
			if up {
				errs = append(errs, link.Up(ctx))
			} else {
				errs = append(errs, link.Down(ctx))
			}
		}
	}
	return errors.Join(errs...)
}

// Status implements Cluster: the union of what the running nodes that
// answer report. A node cut off from the majority stops its broker
// (pause_minority) and no longer answers, so it shows as down.
func (l *Local) Status(ctx context.Context) (ClusterStatus, error) {
	st, err := l.brokers().status(ctx)
	if err != nil {
		return ClusterStatus{}, fmt.Errorf("local infra: cluster status: %w", err)
	}
	return st, nil
}

// WaitHealthy implements Cluster: it polls until every node runs (neither
// killed nor paused) and each node's management API shows every node
// running and no partition.
func (l *Local) WaitHealthy(ctx context.Context) error {
	err := l.brokers().waitHealthy(ctx, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, n := range l.nodes {
			if !n.running() {
				return fmt.Errorf("node %s is killed or paused", n.name)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("local infra: wait for a healthy cluster: %w", err)
	}
	return nil
}

// clusterPoll is how often the cluster's state is read while waiting.
const clusterPoll = 250 * time.Millisecond

// poll calls check until it returns nil or ctx ends; the error then says
// what check last found.
func poll(ctx context.Context, check func(context.Context) error) error {
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(clusterPoll):
		}
	}
}

// Restore implements Cluster: every inter-node link up, every frozen node
// thawed, every killed node started; then, while some node still reports
// a partition (pause_minority never heals a node that was frozen past
// net_ticktime and thawed: it rejoins at once, never in a minority, and
// both sides keep the partition), the node that reports the most is
// killed and started again, one at a time; then WaitHealthy.
func (l *Local) Restore(ctx context.Context) ([]string, error) {
	if len(l.nodes) < 2 {
		return nil, nil
	}
	var did []string
	for i := range l.nodes {
		if err := l.setLinks(ctx, i, true); err != nil {
			return did, fmt.Errorf("local infra: restore: links of node %d: %w", i+1, err)
		}
	}
	for i, n := range l.nodes {
		l.mu.Lock()
		paused, gone := n.paused, n.rabbit == nil || n.rabbit.exited()
		l.mu.Unlock()
		switch {
		case paused:
			if err := l.ResumeNode(i); err != nil {
				return did, fmt.Errorf("local infra: restore: %w", err)
			}
			did = append(did, n.name+" thawed")
		case gone:
			if err := l.StartNode(ctx, i); err != nil {
				return did, fmt.Errorf("local infra: restore: %w", err)
			}
			did = append(did, n.name+" started")
		}
	}
	for range l.nodes {
		// A partition shows a moment after the links come back: look for
		// one for a few seconds before taking the cluster for whole.
		sctx, cancel := context.WithTimeout(ctx, restoreSettle)
		err := l.WaitHealthy(sctx)
		cancel()
		if err == nil {
			return did, nil
		}
		st, serr := l.Status(ctx)
		if serr != nil || len(st.Partitions) == 0 {
			continue
		}
		worst, most := -1, 0
		for i, n := range l.nodes {
			if k := len(st.Partitions[n.name]); k > most {
				worst, most = i, k
			}
		}
		if worst < 0 {
			continue
		}
		name := l.nodes[worst].name
		if err := l.KillNode(ctx, worst); err != nil {
			return did, fmt.Errorf("local infra: restore: %w", err)
		}
		if err := l.StartNode(ctx, worst); err != nil {
			return did, fmt.Errorf("local infra: restore: %w", err)
		}
		did = append(did, fmt.Sprintf("%s restarted (it reported a partition from %v)", name, st.Partitions[name]))
	}
	if err := l.WaitHealthy(ctx); err != nil {
		return did, fmt.Errorf("local infra: restore: %w", err)
	}
	return did, l.vhostsRunning(ctx)
}

// vhostsRunning makes every vhost run on every node again (a node that
// came back may have failed to start one).
func (l *Local) vhostsRunning(ctx context.Context) error {
	if err := l.brokers().vhostsRunning(ctx, l.vhostRunning); err != nil {
		return fmt.Errorf("local infra: restore: %w", err)
	}
	return nil
}

// restoreSettle is how long Restore waits for the cluster to be whole
// before it looks for a partition to repair.
const restoreSettle = 15 * time.Second

var _ ClusterStarter = (*Local)(nil)

// StartCluster implements ClusterStarter: another Local, on l's port
// allocator, with a three-node broker whose inter-node links are on links,
// which must be a Toxiproxy server on this host (*proxies.Server).
func (l *Local) StartCluster(ctx context.Context, links proxies.Links) (Cluster, error) {
	srv, ok := links.(*proxies.Server)
	if !ok || srv == nil {
		return nil, fmt.Errorf("local infra: a cluster's inter-node links need a Toxiproxy server on this host, not %T", links)
	}
	c, err := StartLocal(ctx, LocalOptions{Log: l.logw, KeepDir: l.keepDir, Ports: l.alloc, BrokerNodes: 3, Proxies: srv})
	if err != nil {
		return nil, err // not a nil *Local in a non-nil Cluster
	}
	return c, nil
}
