package infra

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/jackc/pgx/v5"
)

// Environment variables of the external provider.
const (
	// EnvPGURL is a PostgreSQL URL of a user that may CREATE DATABASE, e.g.
	// postgres://postgres:secret@db:5432/postgres?sslmode=disable.
	EnvPGURL = "FAULTLINE_PG_URL"
	// EnvAMQPURL is an AMQP URL, e.g. amqp://faultline:secret@mq:5672/.
	EnvAMQPURL = "FAULTLINE_AMQP_URL"
	// EnvManagementURL is the base URL of the RabbitMQ management API with
	// an administrator's credentials, e.g. http://admin:secret@mq:15672.
	EnvManagementURL = "FAULTLINE_AMQP_MANAGEMENT_URL"
	// EnvBrokerRestartCmd is a shell command that stops or starts the
	// broker: it runs as `sh -c "$FAULTLINE_BROKER_RESTART_CMD" faultline-broker ACTION`,
	// with ACTION (stop or start) as $1 and in FAULTLINE_BROKER_ACTION.
	EnvBrokerRestartCmd = "FAULTLINE_BROKER_RESTART_CMD"
)

// brokerWait bounds the wait for a broker to go away after the stop command
// and to answer after the start command.
const brokerWait = 90 * time.Second

// ExternalOptions configure StartExternal.
type ExternalOptions struct {
	// PGURL is a PostgreSQL URL of a user that may CREATE DATABASE
	// (FAULTLINE_PG_URL). Its database, or postgres, is where databases are
	// created from; its query (sslmode, ...) is kept in every URL handed out.
	PGURL string
	// AMQPURL is an AMQP URL (FAULTLINE_AMQP_URL); its user is granted all
	// permissions on each vhost a scenario creates.
	AMQPURL string
	// ManagementURL is the management API's base URL with an
	// administrator's credentials (FAULTLINE_AMQP_MANAGEMENT_URL). Empty:
	// http://<AMQP host>:15672 with the AMQP URL's credentials.
	ManagementURL string
	// RestartCmd stops and starts the broker
	// (FAULTLINE_BROKER_RESTART_CMD); see EnvBrokerRestartCmd. Empty: the
	// provider cannot restart the broker, and scenarios that need it are
	// not run.
	RestartCmd string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// ExternalOptionsFromEnv reads ExternalOptions from env (os.Getenv if nil).
func ExternalOptionsFromEnv(env func(string) string) ExternalOptions {
	if env == nil {
		env = os.Getenv
	}
	return ExternalOptions{
		PGURL:         strings.TrimSpace(env(EnvPGURL)),
		AMQPURL:       strings.TrimSpace(env(EnvAMQPURL)),
		ManagementURL: strings.TrimSpace(env(EnvManagementURL)),
		RestartCmd:    strings.TrimSpace(env(EnvBrokerRestartCmd)),
	}
}

// External is the external infrastructure provider: a PostgreSQL server
// and a RabbitMQ broker that run already, somewhere this host reaches, and
// that it does not own. It implements Infra. Stop stops nothing; the
// databases and vhosts each scenario creates are dropped by the scenario.
type External struct {
	pg         pgServer
	amqp       amqpServer
	mgmt       mgmtAPI
	restartCmd string
	logw       io.Writer
	// owner marks what this External creates as its own, and holds it
	// while it lives (external_owner.go).
	owner *owner

	mu      sync.Mutex // serialises broker restarts and Stop
	stopped bool
}

var _ Infra = (*External)(nil)

// StartExternal checks the URLs, then that PostgreSQL (and the user's right
// to create databases), AMQP and the management API (and its user's
// administrator tag) answer; an error names each that does not. ctx bounds
// the checks.
func StartExternal(ctx context.Context, opts ExternalOptions) (*External, error) {
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	pgURL, err1 := parseServiceURL(EnvPGURL, opts.PGURL, map[string]string{"postgres": "5432", "postgresql": "5432"})
	amqpURL, err2 := parseServiceURL(EnvAMQPURL, opts.AMQPURL, map[string]string{"amqp": "5672", "amqps": "5671"})
	var mgmtURL *url.URL
	var err3 error
	switch {
	case opts.ManagementURL != "":
		mgmtURL, err3 = parseServiceURL(EnvManagementURL, opts.ManagementURL, map[string]string{"http": "15672", "https": "15671"})
	case amqpURL != nil:
		mgmtURL = &url.URL{Scheme: "http", User: amqpURL.User, Host: net.JoinHostPort(amqpURL.Hostname(), "15672")}
		fmt.Fprintf(logw, "external infra: %s is not set; using the management API at %s\n", EnvManagementURL, mgmtURL.Redacted())
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("external infra: %w", err)
	}
	e := &External{
		pg:         pgServer{base: pgURL},
		amqp:       amqpServer{base: amqpURL},
		mgmt:       newMgmtAPI(mgmtURL, "guest", "guest"),
		restartCmd: opts.RestartCmd,
		logw:       logw,
	}

	var (
		wg         sync.WaitGroup
		errs       [3]error
		checkTimer = 15 * time.Second
	)
	check := func(i int, what string, fn func(context.Context) error) {
		defer wg.Done()
		cctx, cancel := context.WithTimeout(ctx, checkTimer)
		defer cancel()
		if err := fn(cctx); err != nil {
			errs[i] = fmt.Errorf("%s: %w", what, err)
		}
	}
	wg.Add(3)
	go check(0, fmt.Sprintf("PostgreSQL at %s (%s)", pgURL.Host, EnvPGURL), e.pg.check)
	go check(1, fmt.Sprintf("RabbitMQ at %s (%s)", amqpURL.Host, EnvAMQPURL), e.amqp.check)
	go check(2, fmt.Sprintf("RabbitMQ management API at %s (%s)", mgmtURL.Host, EnvManagementURL), e.mgmt.check)
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("external infra: %w", err)
	}
	var err error
	if e.owner, err = claimOwner(ctx, e.pg); err != nil {
		return nil, fmt.Errorf("external infra: %w", err)
	}
	removed, err := e.sweep(ctx)
	for _, r := range removed {
		fmt.Fprintf(logw, "external infra: removed what a faultline that ended without cleaning up left: %s\n", r)
	}
	if err != nil {
		_ = e.owner.release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("external infra: %w", err)
	}
	restart := "cannot restart the broker (no " + EnvBrokerRestartCmd + ")"
	if e.restartCmd != "" {
		restart = "restarts the broker with " + EnvBrokerRestartCmd
	}
	fmt.Fprintf(logw, "external infra: postgres %s, rabbitmq %s, management %s; %s\n", pgURL.Host, amqpURL.Host, mgmtURL.Host, restart)
	return e, nil
}

// Name implements Infra.
func (e *External) Name() string { return "external" }

// Secrets implements Infra: the passwords of FAULTLINE_PG_URL,
// FAULTLINE_AMQP_URL and the management API, a team's real credentials.
func (e *External) Secrets() []string {
	return []string{password(e.pg.base), password(e.amqp.base), e.mgmt.pass}
}

// EnvSecrets are the passwords in the external provider's environment
// variables (env: os.Getenv if nil), known before any provider starts, so
// that even an error about a URL that does not parse is written masked.
func EnvSecrets(env func(string) string) []string {
	opts := ExternalOptionsFromEnv(env)
	var out []string
	for _, raw := range []string{opts.PGURL, opts.AMQPURL, opts.ManagementURL} {
		if u, err := url.Parse(raw); err == nil {
			out = append(out, password(u))
		}
	}
	return out
}

// PostgresAddr implements Infra: the host:port of FAULTLINE_PG_URL.
func (e *External) PostgresAddr() string { return e.pg.base.Host }

// PostgresURL implements Infra: FAULTLINE_PG_URL with database swapped in.
func (e *External) PostgresURL(database string) string { return e.pg.url(database) }

// CreateDatabase implements Infra. The database is marked as this
// faultline's (its comment): one killed before dropping it has it dropped
// by the next faultline on the server.
func (e *External) CreateDatabase(ctx context.Context, name string) error {
	// COMMENT takes no parameter; the mark is constant text and a number:
	// nothing to quote.
	mark := "COMMENT ON DATABASE " + pgx.Identifier{name}.Sanitize() + " IS '" + ownerComment(e.owner.key) + "'"
	if err := e.pg.createDatabase(ctx, name, mark); err != nil {
		return fmt.Errorf("external infra: %w", err)
	}
	return nil
}

// DropDatabase implements Infra. It needs PostgreSQL 13 or later.
func (e *External) DropDatabase(ctx context.Context, name string) error {
	if err := e.pg.dropDatabase(ctx, name); err != nil {
		return fmt.Errorf("external infra: %w", err)
	}
	return nil
}

// AMQPAddr implements Infra: the host:port of FAULTLINE_AMQP_URL.
func (e *External) AMQPAddr() string { return e.amqp.base.Host }

// AMQPURL implements Infra: FAULTLINE_AMQP_URL with vhost swapped in.
func (e *External) AMQPURL(vhost string) string { return e.amqp.url(vhost) }

// CreateVHost implements Infra; the AMQP URL's user gets all permissions.
// It returns once the vhost runs on every node of the broker.
func (e *External) CreateVHost(ctx context.Context, name string) error {
	if err := e.mgmt.createVHostDescribed(ctx, name, e.amqp.user(), ownerComment(e.owner.key)); err != nil {
		return fmt.Errorf("external infra: %w", err)
	}
	if err := e.mgmt.vhostRunning(ctx, name); err != nil {
		return fmt.Errorf("external infra: %w", err)
	}
	return nil
}

// TraceVHost implements Infra; the vhost keeps its owner's mark.
func (e *External) TraceVHost(ctx context.Context, name string, on bool) error {
	if err := e.mgmt.traceVHost(ctx, name, ownerComment(e.owner.key), on); err != nil {
		return fmt.Errorf("external infra: %w", err)
	}
	return nil
}

// DeleteVHost implements Infra.
func (e *External) DeleteVHost(ctx context.Context, name string) error {
	if err := e.mgmt.deleteVHost(ctx, name); err != nil {
		return fmt.Errorf("external infra: %w", err)
	}
	return nil
}

// VHost implements Infra.
func (e *External) VHost(ctx context.Context, vhost string) (VHostInfo, error) {
	v, err := e.mgmt.vhost(ctx, vhost)
	if err != nil {
		return VHostInfo{}, fmt.Errorf("external infra: %w", err)
	}
	return v, nil
}

// ClientConnections implements Infra.
func (e *External) ClientConnections(ctx context.Context, vhost string) (int, error) {
	n, err := e.mgmt.clientConnections(ctx, vhost)
	if err != nil {
		return 0, fmt.Errorf("external infra: %w", err)
	}
	return n, nil
}

// Queue implements Infra. The counters lag by the broker's
// collect_statistics_interval (5 s unless configured).
func (e *External) Queue(ctx context.Context, vhost, queue string) (history.QueueInfo, error) {
	q, err := e.mgmt.queue(ctx, vhost, queue)
	if err != nil {
		return history.QueueInfo{}, fmt.Errorf("external infra: %w", err)
	}
	return q, nil
}

// LinkUpstreams implements Infra: the services' own addresses, since the
// Toxiproxy server runs on this host.
func (e *External) LinkUpstreams() (postgres, amqp string) {
	return e.PostgresAddr(), e.AMQPAddr()
}

// CanRestartBroker implements Infra: only with a restart command.
func (e *External) CanRestartBroker() bool { return e.restartCmd != "" }

// errNoRestartCmd says why an external broker cannot be restarted.
var errNoRestartCmd = errors.New("the external provider does not own the broker and has no " + EnvBrokerRestartCmd +
	` to stop and start it (a shell command run with "stop" or "start" as $1)`)

// StopBroker implements Infra: it runs the restart command with "stop" and
// waits until the broker no longer answers AMQP. Whether that is a crash
// (SIGKILL, docker kill) or a clean stop is up to the command.
func (e *External) StopBroker(ctx context.Context) error {
	if err := e.brokerAction(ctx, "stop"); err != nil {
		return fmt.Errorf("external infra: stop broker: %w", err)
	}
	return nil
}

// StartBroker implements Infra: it runs the restart command with "start"
// and waits until AMQP and the management API answer.
func (e *External) StartBroker(ctx context.Context) error {
	if err := e.brokerAction(ctx, "start"); err != nil {
		return fmt.Errorf("external infra: start broker: %w", err)
	}
	return nil
}

// RestartBroker implements Infra.
func (e *External) RestartBroker(ctx context.Context) error {
	if err := e.StopBroker(ctx); err != nil {
		return err
	}
	return e.StartBroker(ctx)
}

func (e *External) brokerAction(ctx context.Context, action string) error {
	if e.restartCmd == "" {
		return errNoRestartCmd
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errStopped
	}
	t := time.Now()
	if err := runBrokerCmd(ctx, e.restartCmd, action); err != nil {
		return err
	}
	if err := waitBroker(ctx, e.amqp, e.mgmt, action == "start", brokerWait); err != nil {
		return fmt.Errorf("after %s %s: %w", EnvBrokerRestartCmd, action, err)
	}
	fmt.Fprintf(e.logw, "external infra: broker %s in %s\n", map[string]string{"stop": "stopped", "start": "started"}[action],
		time.Since(t).Round(100*time.Millisecond))
	return nil
}

// runBrokerCmd runs cmd with sh, action as $1, in its own process group,
// which is killed if ctx ends.
func runBrokerCmd(ctx context.Context, cmd, action string) error {
	c := exec.CommandContext(ctx, "sh", "-c", cmd, "faultline-broker", action)
	c.Env = append(os.Environ(), "FAULTLINE_BROKER_ACTION="+action)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second
	if err := c.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 2048 {
			msg = "..." + msg[len(msg)-2048:]
		}
		if msg == "" {
			msg = "(no output)"
		}
		return fmt.Errorf("%s %s: %w; output: %s", EnvBrokerRestartCmd, action, err, msg)
	}
	return nil
}

// Stop implements Infra. The services are not ours: nothing is stopped;
// the session that holds this faultline's runs ends.
func (e *External) Stop(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	e.stopped = true
	e.mgmt.http.CloseIdleConnections()
	if err := e.owner.release(ctx); err != nil {
		return fmt.Errorf("external infra: end the session that holds this faultline's runs: %w", err)
	}
	return nil
}
