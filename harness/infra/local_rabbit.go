package infra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
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

// prepareRabbit writes the broker's configuration under <dir>/rmq and
// builds its command line and environment.
func (l *Local) prepareRabbit() error {
	rmq := filepath.Join(l.dir, "rmq")
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
`, l.amqpPort, l.mgmtPort, l.rmqUser, l.rmqPass)
	files := map[string]string{
		"rabbitmq.conf":     conf,
		"advanced.config":   quorumTickConfig,
		"enabled_plugins":   "[rabbitmq_management].\n",
		"rabbitmq-env.conf": "# empty: keeps /etc/rabbitmq/rabbitmq-env.conf out\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(rmq, name), []byte(content), 0o600); err != nil {
			return fmt.Errorf("rabbitmq: %w", err)
		}
	}
	// The folder's random suffix makes the node name unique on this host.
	node := "fl" + strings.TrimPrefix(filepath.Base(l.dir), strings.TrimSuffix(dirPattern, "*")) + "@localhost"
	l.rabbitArgv = []string{rabbitServer}
	l.rabbitEnv = []string{
		"PATH=" + pathEnv(),
		"HOME=" + rmq,
		"LANG=C.UTF-8",
		"RABBITMQ_NODENAME=" + node,
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(rmq, "rabbitmq-env.conf"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(rmq, "rabbitmq"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(rmq, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(rmq, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(rmq, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(rmq, "log"),
		"RABBITMQ_LOGS=-",
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(l.distPort),
		"ERL_EPMD_PORT=" + strconv.Itoa(l.epmdPort),
		// Exec erl directly instead of forking it behind a signal-handling shell.
		"RUNNING_UNDER_SYSTEMD=true",
		// Never start an `epmd -daemon` (it would outlive us): ours runs
		// already. Keep Erlang distribution on loopback.
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}",
	}
	return nil
}

// startRabbit starts epmd and then the broker.
func (l *Local) startRabbit(ctx context.Context) error {
	epmdPath, err := findEpmd()
	if err != nil {
		return fmt.Errorf("rabbitmq: %w", err)
	}
	epmd, err := spawn(l.dir, "epmd", []string{
		epmdPath, "-port", strconv.Itoa(l.epmdPort), "-address", "127.0.0.1",
	}, []string{"PATH=" + pathEnv(), "HOME=" + l.dir}, l.cred)
	if err != nil {
		return fmt.Errorf("rabbitmq: %w", err)
	}
	l.epmd = epmd
	err = waitReady(ctx, epmd, "epmd", func(ctx context.Context) error {
		return dialOK(ctx, l.epmdPort)
	})
	if err != nil {
		return fmt.Errorf("rabbitmq: %w", err)
	}

	// Not locked: l is not shared yet, and the PostgreSQL start-up running
	// alongside must not wait for the lock.
	if err := l.startBrokerLocked(ctx); err != nil {
		return fmt.Errorf("rabbitmq: %w", err)
	}
	return nil
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

// startBrokerLocked spawns the broker and waits until AMQP and the
// management API answer. l.mu is held, or l is not shared yet.
func (l *Local) startBrokerLocked(ctx context.Context) error {
	if l.stopped {
		return errors.New("start broker: infrastructure is stopped")
	}
	if l.rabbit != nil && !l.rabbit.exited() {
		return errors.New("start broker: already running")
	}
	if l.epmd == nil || l.epmd.exited() {
		return errors.New("start broker: epmd is not running")
	}
	c, err := spawn(l.dir, "rabbitmq", l.rabbitArgv, l.rabbitEnv, l.cred)
	if err != nil {
		return err
	}
	l.rabbit = c
	err = waitReady(ctx, c, "rabbitmq", func(ctx context.Context) error {
		if err := l.amqpOK(ctx); err != nil {
			return err
		}
		var overview struct {
			Node string `json:"node"`
		}
		_, err := l.mgmt(ctx, http.MethodGet, "/api/overview", nil, &overview, http.StatusOK)
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

func (l *Local) amqpOK(ctx context.Context) error {
	deadline, ok := ctx.Deadline()
	timeout := probeTimeout
	if ok {
		timeout = time.Until(deadline)
	}
	conn, err := amqp.DialConfig(l.AMQPURL("/"), amqp.Config{Dial: amqp.DefaultDial(timeout)})
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

// StopBroker implements Infra: it SIGKILLs the node's process group (a
// crash, not a clean stop) and waits until the node is gone and its AMQP
// port is closed. epmd keeps running. See Infra.StopBroker for quorum
// queues declared just before the crash.
func (l *Local) StopBroker(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return errors.New("local infra: stop broker: infrastructure is stopped")
	}
	if err := l.stopBrokerLocked(ctx); err != nil {
		return fmt.Errorf("local infra: stop broker: %w", err)
	}
	return nil
}

func (l *Local) stopBrokerLocked(ctx context.Context) error {
	c := l.rabbit
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
		err := dialOK(ctx, l.amqpPort)
		if err != nil && ctx.Err() == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for AMQP port %d to close: %w", l.amqpPort, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// StartBroker implements Infra.
func (l *Local) StartBroker(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := time.Now()
	if err := l.startBrokerLocked(ctx); err != nil {
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

// AMQPAddr implements Infra.
func (l *Local) AMQPAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.amqpPort))
}

// AMQPURL implements Infra: the run's user and password.
func (l *Local) AMQPURL(vhost string) string {
	u := url.URL{Scheme: "amqp", User: url.UserPassword(l.rmqUser, l.rmqPass), Host: l.AMQPAddr(),
		Path: "/" + vhost, RawPath: "/" + url.PathEscape(vhost)}
	return u.String()
}

// ManagementURL is the base URL of the management HTTP API, without
// credentials: the API wants the run's user and password (AMQPURL's) as
// basic authentication.
func (l *Local) ManagementURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(l.mgmtPort))
}

// api is the management API client of this node, as the run's user.
func (l *Local) api() mgmtAPI {
	return mgmtAPI{base: l.ManagementURL(), user: l.rmqUser, pass: l.rmqPass, http: l.http}
}

// CreateVHost implements Infra; the run's user gets all permissions.
func (l *Local) CreateVHost(ctx context.Context, name string) error {
	return l.api().createVHost(ctx, name, l.rmqUser)
}

// DeleteVHost implements Infra.
func (l *Local) DeleteVHost(ctx context.Context, name string) error {
	return l.api().deleteVHost(ctx, name)
}

// Queue implements Infra. The counters are eventually consistent: the
// broker emits them every 500 ms (collect_statistics_interval), so a just
// published message shows up within about a second.
func (l *Local) Queue(ctx context.Context, vhost, queue string) (QueueInfo, error) {
	return l.api().queue(ctx, vhost, queue)
}

// mgmt calls the management API as the run's user (see mgmtAPI.do).
func (l *Local) mgmt(ctx context.Context, method, path string, in, out any, want ...int) (int, error) {
	return l.api().do(ctx, method, path, in, out, want...)
}
