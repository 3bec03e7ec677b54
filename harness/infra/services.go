package infra

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
)

// This file holds what the providers share: the docker and external ones
// reach PostgreSQL and RabbitMQ by URL with credentials; the local one
// reuses the management API client with its run's credentials.

// pgServer is a PostgreSQL server reached by a URL of a user that may
// CREATE DATABASE. Databases are swapped into the URL's path.
type pgServer struct {
	base *url.URL // as given, host with a port
	// ownServer: the provider started the server (PostgreSQL 15, its
	// image), so its databases are made by fileCopy; a server given from
	// outside gets a plain CREATE DATABASE, which any version takes.
	ownServer bool
}

// url returns the server's URL with database as its database.
func (p pgServer) url(database string) string {
	u := *p.base
	u.Path, u.RawPath = "/"+database, ""
	return u.String()
}

// adminDatabase is the database of the URL as given, or postgres.
func (p pgServer) adminDatabase() string {
	if db := strings.TrimPrefix(p.base.Path, "/"); db != "" {
		return db
	}
	return "postgres"
}

// exec runs the statements in order on one connection to the admin
// database, each on its own (CREATE DATABASE runs in no transaction).
func (p pgServer) exec(ctx context.Context, sqls ...string) error {
	conn, err := pgx.Connect(ctx, p.url(p.adminDatabase()))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return err
		}
	}
	return nil
}

// createDatabase creates database name, then runs then (statements on
// it, such as its COMMENT) on the same connection.
func (p pgServer) createDatabase(ctx context.Context, name string, then ...string) error {
	if err := validIdentifier(name); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if p.ownServer {
		create += fileCopy
	}
	if err := p.exec(ctx, append([]string{create}, then...)...); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// fileCopy is the strategy of the databases made on a server the provider
// started: the template's files copied as files, between two checkpoints,
// rather than PostgreSQL 15's default WAL_LOG, which writes every page of
// the template through the WAL and takes about twice the CPU time per
// database (222 ms against 100 ms on a 2-core machine). Every run makes a
// database per database of its target file, beside the runs going on.
const fileCopy = " STRATEGY FILE_COPY"

// dropDatabase needs PostgreSQL 13 or later (WITH (FORCE)).
func (p pgServer) dropDatabase(ctx context.Context, name string) error {
	return dropDatabase(ctx, p.url(p.adminDatabase()), name)
}

// check connects and verifies that the user may create databases.
func (p pgServer) check(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, p.url(p.adminDatabase()))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var user string
	var may bool
	err = conn.QueryRow(ctx, `SELECT current_user, rolsuper OR rolcreatedb FROM pg_roles WHERE rolname = current_user`).Scan(&user, &may)
	if err != nil {
		return fmt.Errorf("read the user's role: %w", err)
	}
	if !may {
		return fmt.Errorf("user %s may not CREATE DATABASE (it needs SUPERUSER or CREATEDB): every scenario creates its own databases", user)
	}
	return nil
}

// amqpServer is a RabbitMQ broker reached by an AMQP URL; vhosts are
// swapped into the URL's path.
type amqpServer struct {
	base *url.URL // as given, host with a port
}

func (a amqpServer) url(vhost string) string {
	u := *a.base
	u.Path, u.RawPath = "/"+vhost, "/"+url.PathEscape(vhost)
	return u.String()
}

// password is the URL's password; "" without one.
func password(u *url.URL) string {
	if u == nil || u.User == nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
}

// user is the AMQP user, to whom a new vhost grants all permissions.
func (a amqpServer) user() string {
	if a.base.User != nil && a.base.User.Username() != "" {
		return a.base.User.Username()
	}
	return "guest" // amqp091-go's default
}

// check opens and closes one connection to the URL as given.
func (a amqpServer) check(ctx context.Context) error {
	timeout := probeTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	conn, err := amqp.DialConfig(a.base.String(), amqp.Config{Dial: amqp.DefaultDial(timeout)})
	if err != nil {
		return err
	}
	return conn.Close()
}

// mgmtAPI is a client of RabbitMQ's management HTTP API.
type mgmtAPI struct {
	base       string // scheme://host:port[/prefix], no credentials, no trailing slash
	user, pass string
	http       *http.Client
}

func newMgmtAPI(u *url.URL, defaultUser, defaultPass string) mgmtAPI {
	user, pass := defaultUser, defaultPass
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	b := *u
	b.User = nil
	b.RawQuery, b.Fragment = "", ""
	return mgmtAPI{
		base: strings.TrimSuffix(b.String(), "/"),
		user: user, pass: pass,
		http: &http.Client{Timeout: 10 * time.Second},
	}
}

// do calls the API. in, if not nil, is sent as JSON; out, if not nil,
// receives a JSON answer with status 200. A status not in want is an error
// with the answer's body.
func (m mgmtAPI) do(ctx context.Context, method, path string, in, out any, want ...int) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	// path is already escaped; %2F in it stays as it is.
	req, err := http.NewRequestWithContext(ctx, method, m.base+path, body)
	if err != nil {
		return 0, err
	}
	req.SetBasicAuth(m.user, m.pass)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	ok := false
	for _, w := range want {
		ok = ok || resp.StatusCode == w
	}
	if !ok {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return resp.StatusCode, &statusError{Method: method, Path: path, Status: resp.Status, Code: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// check verifies that the API answers and that its user may create vhosts
// (the administrator tag).
func (m mgmtAPI) check(ctx context.Context) error {
	var who struct {
		Name string          `json:"name"`
		Tags json.RawMessage `json:"tags"` // a list since 3.9, a comma-separated string before
	}
	code, err := m.do(ctx, http.MethodGet, "/api/whoami", nil, &who, http.StatusOK, http.StatusUnauthorized)
	if err != nil {
		return err
	}
	if code == http.StatusUnauthorized {
		return fmt.Errorf("user %s is refused (401): a wrong password, or a user without the administrator tag; one is needed to create and delete vhosts", m.user)
	}
	if !strings.Contains(string(who.Tags), "administrator") {
		return fmt.Errorf("user %s is not an administrator (tags %s): it cannot create and delete vhosts", who.Name, who.Tags)
	}
	return nil
}

// createVHost creates vhost name and grants user all permissions on it; it
// fails if the vhost exists.
func (m mgmtAPI) createVHost(ctx context.Context, name, user string) error {
	return m.createVHostDescribed(ctx, name, user, "")
}

// createVHostDescribed is createVHost with the vhost's description (its
// metadata, RabbitMQ 3.8 or later) set in the same request; "" sets none.
func (m mgmtAPI) createVHostDescribed(ctx context.Context, name, user, description string) error {
	if name == "" {
		return errors.New("create vhost: empty name")
	}
	// 201: created; 204: it already existed (PUT is an upsert). A loaded
	// node can take longer than the client's timeout to create a vhost, and
	// the PUT may still take effect: it is sent again, and after an attempt
	// whose answer never came a 204 is that attempt's vhost (the names are
	// the run's own), not somebody else's.
	var code int
	err := retryUnanswered(ctx, func(ctx context.Context) (err error) {
		var body any
		if description != "" {
			body = map[string]string{"description": description}
		}
		code, err = m.do(ctx, http.MethodPut, "/api/vhosts/"+url.PathEscape(name), body, nil, http.StatusCreated, http.StatusNoContent)
		return err
	}, func(unanswered int) {
		if unanswered > 0 && code == http.StatusNoContent {
			code = http.StatusCreated
		}
	})
	if err != nil {
		return fmt.Errorf("create vhost %q: %w", name, err)
	}
	if code == http.StatusNoContent {
		return fmt.Errorf("create vhost %q: %w", name, errVHostExists)
	}
	return m.grantAll(ctx, name, user)
}

// vhostRunning waits, up to vhostStartTimeout, until vhost name runs on
// every node of the broker (vhostDown).
func (m mgmtAPI) vhostRunning(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, vhostStartTimeout)
	defer cancel()
	if err := poll(ctx, func(ctx context.Context) error { return m.vhostDown(ctx, name, nil) }); err != nil {
		return fmt.Errorf("create vhost %q: %w", name, err)
	}
	return nil
}

// vhostDown says where vhost name does not run, among nodes (nil: every
// node the broker lists), starting it on a node that reports it stopped: a
// vhost is started on each node when it is created (or the node boots),
// and that start can fail (it has a time limit), and the node then refuses
// every connection to the vhost ("vhost is down": a client sees its
// connection.open answered with a close) until it is started. A node
// listed as down, or not listed (cut off by a partition), starts its
// vhosts when it comes back. nil once it runs everywhere asked.
func (m mgmtAPI) vhostDown(ctx context.Context, name string, nodes []string) error {
	var v struct {
		State map[string]string `json:"cluster_state"`
	}
	if _, err := m.do(ctx, http.MethodGet, "/api/vhosts/"+url.PathEscape(name), nil, &v, http.StatusOK); err != nil {
		return err
	}
	if nodes == nil {
		nodes = slices.Sorted(maps.Keys(v.State))
	}
	var down []string
	for _, n := range nodes {
		switch v.State[n] {
		case "running", "nodedown", "":
		case "stopped":
			down = append(down, n)
			// Best effort: the next poll says whether it took.
			_, _ = m.do(ctx, http.MethodPost, "/api/vhosts/"+url.PathEscape(name)+"/start/"+url.PathEscape(n), nil, nil, http.StatusNoContent, http.StatusOK)
		default:
			down = append(down, n)
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("vhost %q not running on %v (%v)", name, down, v.State)
	}
	return nil
}

// vhostListed is a vhost as GET /api/vhosts lists it.
type vhostListed struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// vhosts lists the broker's vhosts.
func (m mgmtAPI) vhosts(ctx context.Context) ([]vhostListed, error) {
	var vhosts []vhostListed
	if _, err := m.do(ctx, http.MethodGet, "/api/vhosts", nil, &vhosts, http.StatusOK); err != nil {
		return nil, fmt.Errorf("list vhosts: %w", err)
	}
	return vhosts, nil
}

// errVHostExists is createVHost's error for a vhost that exists.
var errVHostExists = errors.New("it already exists")

// grantAll grants user all permissions on vhost name.
func (m mgmtAPI) grantAll(ctx context.Context, name, user string) error {
	perms := map[string]string{"configure": ".*", "write": ".*", "read": ".*"}
	err := retryUnanswered(ctx, func(ctx context.Context) error {
		_, err := m.do(ctx, http.MethodPut, "/api/permissions/"+url.PathEscape(name)+"/"+url.PathEscape(user), perms, nil,
			http.StatusCreated, http.StatusNoContent)
		return err
	}, nil)
	if err != nil {
		return fmt.Errorf("create vhost %q: grant %s: %w", name, user, err)
	}
	return nil
}

// unansweredAttempts is how many times an idempotent management call is
// sent when no answer comes: a node under load answers vhost changes in
// seconds, and a run must not end indeterminate for one slow answer.
const unansweredAttempts = 3

// retryUnanswered calls call until it gets an answer (nil, or an error
// carrying an HTTP status), at most unansweredAttempts times, and stops
// at once when ctx ends. after, if not nil, is told how many attempts
// went unanswered before the last one.
func retryUnanswered(ctx context.Context, call func(context.Context) error, after func(unanswered int)) error {
	var err error
	for n := 0; n < unansweredAttempts; n++ {
		err = call(ctx)
		var status *statusError
		if err == nil || errors.As(err, &status) || ctx.Err() != nil {
			if after != nil {
				after(n)
			}
			return err
		}
	}
	return fmt.Errorf("no answer after %d attempts: %w", unansweredAttempts, err)
}

// statusError is an answer with a status the caller did not want.
type statusError struct {
	Method, Path, Status, Body string
	Code                       int
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: %s: %s", e.Method, e.Path, e.Status, e.Body)
}

// deleteVHost deletes vhost name; a missing vhost is not an error.
func (m mgmtAPI) deleteVHost(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("delete vhost: empty name")
	}
	err := retryUnanswered(ctx, func(ctx context.Context) error {
		_, err := m.do(ctx, http.MethodDelete, "/api/vhosts/"+url.PathEscape(name), nil, nil,
			http.StatusNoContent, http.StatusNotFound)
		return err
	}, nil)
	if err != nil {
		return fmt.Errorf("delete vhost %q: %w", name, err)
	}
	return nil
}

// traceVHost turns the firehose of vhost name on or off on this node (a
// node's own setting: rabbit_trace keeps it in the node's environment),
// keeping the vhost's description (description; "" for none). A PUT is
// an upsert: one that created the vhost (it was gone) deletes it again.
func (m mgmtAPI) traceVHost(ctx context.Context, name, description string, on bool) error {
	body := map[string]any{"tracing": on}
	if description != "" {
		body["description"] = description
	}
	code, err := m.do(ctx, http.MethodPut, "/api/vhosts/"+url.PathEscape(name), body, nil, http.StatusCreated, http.StatusNoContent)
	if err != nil {
		return fmt.Errorf("trace vhost %q: %w", name, err)
	}
	if code == http.StatusCreated {
		return errors.Join(fmt.Errorf("trace vhost %q: %w", name, ErrNotFound), m.deleteVHost(ctx, name))
	}
	return nil
}

func (m mgmtAPI) queue(ctx context.Context, vhost, queue string) (history.QueueInfo, error) {
	var q struct {
		Messages  int `json:"messages"`
		Ready     int `json:"messages_ready"`
		Unacked   int `json:"messages_unacknowledged"`
		Consumers int `json:"consumers"`
		Stats     struct {
			Redeliver  int `json:"redeliver"`
			DeliverGet int `json:"deliver_get"`
			Ack        int `json:"ack"`
		} `json:"message_stats"`
		Type      string `json:"type"`
		Arguments struct {
			DeliveryLimit int    `json:"x-delivery-limit"`
			DeadLetter    string `json:"x-dead-letter-exchange"`
			MaxLength     int    `json:"x-max-length"`
			Overflow      string `json:"x-overflow"`
		} `json:"arguments"`
		Policy struct {
			DeliveryLimit int    `json:"delivery-limit"`
			DeadLetter    string `json:"dead-letter-exchange"`
			MaxLength     int    `json:"max-length"`
			Overflow      string `json:"overflow"`
		} `json:"effective_policy_definition"`
	}
	path := "/api/queues/" + url.PathEscape(vhost) + "/" + url.PathEscape(queue)
	code, err := m.do(ctx, http.MethodGet, path, nil, &q, http.StatusOK, http.StatusNotFound)
	if err != nil {
		return history.QueueInfo{}, fmt.Errorf("queue %q in vhost %q: %w", queue, vhost, err)
	}
	if code == http.StatusNotFound {
		return history.QueueInfo{}, fmt.Errorf("queue %q in vhost %q: %w", queue, vhost, ErrNotFound)
	}
	// A queue's own argument wins over a policy's, as RabbitMQ applies
	// them, except for the length limit: the lower of the two holds.
	maxLength := cmp.Or(q.Arguments.MaxLength, q.Policy.MaxLength)
	if q.Arguments.MaxLength > 0 && q.Policy.MaxLength > 0 {
		maxLength = min(q.Arguments.MaxLength, q.Policy.MaxLength)
	}
	return history.QueueInfo{Messages: q.Messages, Ready: q.Ready, Unacked: q.Unacked, Consumers: q.Consumers, Redelivered: q.Stats.Redeliver, Delivered: q.Stats.DeliverGet, Acked: q.Stats.Ack,
		DeliveryLimit:      cmp.Or(q.Arguments.DeliveryLimit, q.Policy.DeliveryLimit),
		DeadLetterExchange: cmp.Or(q.Arguments.DeadLetter, q.Policy.DeadLetter),
		Type:               q.Type, MaxLength: maxLength, Overflow: cmp.Or(q.Arguments.Overflow, q.Policy.Overflow)}, nil
}

func (m mgmtAPI) vhost(ctx context.Context, vhost string) (VHostInfo, error) {
	var v struct {
		Stats struct {
			Publish          int `json:"publish"`
			ReturnUnroutable int `json:"return_unroutable"`
			DropUnroutable   int `json:"drop_unroutable"`
		} `json:"message_stats"`
	}
	code, err := m.do(ctx, http.MethodGet, "/api/vhosts/"+url.PathEscape(vhost), nil, &v, http.StatusOK, http.StatusNotFound)
	if err != nil {
		return VHostInfo{}, fmt.Errorf("vhost %q: %w", vhost, err)
	}
	if code == http.StatusNotFound {
		return VHostInfo{}, fmt.Errorf("vhost %q: %w", vhost, ErrNotFound)
	}
	return VHostInfo{Published: v.Stats.Publish, Unroutable: v.Stats.ReturnUnroutable + v.Stats.DropUnroutable}, nil
}

// waitBroker polls until the broker answers (AMQP and the management API)
// when up is true, or until AMQP no longer answers when up is false. It is
// bounded by ctx and timeout.
func waitBroker(ctx context.Context, a amqpServer, m mgmtAPI, up bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, probeTimeout)
		err := a.check(pctx)
		if err == nil && up {
			_, err = m.do(pctx, http.MethodGet, "/api/overview", nil, nil, http.StatusOK)
		}
		pcancel()
		// Down means refused or closed, not slow: a probe that timed out
		// (amqp091 reports a handshake that timed out as a frame error,
		// not as a timeout) says nothing about whether the broker is gone.
		if up && err == nil || !up && gone(err) && ctx.Err() == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if up {
				return fmt.Errorf("wait for the broker at %s to answer: %w (last probe: %v)", a.base.Host, ctx.Err(), last)
			}
			return fmt.Errorf("wait for the broker at %s to go away: %w (it still answers)", a.base.Host, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// parseServiceURL parses raw, named by variable, and checks its scheme and
// host; a missing port becomes defaultPort[scheme]. Errors never repeat the
// URL, which may hold a password.
func parseServiceURL(variable, raw string, defaultPort map[string]string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("%s is not set", variable)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("%s is not a URL: %v", variable, err)
	}
	port, ok := defaultPort[u.Scheme]
	if !ok {
		var schemes []string
		for s := range defaultPort {
			schemes = append(schemes, s+"://")
		}
		slices.Sort(schemes)
		return nil, fmt.Errorf("%s: scheme %q, want %s", variable, u.Scheme, strings.Join(schemes, " or "))
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%s: no host", variable)
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), port)
	}
	return u, nil
}

// gone says whether a probe's error shows the broker gone: the connection
// refused, or closed before the handshake (a port forwarder whose broker
// is down accepts, then closes).
func gone(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ae *amqp.Error
	return errors.As(err, &ae) && (ae.Reason == io.EOF.Error() || strings.Contains(ae.Reason, "connection reset"))
}

// OwnConnectionName is the connection_name faultline gives its own AMQP
// connections (OwnAMQPConfig), so that counting a run's clients
// (ClientConnections) leaves them out; OwnApplicationName is the same
// for its PostgreSQL sessions.
const (
	OwnConnectionName  = "faultline"
	OwnApplicationName = "faultline"
)

// OwnAMQPConfig is the amqp091 configuration of a connection of
// faultline's own: dialled within timeout, named OwnConnectionName.
func OwnAMQPConfig(timeout time.Duration) amqp.Config {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(OwnConnectionName)
	return amqp.Config{Dial: amqp.DefaultDial(timeout), Properties: props}
}

// clientConnections counts vhost's connections not named
// OwnConnectionName. The list comes from the broker's connection
// tracking, not from its statistics: a connection shows as soon as it is
// open.
func (m mgmtAPI) clientConnections(ctx context.Context, vhost string) (int, error) {
	var conns []struct {
		ClientProperties struct {
			ConnectionName string `json:"connection_name"`
		} `json:"client_properties"`
	}
	path := "/api/vhosts/" + url.PathEscape(vhost) + "/connections"
	if _, err := m.do(ctx, http.MethodGet, path, nil, &conns, http.StatusOK); err != nil {
		return 0, fmt.Errorf("connections of vhost %q: %w", vhost, err)
	}
	n := 0
	for _, c := range conns {
		if c.ClientProperties.ConnectionName != OwnConnectionName {
			n++
		}
	}
	return n, nil
}

// OwnSession is a PostgreSQL URL (as PostgresURL gives) whose sessions
// carry application_name OwnApplicationName, so that counting a run's
// client sessions leaves faultline's own out. A URL that does not parse
// is returned as it is: connecting with it fails with pgx's own error.
func OwnSession(pgURL string) string {
	u, err := url.Parse(pgURL)
	if err != nil {
		return pgURL
	}
	q := u.Query()
	q.Set("application_name", OwnApplicationName)
	u.RawQuery = q.Encode()
	return u.String()
}
