package infra

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocker starts the docker provider, exercises the contract, restarts
// the broker and checks that a quorum queue's message survives, sends bytes
// through a link of its Toxiproxy, and stops. It runs where a Docker daemon
// answers (and can pull the images, or has them); elsewhere it is skipped
// with the reason.
func TestDocker(t *testing.T) {
	skipWithoutDocker(t)

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

	t.Run("ports on the loopback only", func(t *testing.T) {
		ip := nonLoopbackIPv4(t)
		for name, addr := range map[string]string{"postgres": d.PostgresAddr(), "amqp": d.AMQPAddr(), "toxiproxy API": d.toxi.APIAddr()} {
			_, port, err := net.SplitHostPort(addr)
			require.NoError(t, err)
			c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, port), 2*time.Second)
			if err == nil {
				_ = c.Close()
			}
			assert.Error(t, err, "%s answers on %s, not only on the loopback", name, ip)
		}
	})

	t.Run("restart keeps a quorum message", func(t *testing.T) { testRestartKeepsQuorumMessage(ctx, t, d, "dock-restart") })

	require.NoError(t, d.Stop(ctx))
	require.NoError(t, d.Stop(ctx), "Stop is idempotent")
	assert.Error(t, d.StartBroker(ctx), "no broker after Stop")
}

// skipWithoutDocker skips t where no Docker daemon answers, or in -short.
func skipWithoutDocker(t *testing.T) {
	t.Helper()
	pctx, pcancel := context.WithTimeout(context.Background(), 15*time.Second)
	err := DockerAnswers(pctx)
	pcancel()
	if err != nil {
		t.Skipf("docker provider: no Docker daemon answers here (%v); runs where one does", err)
	}
	if testing.Short() {
		t.Skip("docker provider: pulls images and starts containers; not in -short")
	}
}

// nonLoopbackIPv4 is an IPv4 address of this host's that is not the
// loopback, where a port published on every interface would answer.
func nonLoopbackIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	require.FailNow(t, "this host has no IPv4 address besides the loopback to dial")
	return ""
}
