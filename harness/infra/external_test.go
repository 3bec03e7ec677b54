package infra

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExternalRejectsBadSettingsWithoutTouchingTheNetwork(t *testing.T) {
	const (
		pg   = "postgres://postgres:pw@db.invalid:5432/postgres"
		amqp = "amqp://u:secret-pass@mq.invalid:5672/"
	)
	cases := []struct {
		name string
		opts ExternalOptions
		want []string
	}{
		{"nothing set", ExternalOptions{}, []string{
			"FAULTLINE_PG_URL is not set", "FAULTLINE_AMQP_URL is not set",
		}},
		{"bad schemes", ExternalOptions{PGURL: "mysql://db:3306/x", AMQPURL: "http://mq:5672", ManagementURL: "ftp://mq"}, []string{
			`FAULTLINE_PG_URL: scheme "mysql", want postgres:// or postgresql://`,
			`FAULTLINE_AMQP_URL: scheme "http", want amqp:// or amqps://`,
			`FAULTLINE_AMQP_MANAGEMENT_URL: scheme "ftp", want http:// or https://`,
		}},
		{"no host", ExternalOptions{PGURL: "postgres:///orders", AMQPURL: amqp}, []string{"FAULTLINE_PG_URL: no host"}},
		{"not a URL", ExternalOptions{PGURL: "postgres://u:secret-pass@db:5432/%zz", AMQPURL: amqp}, []string{"FAULTLINE_PG_URL is not a URL"}},
		{"bad management", ExternalOptions{PGURL: pg, AMQPURL: amqp, ManagementURL: "http://"}, []string{"FAULTLINE_AMQP_MANAGEMENT_URL: no host"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := StartExternal(t.Context(), c.opts)
			assert.Nil(t, e)
			require.Error(t, err)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "secret-pass", "errors never show a password")
		})
	}
}

func TestExternalOptionsFromEnv(t *testing.T) {
	o := ExternalOptionsFromEnv(envOf(map[string]string{
		EnvPGURL: " postgres://db/postgres ", EnvAMQPURL: "amqp://mq/", EnvManagementURL: "http://a:b@mq:15672",
		EnvBrokerRestartCmd: "docker $1 rabbit",
	}))
	assert.Equal(t, ExternalOptions{
		PGURL: "postgres://db/postgres", AMQPURL: "amqp://mq/", ManagementURL: "http://a:b@mq:15672",
		RestartCmd: "docker $1 rabbit",
	}, o)
}

// externalOn returns the options that make the external provider use l.
func externalOn(l *Local) ExternalOptions {
	mgmt, _ := url.Parse(l.ManagementURL())
	mgmt.User = url.UserPassword(l.rmqUser, l.rmqPass)
	return ExternalOptions{
		PGURL:         l.PostgresURL("postgres"),
		AMQPURL:       l.AMQPURL("/"),
		ManagementURL: mgmt.String(),
	}
}

// TestExternal runs the external provider against the services of a local
// provider, as a user would against services they run.
func TestExternal(t *testing.T) {
	ctx := startsCtx(t, 2) // the local postgres and rabbitmq it points at
	l, err := StartLocal(ctx, LocalOptions{Log: testLog{t}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Stop(context.Background()) })

	opts := externalOn(l)
	opts.Log = testLog{t}
	e, err := StartExternal(ctx, opts)
	require.NoError(t, err)

	assert.Equal(t, "external", e.Name())
	assert.Equal(t, l.PostgresAddr(), e.PostgresAddr())
	assert.Equal(t, l.AMQPAddr(), e.AMQPAddr())
	pg, amqpUp := e.LinkUpstreams()
	assert.Equal(t, l.PostgresAddr(), pg, "links go straight to the services")
	assert.Equal(t, l.AMQPAddr(), amqpUp)
	assert.Equal(t, l.PostgresURL("s01_orders"), e.PostgresURL("s01_orders"))
	assert.Equal(t, l.AMQPURL("s01"), e.AMQPURL("s01"))
	assert.Equal(t, l.AMQPURL("/"), e.AMQPURL("/"))
	assert.Equal(t, l.AMQPURL("a/b"), e.AMQPURL("a/b"))

	testContract(ctx, t, e, "ext")

	t.Run("no restart command", func(t *testing.T) {
		assert.False(t, e.CanRestartBroker())
		for _, err := range []error{e.StopBroker(ctx), e.StartBroker(ctx), e.RestartBroker(ctx)} {
			require.Error(t, err)
			assert.Contains(t, err.Error(), "does not own the broker")
			assert.Contains(t, err.Error(), "FAULTLINE_BROKER_RESTART_CMD")
		}
	})

	t.Run("restart command reports failure", func(t *testing.T) {
		o := opts
		o.RestartCmd = `echo "no $1 today ($FAULTLINE_BROKER_ACTION)" >&2; false`
		e2, err := StartExternal(ctx, o)
		require.NoError(t, err)
		t.Cleanup(func() { _ = e2.Stop(context.Background()) })
		assert.True(t, e2.CanRestartBroker())
		err = e2.StopBroker(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "FAULTLINE_BROKER_RESTART_CMD stop: exit status 1")
		assert.Contains(t, err.Error(), "no stop today (stop)")
	})

	t.Run("a stop command that leaves the broker up is an error", func(t *testing.T) {
		o := opts
		o.RestartCmd = "true"
		e2, err := StartExternal(ctx, o)
		require.NoError(t, err)
		t.Cleanup(func() { _ = e2.Stop(context.Background()) })
		sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
		defer scancel()
		err = e2.StopBroker(sctx)
		assert.ErrorContains(t, err, "go away")
		assert.ErrorContains(t, err, "it still answers")
	})

	t.Run("unreachable services are named", func(t *testing.T) {
		closed := closedPort(t)
		o := opts
		o.PGURL = "postgres://postgres@" + closed + "/postgres?sslmode=disable"
		_, err := StartExternal(ctx, o)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "PostgreSQL at "+closed+" (FAULTLINE_PG_URL)")
		assert.NotContains(t, err.Error(), "RabbitMQ at")

		o = opts
		o.AMQPURL = "amqp://guest:guest@" + closed + "/"
		o.ManagementURL = ""
		_, err = StartExternal(ctx, o)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "RabbitMQ at "+closed+" (FAULTLINE_AMQP_URL)")
		host, _, _ := net.SplitHostPort(closed)
		assert.Contains(t, err.Error(), "RabbitMQ management API at "+net.JoinHostPort(host, "15672")+" (FAULTLINE_AMQP_MANAGEMENT_URL)",
			"without a management URL, port 15672 of the AMQP host")
		assert.NotContains(t, err.Error(), "PostgreSQL at")
	})

	t.Run("users without the rights are refused", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, l.PostgresURL("postgres"))
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `CREATE ROLE weak LOGIN PASSWORD 'weak'`)
		require.NoError(t, err)
		_ = conn.Close(ctx)
		for user, tags := range map[string]string{"weak": "", "watcher": "management"} {
			_, err = l.mgmt(ctx, http.MethodPut, "/api/users/"+user, map[string]string{"password": user, "tags": tags}, nil,
				http.StatusCreated, http.StatusNoContent)
			require.NoError(t, err)
		}

		o := opts
		o.PGURL = "postgres://weak:weak@" + l.PostgresAddr() + "/postgres?sslmode=disable"
		o.ManagementURL = strings.Replace(opts.ManagementURL, l.rmqUser+":"+l.rmqPass, "weak:weak", 1)
		_, err = StartExternal(ctx, o)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "user weak may not CREATE DATABASE")
		assert.Contains(t, err.Error(), "user weak is refused (401)")

		o = opts
		o.ManagementURL = strings.Replace(opts.ManagementURL, l.rmqUser+":"+l.rmqPass, "watcher:watcher", 1)
		_, err = StartExternal(ctx, o)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "user watcher is not an administrator")
		assert.NotContains(t, err.Error(), "PostgreSQL at")
	})

	t.Run("restart through the command", func(t *testing.T) {
		ctl := brokerControl(t, l)
		o := opts
		o.RestartCmd = fmt.Sprintf(`FAULTLINE_TEST_BROKER_CTL=%s '%s' -test.run='^TestHelperBrokerCommand$' -- "$1"`, ctl, os.Args[0])
		e2, err := StartExternal(ctx, o)
		require.NoError(t, err)
		t.Cleanup(func() { _ = e2.Stop(context.Background()) })
		require.True(t, e2.CanRestartBroker())

		require.NoError(t, e2.StopBroker(ctx))
		_, err = amqp.DialConfig(e2.AMQPURL("/"), amqp.Config{Dial: amqp.DefaultDial(time.Second)})
		assert.Error(t, err, "the broker is down after StopBroker")
		require.NoError(t, e2.StartBroker(ctx))
		conn, err := amqp.DialConfig(e2.AMQPURL("/"), amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
		require.NoError(t, err, "the broker answers after StartBroker")
		_ = conn.Close()
		_, err = e2.Queue(ctx, "/", "nope")
		assert.ErrorIs(t, err, ErrNotFound, "the management API answers")
	})

	t.Run("what a killed faultline left is removed by the next one, what a live one holds is not", func(t *testing.T) {
		killed, err := StartExternal(ctx, opts)
		require.NoError(t, err)
		const db, vhost = "fl_killed_x_orders", "fl_killed_x"
		require.NoError(t, killed.CreateDatabase(ctx, db))
		require.NoError(t, killed.CreateVHost(ctx, vhost))
		// What a log relay of its run made on its database.
		rc, err := pgx.Connect(ctx, l.PostgresURL(db))
		require.NoError(t, err)
		_, err = rc.Exec(ctx, `CREATE PUBLICATION fl_killed_pub FOR ALL TABLES`)
		require.NoError(t, err)
		_, err = rc.Exec(ctx, `SELECT pg_create_logical_replication_slot('fl_killed_slot', 'pgoutput')`)
		require.NoError(t, err)
		require.NoError(t, rc.Close(ctx))

		admin, err := pgx.Connect(ctx, l.PostgresURL("postgres"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = admin.Close(context.Background()) })
		left := func() (dbs, slots int, vhostThere bool) {
			require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, db).Scan(&dbs))
			require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'fl_killed_slot'`).Scan(&slots))
			_, err := e.VHost(ctx, vhost)
			if !errors.Is(err, ErrNotFound) {
				require.NoError(t, err)
			}
			return dbs, slots, err == nil
		}

		// While its faultline lives, another one leaves its runs alone.
		alive, err := StartExternal(ctx, opts)
		require.NoError(t, err)
		require.NoError(t, alive.Stop(ctx))
		dbs, slots, there := left()
		require.Equal(t, 1, dbs, "a live faultline's database is left alone")
		require.Equal(t, 1, slots)
		require.True(t, there, "a live faultline's vhost is left alone")

		// Killed: its session ends as a SIGKILL ends it (the socket
		// closed, no goodbye), and nothing of its run is removed.
		pid := killed.owner.conn.PgConn().PID()
		require.NoError(t, killed.owner.conn.PgConn().Conn().Close())
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var n int
			require.NoError(c, admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n))
			assert.Zero(c, n)
		}, 30*time.Second, 20*time.Millisecond, "the killed faultline's session ends")

		var log strings.Builder
		o := opts
		o.Log = &log
		next, err := StartExternal(ctx, o)
		require.NoError(t, err)
		t.Cleanup(func() { _ = next.Stop(context.Background()) })
		dbs, slots, there = left()
		assert.Zero(t, dbs, "the killed faultline's database is dropped")
		assert.Zero(t, slots, "its replication slot with it")
		assert.False(t, there, "its vhost is deleted")
		assert.Contains(t, log.String(), "removed what a faultline that ended without cleaning up left: databases ["+db+"]")
	})

	require.NoError(t, e.Stop(ctx))
	require.NoError(t, e.Stop(ctx), "Stop is idempotent")
	conn, err := pgx.Connect(ctx, l.PostgresURL("postgres"))
	require.NoError(t, err, "Stop leaves the services it does not own running")
	_ = conn.Close(ctx)
}

// closedPort returns a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// brokerControl serves POST /stop and /start on loopback, which stop and
// start l's broker, and returns its base URL: a shell command reaches the
// local provider through it.
func brokerControl(t *testing.T, l *Local) string {
	mux := http.NewServeMux()
	handle := func(fn func(context.Context) error) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if err := fn(r.Context()); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		}
	}
	mux.HandleFunc("POST /stop", handle(l.StopBroker))
	mux.HandleFunc("POST /start", handle(l.StartBroker))
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestHelperBrokerCommand is the restart command of "restart through the
// command": run as this test binary with FAULTLINE_TEST_BROKER_CTL set and
// the action after --, it asks brokerControl to do it. Otherwise it does
// nothing.
func TestHelperBrokerCommand(t *testing.T) {
	ctl := os.Getenv("FAULTLINE_TEST_BROKER_CTL")
	if ctl == "" {
		return
	}
	require.Len(t, flag.Args(), 1, "want the action after --")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ctl+"/"+flag.Args()[0], nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// A mark is read back to its key; a comment or description of anything
// else is not a faultline run's.
func TestParseOwner(t *testing.T) {
	for _, tc := range []struct {
		mark string
		key  int64
		ok   bool
	}{
		{mark: ownerComment(42), key: 42, ok: true},
		{mark: ownerComment(1<<62 + 7), key: 1<<62 + 7, ok: true},
		{mark: "the team's orders database"},
		{mark: ""},
		{mark: ownerMark},
		{mark: ownerMark + "12x"},
		{mark: "x" + ownerComment(42)},
	} {
		key, ok := parseOwner(tc.mark)
		assert.Equal(t, tc.ok, ok, "%q", tc.mark)
		assert.Equal(t, tc.key, key, "%q", tc.mark)
	}
}
