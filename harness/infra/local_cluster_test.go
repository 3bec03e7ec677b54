package infra

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/ports"
	"github.com/faultline-dev/faultline/proxies"
)

// TestEpmdRegistration registers names in a real epmd as the cluster does
// and reads them back as a connecting node would.
func TestEpmdRegistration(t *testing.T) {
	if testing.Short() {
		t.Skip("needs epmd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	epmdPath, err := findEpmd()
	require.NoError(t, err)
	alloc := ports.New()
	defer alloc.Close()
	port, err := alloc.Port()
	require.NoError(t, err)
	dir := t.TempDir()
	c, err := spawn(dir, "epmd", []string{epmdPath, "-port", strconv.Itoa(port), "-address", "127.0.0.1"}, []string{"PATH=" + pathEnv()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		c.kill(syscall.SIGKILL)
		_ = c.wait(context.Background())
	})
	require.NoError(t, waitReady(ctx, c, "epmd", func(ctx context.Context) error { return dialOK(ctx, port) }))

	tests := []struct {
		alive string
		port  int
	}{
		{"fl0123abcd-1", 20001},
		{"fl0123abcd-2", 20002},
		{"x", 65535},
	}
	var regs []net.Conn
	for _, tt := range tests {
		reg, err := registerEpmd(ctx, port, tt.alive, tt.port)
		require.NoError(t, err, tt.alive)
		regs = append(regs, reg)
		got, ok, err := epmdPortOf(ctx, port, tt.alive)
		require.NoError(t, err)
		assert.True(t, ok, tt.alive)
		assert.Equal(t, tt.port, got, tt.alive)
	}
	_, err = registerEpmd(ctx, port, tests[0].alive, 1)
	assert.ErrorContains(t, err, "name is taken", "a registered name is refused")

	// A registration holds while its connection is open.
	require.NoError(t, regs[0].Close())
	require.Eventually(t, func() bool {
		_, ok, err := epmdPortOf(ctx, port, tests[0].alive)
		return err == nil && !ok
	}, 5*time.Second, 20*time.Millisecond, "closing the connection unregisters")
	for _, r := range regs[1:] {
		r.Close()
	}
}

// TestLocalCluster starts a three-node cluster whose inter-node links go
// through Toxiproxy, and kills, partitions and freezes its nodes in turn.
func TestLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, three RabbitMQ nodes and Toxiproxy")
	}
	ctx := startsCtx(t, 8) // postgres, three nodes, a killed leader's node, the three nodes' restart
	bin, err := proxies.SelfServer()
	require.NoError(t, err)
	srv, err := proxies.StartServer(ctx, bin, testLog{t})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })

	begin := time.Now()
	l, err := StartLocal(ctx, LocalOptions{Log: testLog{t}, BrokerNodes: 3, Proxies: srv, KeepDir: os.Getenv("FL_KEEP") != ""})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	times := l.StartTimes()
	t.Logf("FIGURE start: total %s, rabbitmq %s, first node %s, join of the others %s",
		time.Since(begin).Round(100*time.Millisecond), times["rabbitmq"].Round(100*time.Millisecond),
		times["rabbitmq-first"].Round(100*time.Millisecond), times["rabbitmq-join"].Round(100*time.Millisecond))
	t.Logf("FIGURE rss of the three beams: %d MiB", l.brokerRSS()>>20)

	nodes := l.Nodes()
	require.Len(t, nodes, 3)
	for i, n := range nodes {
		assert.True(t, strings.HasSuffix(n.Name, "-"+strconv.Itoa(i+1)+"@localhost"), n.Name)
		assert.Equal(t, n.AMQPAddr, n.Upstream)
	}
	assert.Contains(t, l.Secrets(), l.cookie)
	// Every node can declare a quorum queue: the cluster's stable feature
	// flags are on, however its nodes raced at boot.
	for _, n := range l.nodes {
		var flags []struct{ Name, State, Stability string }
		_, err := l.nodeAPI(n).do(ctx, http.MethodGet, "/api/feature-flags", nil, &flags, http.StatusOK)
		require.NoError(t, err)
		require.NotEmpty(t, flags)
		for _, f := range flags {
			if f.Stability == "stable" {
				assert.Equal(t, "enabled", f.State, "feature flag %s on %s", f.Name, n.name)
			}
		}
	}
	st, err := l.Status(ctx)
	require.NoError(t, err)
	assert.Len(t, st.Running, 3)
	assert.Empty(t, st.Down)
	_, amqpUp := l.LinkUpstreams()
	assert.Equal(t, nodes[0].AMQPAddr, amqpUp)
	// Node 0 reaches node 1 only through the link 0->1.
	got, ok, err := epmdPortOf(ctx, l.nodes[0].epmdPort, l.nodes[1].alive())
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, l.links[0][1].Addr(), net.JoinHostPort("127.0.0.1", strconv.Itoa(got)))

	const vhost = "cluster"
	require.NoError(t, l.CreateVHost(ctx, vhost))

	// Each case starts from a whole cluster, whatever the one before left
	// when it failed half-way.
	whole := func(t *testing.T) {
		t.Helper()
		did, err := l.Restore(ctx)
		require.NoError(t, err, "restore the cluster")
		if len(did) > 0 {
			t.Logf("restored: %v", did)
		}
	}
	t.Run("a killed leader is replaced", func(t *testing.T) { testKillLeader(ctx, t, l, vhost) })
	whole(t)
	t.Run("a partitioned node is seen down", func(t *testing.T) { testPartition(ctx, t, l, 2) })
	whole(t)
	t.Run("a node frozen past net_ticktime", func(t *testing.T) { testPause(ctx, t, l, 0) })
	whole(t)
	t.Run("the whole cluster restarts", func(t *testing.T) {
		require.True(t, l.CanRestartBroker())
		begin := time.Now()
		require.NoError(t, l.RestartBroker(ctx))
		t.Logf("FIGURE cluster restart: %s", time.Since(begin).Round(100*time.Millisecond))
		require.Eventually(t, func() bool {
			q, err := l.Queue(ctx, vhost, "qq")
			return err == nil && q.Messages == 2
		}, 30*time.Second, 200*time.Millisecond, "the quorum queue keeps its messages")
	})

	// Stop: every process gone, no port listening, no folder, no link.
	pids := l.pids()
	require.NotEmpty(t, pids)
	dir, bound := l.Dir(), l.ports()
	require.Len(t, bound, 1+3*4)
	var linkNames []string
	for _, row := range l.links {
		for _, link := range row {
			if link != nil {
				linkNames = append(linkNames, link.Name())
			}
		}
	}
	require.Len(t, linkNames, 6)
	begin = time.Now()
	require.NoError(t, l.Stop(ctx))
	t.Logf("FIGURE stop: %s", time.Since(begin).Round(10*time.Millisecond))
	for _, pid := range pids {
		assert.False(t, alive(pid, 0), "pid %d still alive after Stop", pid)
	}
	for _, p := range bound {
		c, err := net.DialTimeout("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), time.Second)
		if err == nil {
			c.Close()
		}
		assert.Error(t, err, "port %d still listens", p)
	}
	assert.NoDirExists(t, dir)
	left, err := srv.Client().Proxies()
	require.NoError(t, err)
	for _, name := range linkNames {
		assert.NotContains(t, left, name, "link removed")
	}
}

// testKillLeader kills a quorum queue's leader: another node takes over,
// and a publish through a surviving node is confirmed.
func testKillLeader(ctx context.Context, t *testing.T, l Cluster, vhost string) {
	conn, err := amqp.Dial(l.AMQPURLOf(0, vhost))
	require.NoError(t, err)
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	_, err = ch.QueueDeclare("qq", true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	require.NoError(t, err)
	publish(ctx, t, ch, "qq", "before")
	require.NoError(t, conn.Close())

	typ, err := l.QueueType(ctx, vhost, "qq")
	require.NoError(t, err)
	assert.Equal(t, "quorum", typ)
	var leader string
	require.Eventually(t, func() bool {
		leader, err = l.QueueLeader(ctx, vhost, "qq")
		return err == nil
	}, 10*time.Second, 100*time.Millisecond)
	idx := slices.IndexFunc(l.Nodes(), func(n BrokerNode) bool { return n.Name == leader })
	require.GreaterOrEqual(t, idx, 0, "leader %s is a node", leader)
	waitQueuesSaved(ctx, t, l)

	begin := time.Now()
	require.NoError(t, l.KillNode(ctx, idx))
	killed := time.Since(begin)
	var newLeader string
	require.Eventually(t, func() bool {
		newLeader, err = l.QueueLeader(ctx, vhost, "qq")
		return err == nil && newLeader != leader
	}, 60*time.Second, 100*time.Millisecond, "a new leader")
	t.Logf("FIGURE kill leader %s: killed in %s, new leader %s after %s", leader,
		killed.Round(10*time.Millisecond), newLeader, time.Since(begin).Round(10*time.Millisecond))

	// The Infra methods go to a running node.
	assert.NotEqual(t, l.Nodes()[idx].AMQPAddr, l.AMQPAddr())
	require.NoError(t, l.CreateVHost(ctx, "while-killed"))
	require.NoError(t, l.DeleteVHost(ctx, "while-killed"))

	other := (idx + 1) % 3
	conn, err = amqp.Dial(l.AMQPURLOf(other, vhost))
	require.NoError(t, err)
	defer conn.Close()
	ch, err = conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	publish(ctx, t, ch, "qq", "after")

	begin = time.Now()
	require.NoError(t, l.StartNode(ctx, idx))
	require.NoError(t, l.WaitHealthy(ctx))
	t.Logf("FIGURE restart of the killed node: %s", time.Since(begin).Round(100*time.Millisecond))
	require.Eventually(t, func() bool {
		q, err := l.Queue(ctx, vhost, "qq")
		return err == nil && q.Messages == 2
	}, 30*time.Second, 200*time.Millisecond, "both messages kept")
}

// testPartition cuts node i off: the others see it down, and it comes
// back once healed.
func testPartition(ctx context.Context, t *testing.T, l Cluster, i int) {
	name := l.Nodes()[i].Name
	begin := time.Now()
	require.NoError(t, l.Partition(ctx, i))
	require.Eventually(t, func() bool {
		st, err := l.Status(ctx)
		return err == nil && (slices.Contains(st.Down, name) || len(st.Partitions) > 0)
	}, 30*time.Second, 100*time.Millisecond, "node %s seen down or partitioned", name)
	t.Logf("FIGURE partition of %s seen after %s", name, time.Since(begin).Round(10*time.Millisecond))
	require.NoError(t, l.CreateVHost(ctx, "while-partitioned"))
	require.NoError(t, l.DeleteVHost(ctx, "while-partitioned"))

	begin = time.Now()
	require.NoError(t, l.Heal(ctx, i))
	hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	require.NoError(t, l.WaitHealthy(hctx))
	t.Logf("FIGURE healed partition: healthy after %s", time.Since(begin).Round(100*time.Millisecond))
}

// testPause freezes node i until the others count it down (net_ticktime),
// then thaws it: the cluster recovers.
func testPause(ctx context.Context, t *testing.T, l Cluster, i int) {
	name := l.Nodes()[i].Name
	begin := time.Now()
	require.NoError(t, l.PauseNode(i))
	resumed := false
	defer func() {
		if !resumed {
			_ = l.ResumeNode(i)
		}
	}()
	assert.NotEqual(t, l.Nodes()[i].AMQPAddr, l.AMQPAddr(), "a paused node is not handed out")
	// A vhost is started on every node: it waits until the others count
	// the frozen node down.
	require.NoError(t, l.CreateVHost(ctx, "while-paused"), "the management calls skip a paused node")
	t.Logf("FIGURE vhost created after %s while %s is paused", time.Since(begin).Round(100*time.Millisecond), name)
	_, err := l.VHost(ctx, "cluster")
	require.NoError(t, err, "counters while paused")
	require.Eventually(t, func() bool {
		st, err := l.Status(ctx)
		return err == nil && slices.Contains(st.Down, name)
	}, 30*time.Second, 200*time.Millisecond, "node %s seen down", name)
	t.Logf("FIGURE paused %s seen down after %s", name, time.Since(begin).Round(100*time.Millisecond))
	require.NoError(t, l.ResumeNode(i))
	resumed = true
	begin = time.Now()
	// The thawed node finds the others gone and back at once: it records a
	// partition but, seeing a majority, does not pause, and pause_minority
	// never heals a recorded partition (RabbitMQ's "partitions caused by
	// suspend and resume"). Or it finds itself alone first, pauses and
	// rejoins. The first needs what an operator does: restart the node.
	var st ClusterStatus
	require.Eventually(t, func() bool {
		var err error
		st, err = l.Status(ctx)
		if err != nil || len(st.Partitions) > 0 {
			return err == nil
		}
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return l.WaitHealthy(hctx) == nil
	}, 60*time.Second, 500*time.Millisecond, "healthy or partitioned after the thaw")
	t.Logf("FIGURE resumed %s: after %s, partitions %v", name, time.Since(begin).Round(100*time.Millisecond), st.Partitions)
	if len(st.Partitions) > 0 {
		require.NoError(t, l.KillNode(ctx, i))
		require.NoError(t, l.StartNode(ctx, i))
	}
	hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	require.NoError(t, l.WaitHealthy(hctx))
	t.Logf("FIGURE resumed %s: healthy after %s", name, time.Since(begin).Round(100*time.Millisecond))
	require.NoError(t, l.DeleteVHost(ctx, "while-paused"))
}

// brokerRSS sums VmRSS of the brokers' processes (the beams and their
// helpers).
func (l *Local) brokerRSS() int64 {
	groups := map[int]bool{}
	l.mu.Lock()
	for _, n := range l.nodes {
		if n.rabbit != nil {
			groups[n.rabbit.pid] = true
		}
	}
	l.mu.Unlock()
	var sum int64
	for _, p := range strays("", groups) {
		f, err := os.Open(filepath.Join("/proc", strconv.Itoa(p.pid), "status"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				sum += kb << 10
			}
		}
		f.Close()
	}
	return sum
}
