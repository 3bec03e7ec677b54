package infra

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocker starts the docker provider, exercises the contract, restarts
// the broker and checks that a quorum queue's message survives, sends bytes
// through a link of its Toxiproxy, and stops. It runs where a Docker daemon
// answers (and can pull the images, or has them); elsewhere it is skipped
// with the reason.
func TestDocker(t *testing.T) {
	pctx, pcancel := context.WithTimeout(context.Background(), 15*time.Second)
	err := DockerAnswers(pctx)
	pcancel()
	if err != nil {
		t.Skipf("docker provider: no Docker daemon answers here (%v); runs where one does", err)
	}
	if testing.Short() {
		t.Skip("docker provider: pulls images and starts containers; not in -short")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	opts, err := DockerOptionsFromEnv(nil)
	require.NoError(t, err)
	opts.Log = testLog{t}
	opts.ToxiproxyPorts = 3
	d, err := StartDocker(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Stop(context.Background()) })

	assert.Equal(t, "docker", d.Name())
	assert.True(t, d.CanRestartBroker())
	pg, am := d.LinkUpstreams()
	assert.Equal(t, "postgres:5432", pg)
	assert.Equal(t, "rabbitmq:5672", am)

	testContract(ctx, t, d, "dock")

	t.Run("links reach the services by alias", func(t *testing.T) {
		links := d.Toxiproxy()
		l, err := links.AddLink(ctx, "dock.order.pg", pg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = links.RemoveLink(context.Background(), l.Name()) })
		c, err := net.DialTimeout("tcp", l.Addr(), 5*time.Second)
		require.NoError(t, err)
		defer c.Close()
		// An SSLRequest; PostgreSQL answers with one byte, 'N' or 'S'.
		require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = c.Write([]byte{0, 0, 0, 8, 4, 210, 22, 47})
		require.NoError(t, err)
		b := make([]byte, 1)
		_, err = io.ReadFull(c, b)
		require.NoError(t, err)
		assert.Contains(t, "NS", string(b))
	})

	t.Run("restart keeps a quorum message", func(t *testing.T) {
		const vhost = "dock-restart"
		require.NoError(t, d.CreateVHost(ctx, vhost))
		conn, err := amqp.Dial(d.AMQPURL(vhost))
		require.NoError(t, err)
		ch, err := conn.Channel()
		require.NoError(t, err)
		require.NoError(t, ch.Confirm(false))
		_, err = ch.QueueDeclare("q", true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		require.NoError(t, err)
		publish(ctx, t, ch, "q", "survives")
		time.Sleep(time.Second) // see Infra.StopBroker

		closed := conn.NotifyClose(make(chan *amqp.Error, 1))
		t0 := time.Now()
		require.NoError(t, d.StopBroker(ctx))
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Error("client did not see the connection drop")
		}
		require.NoError(t, d.StartBroker(ctx))
		t.Logf("broker restart took %s", time.Since(t0).Round(100*time.Millisecond))

		conn2, err := amqp.Dial(d.AMQPURL(vhost))
		require.NoError(t, err)
		defer conn2.Close()
		ch2, err := conn2.Channel()
		require.NoError(t, err)
		var m amqp.Delivery
		require.Eventually(t, func() bool {
			var ok bool
			m, ok, err = ch2.Get("q", false)
			return err == nil && ok
		}, 30*time.Second, 200*time.Millisecond, "the message did not survive the restart (last error %v)", err)
		assert.Equal(t, "survives", string(m.Body))
		require.NoError(t, d.DeleteVHost(ctx, vhost))
	})

	require.NoError(t, d.Stop(ctx))
	require.NoError(t, d.Stop(ctx), "Stop is idempotent")
	assert.Error(t, d.StartBroker(ctx), "no broker after Stop")
}
