package infra

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDockerCluster starts the docker provider and a three-node cluster
// beside it, reaches a node through the provider's Toxiproxy by its
// alias, and kills, partitions and freezes its nodes in turn, as
// TestLocalCluster does; then restarts the whole broker and stops the
// cluster: its containers and network are gone, the provider's stay.
func TestDockerCluster(t *testing.T) {
	skipWithoutDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	opts, err := DockerOptionsFromEnv(nil)
	require.NoError(t, err)
	opts.Log = testLog{t}
	opts.ToxiproxyPorts = 2
	d, err := StartDocker(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Stop(context.Background()) })

	begin := time.Now()
	cl, err := d.StartCluster(ctx, d.Toxiproxy())
	require.NoError(t, err)
	c := cl.(*DockerCluster)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	t.Logf("FIGURE docker cluster start: %s", time.Since(begin).Round(100*time.Millisecond))

	nodes := c.Nodes()
	require.Len(t, nodes, 3)
	for i, n := range nodes {
		assert.True(t, strings.HasPrefix(n.Name, "rabbit@rmq"+c.id+"-"+strconv.Itoa(i+1)), n.Name)
		assert.Equal(t, "rabbitmq-"+c.id+"-"+strconv.Itoa(i+1)+":5672", n.Upstream)
		assert.NotEqual(t, n.AMQPAddr, n.Upstream)
	}
	assert.Contains(t, c.Secrets(), c.cookie)
	st, err := c.Status(ctx)
	require.NoError(t, err)
	assert.Len(t, st.Running, 3)
	assert.Empty(t, st.Down)
	pgUp, amqpUp := c.LinkUpstreams()
	assert.Equal(t, nodes[0].Upstream, amqpUp)
	assert.Equal(t, "postgres-"+c.id+":5432", pgUp)

	const vhost = "cluster"
	require.NoError(t, c.CreateVHost(ctx, vhost))
	require.NoError(t, c.CreateDatabase(ctx, "cluster_db"))

	t.Run("a node is reached through the provider's Toxiproxy", func(t *testing.T) {
		links := d.Toxiproxy()
		l, err := links.AddLink(ctx, "dockcl.n2.amqp", nodes[1].Upstream)
		require.NoError(t, err)
		t.Cleanup(func() { _ = links.RemoveLink(context.Background(), l.Name()) })
		u, err := url.Parse(c.AMQPURLOf(1, vhost))
		require.NoError(t, err)
		u.Host = l.Addr()
		conn, err := amqp.Dial(u.String())
		require.NoError(t, err)
		defer conn.Close()
		ch, err := conn.Channel()
		require.NoError(t, err)
		_, err = ch.QueueDeclare("via-link", true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		require.NoError(t, err)
		typ, err := c.QueueType(ctx, vhost, "via-link")
		require.NoError(t, err)
		assert.Equal(t, "quorum", typ)
	})

	t.Run("node names resolve on the distribution network only", func(t *testing.T) {
		// The cluster's database is on the provider's network only, as
		// the provider's Toxiproxy is.
		for _, n := range c.nodes {
			code, _, err := c.pgC.Exec(ctx, []string{"getent", "hosts", n.alias})
			require.NoError(t, err)
			assert.Zero(t, code, "%s resolves on the provider's network", n.alias)
			code, _, err = c.pgC.Exec(ctx, []string{"getent", "hosts", n.host})
			require.NoError(t, err)
			assert.NotZero(t, code, "%s does not resolve on the provider's network", n.host)
			code, _, err = n.c.Exec(ctx, []string{"getent", "hosts", c.nodes[(n.i+1)%len(c.nodes)].host})
			require.NoError(t, err)
			assert.Zero(t, code, "a node resolves another's name")
		}
	})

	t.Run("a partition cuts the distribution network only", func(t *testing.T) {
		networks := func() []string {
			in, err := c.nodes[1].c.Inspect(ctx)
			require.NoError(t, err)
			var out []string
			for name := range in.NetworkSettings.Networks {
				out = append(out, name)
			}
			return out
		}
		assert.ElementsMatch(t, []string{d.network.Name, c.distNet.Name}, networks())
		require.NoError(t, c.Partition(ctx, 1))
		assert.Equal(t, []string{d.network.Name}, networks(), "still on the provider's network")
		require.NoError(t, c.Heal(ctx, 1))
		assert.ElementsMatch(t, []string{d.network.Name, c.distNet.Name}, networks())
		require.NoError(t, c.Heal(ctx, 1), "healing a whole node does nothing")
		hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		require.NoError(t, c.WaitHealthy(hctx))
	})

	whole := func(t *testing.T) {
		t.Helper()
		begin := time.Now()
		did, err := c.Restore(ctx)
		require.NoError(t, err, "restore the cluster")
		t.Logf("restored in %s: %v", time.Since(begin).Round(100*time.Millisecond), did)
	}
	t.Run("a killed leader is replaced", func(t *testing.T) { testKillLeader(ctx, t, c, vhost) })
	whole(t)
	t.Run("a partitioned node is seen down", func(t *testing.T) {
		// Its clients' side stays: the published ports are on the
		// provider's network, which the partition does not touch.
		testPartition(ctx, t, c, 2)
	})
	whole(t)
	t.Run("a node frozen past net_ticktime", func(t *testing.T) { testPause(ctx, t, c, 0) })
	whole(t)
	t.Run("the whole cluster restarts", func(t *testing.T) {
		begin := time.Now()
		require.NoError(t, c.RestartBroker(ctx))
		t.Logf("FIGURE docker cluster restart: %s", time.Since(begin).Round(100*time.Millisecond))
		require.Eventually(t, func() bool {
			q, err := c.Queue(ctx, vhost, "qq")
			return err == nil && q.Messages == 2
		}, 60*time.Second, 200*time.Millisecond, "the quorum queue keeps its messages")
	})

	// Stop: the cluster's containers and network are gone, the
	// provider's are not.
	var ids []string
	for _, n := range c.nodes {
		ids = append(ids, n.c.GetContainerID())
	}
	ids = append(ids, c.pgC.GetContainerID())
	distNet := c.distNet.ID
	begin = time.Now()
	require.NoError(t, c.Stop(ctx))
	t.Logf("FIGURE docker cluster stop: %s", time.Since(begin).Round(10*time.Millisecond))
	api, err := client.New(client.FromEnv)
	require.NoError(t, err)
	defer api.Close()
	for _, id := range ids {
		_, err := api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		assert.Error(t, err, "container %.12s removed", id)
	}
	_, err = api.NetworkInspect(ctx, distNet, client.NetworkInspectOptions{})
	assert.Error(t, err, "distribution network removed")
	_, err = api.NetworkInspect(ctx, d.network.ID, client.NetworkInspectOptions{})
	assert.NoError(t, err, "the provider's network stays")
	c2, err := net.DialTimeout("tcp", d.PostgresAddr(), 5*time.Second)
	require.NoError(t, err, "the provider's postgres stays")
	c2.Close()
}
