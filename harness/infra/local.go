package infra

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/faultline-dev/faultline/harness/ports"
	"github.com/faultline-dev/faultline/harness/safe"
	"github.com/faultline-dev/faultline/proxies"
)

// LocalOptions configures StartLocal.
type LocalOptions struct {
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// KeepDir keeps the temporary folder (logs, data) after Stop, for
	// debugging. It is marked with a KEEP file so no later sweep removes it.
	KeepDir bool
	// Ports hands out the services' ports; nil: an allocator of its own.
	Ports *ports.Allocator
	// Standby gives PostgreSQL a streaming standby: "" (StandbyNone) none,
	// "async" (StandbyAsync) or "sync" (StandbySync, the primary's commits
	// wait for it). With one, Local.Replicated returns the Replicated
	// provider. See local_standby.go.
	Standby string
	// BrokerNodes is how many RabbitMQ nodes to start: 0 or 1, one node
	// (Infra only); 2 or more, a cluster, and the *Local implements
	// Cluster (three is what production runs, see StartLocal).
	BrokerNodes int
	// Proxies is the Toxiproxy server the cluster's inter-node
	// (Erlang distribution) links go through, so that Partition is a real
	// network cut. Required when BrokerNodes > 1; the caller stops it after
	// the Local.
	Proxies *proxies.Server
}

// Timeouts of the local provider. Start-ups are bounded by them and by the
// caller's context, whichever ends first.
const (
	// startTimeout bounds one service, from spawn to ready. It is a bound,
	// not a wait: a quiet machine boots RabbitMQ in about 10 s, but make
	// test starts a broker per test binary, several at once, and a boot
	// then takes several times as long.
	startTimeout   = 180 * time.Second
	pgFastShutdown = 5 * time.Second  // SIGINT (fast shutdown) before SIGKILL
	killWait       = 10 * time.Second // for SIGKILLed processes to be gone
	probeTimeout   = 2 * time.Second  // one readiness probe
	pollInterval   = 100 * time.Millisecond
)

// Local is the local infrastructure provider: a private PostgreSQL and a
// private RabbitMQ node started from the installed binaries. It implements
// Infra.
type Local struct {
	dir     string // resolved path of the temporary folder
	logw    io.Writer
	keepDir bool
	alloc   *ports.Allocator
	cred    *syscall.Credential // nil: children run as this process's user
	http    *http.Client

	pgPort int
	pgIn   pgInstall // the PostgreSQL it runs (findPostgres), set before start-up

	// Credentials of this run, random, set by prepare and fixed after: no
	// service trusts a connection without them (see credentials).
	pgPass           string // of the superuser postgres (scram-sha-256, TCP and socket)
	rmqUser, rmqPass string // the broker's only user, an administrator; there is no guest
	cookie           string // the cluster's Erlang cookie; "" for one node (Erlang makes its own)

	// nodes are the broker's nodes, one unless a cluster; fixed after
	// prepare (their children are guarded by mu).
	nodes []*rabbitNode
	// proxies carries a cluster's inter-node links, links[from][to] the
	// one node from dials node to through; set once by startRabbit.
	proxies *proxies.Server
	links   [][]*proxies.Link

	pgTook, rabbitTook time.Duration            // start-up of each, set once by StartLocal
	rabbitParts        map[string]time.Duration // a cluster's first node and joins, set once

	rep *standby // nil without LocalOptions.Standby

	mu      sync.Mutex // guards the fields below and the nodes' children; held by Stop
	pg      *child
	regs    []net.Conn // a cluster's epmd registrations, open while they hold
	stopped bool
	stopErr error
}

var (
	_ Infra             = (*Local)(nil)
	_ StartTimer        = (*Local)(nil)
	_ Replicable        = (*Local)(nil)
	_ Cluster           = (*Local)(nil)
	_ DatabaseRestarter = (*Local)(nil)
)

// Replicate implements Replicable: a second private PostgreSQL and
// RabbitMQ, as StartLocal starts them, on l's port allocator: with a
// standby as l has (then the Infra is a *LocalReplicated), and a cluster
// of as many nodes, on the same Toxiproxy server, where l is one.
func (l *Local) Replicate(ctx context.Context) (Infra, error) {
	mode := StandbyNone
	if l.rep != nil {
		mode = l.rep.mode
	}
	in, err := StartLocal(ctx, LocalOptions{Log: l.logw, KeepDir: l.keepDir, Ports: l.alloc, Standby: mode,
		BrokerNodes: len(l.nodes), Proxies: l.proxies})
	if err != nil {
		return nil, err
	}
	if r, ok := in.Replicated(); ok {
		return r, nil
	}
	return in, nil
}

// StartLocal starts a private PostgreSQL (13 or later, the one findPostgres
// finds: FAULTLINE_PG_BIN, pg_config, PATH, /usr/lib/postgresql) and
// RabbitMQ 3.10 (with the management plugin) on free loopback ports in a new folder
// $TMPDIR/faultline-local-*, and waits until both answer. It first removes
// folders and processes left by earlier runs that died without Stop.
//
// When running as root, PostgreSQL and RabbitMQ run as the user named by
// FAULTLINE_RUN_AS, or nobody. Every child runs in its own process group and
// is SIGKILLed by the kernel if the test binary dies. ctx bounds the
// start-up only; the services live until Stop.
//
// With BrokerNodes > 1 the broker is a cluster (see local_cluster.go):
// the first node starts alone, the others join it side by side, and
// their distribution traffic goes through links on opts.Proxies. The
// *Local then implements Cluster; with one node, its Cluster methods know
// node 0 only and Partition fails.
func StartLocal(ctx context.Context, opts LocalOptions) (*Local, error) {
	begin := time.Now()
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	alloc := opts.Ports
	if alloc == nil {
		alloc = ports.New()
	}
	if err := checkStandbyMode(opts.Standby); err != nil {
		return nil, fmt.Errorf("local infra: %w", err)
	}
	n := opts.BrokerNodes
	switch {
	case n < 0:
		return nil, fmt.Errorf("local infra: BrokerNodes %d: want 0, 1 or a cluster's count", n)
	case n == 0:
		n = 1
	case n > 1 && opts.Proxies == nil:
		return nil, fmt.Errorf("local infra: a cluster of %d nodes needs LocalOptions.Proxies for its inter-node links", n)
	}
	l := &Local{logw: logw, keepDir: opts.KeepDir, alloc: alloc, http: &http.Client{Timeout: 10 * time.Second},
		nodes: make([]*rabbitNode, n), proxies: opts.Proxies}
	if opts.Standby != StandbyNone {
		l.rep = &standby{mode: opts.Standby}
	}
	pgIn, err := findPostgres(ctx, hostPGSearch())
	if err != nil {
		return nil, fmt.Errorf("local infra: %w", err)
	}
	l.pgIn = pgIn
	sweepStale(os.TempDir(), l.logf)

	if err := l.prepare(); err != nil {
		if l.dir != "" {
			_ = l.Stop(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("local infra: %w", err)
	}

	var (
		wg                 sync.WaitGroup
		pgErr, rmqErr      error
		pgTook, rabbitTook time.Duration
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		t := time.Now()
		pgErr = safe.Do("start postgres", func() error { return l.startPostgres(ctx) })
		if pgErr != nil {
			pgErr = fmt.Errorf("%w (%s)", pgErr, l.pgIn)
		}
		pgTook = time.Since(t)
	}()
	go func() {
		defer wg.Done()
		t := time.Now()
		rmqErr = safe.Do("start rabbitmq", func() error { return l.startRabbit(ctx) })
		rabbitTook = time.Since(t)
	}()
	wg.Wait()
	if err := errors.Join(pgErr, rmqErr); err != nil {
		if stopErr := l.Stop(context.WithoutCancel(ctx)); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", stopErr))
		}
		return nil, fmt.Errorf("local infra: %w", err)
	}
	l.pgTook, l.rabbitTook = pgTook, rabbitTook
	l.logf("local infra: postgres %s (%s), rabbitmq %s (%d node(s), total %s) in %s",
		pgTook.Round(100*time.Millisecond), l.pgIn, rabbitTook.Round(100*time.Millisecond), len(l.nodes),
		time.Since(begin).Round(100*time.Millisecond), l.dir)
	return l, nil
}

// StartTimes implements StartTimer: how long PostgreSQL and RabbitMQ took
// to answer at start-up (side by side, so the slower is the start-up).
// With a standby, "postgres" includes it and "postgres-standby" is the
// part from the primary answering to the standby streaming. A cluster
// adds "rabbitmq-first", its first node alone, and "rabbitmq-join", the
// others joining it until all see each other.
func (l *Local) StartTimes() map[string]time.Duration {
	out := map[string]time.Duration{"postgres": l.pgTook, "rabbitmq": l.rabbitTook}
	if l.rep != nil {
		out["postgres-standby"] = l.rep.took
	}
	for k, v := range l.rabbitParts {
		out[k] = v
	}
	return out
}

// prepare creates the folder with its owner.pid and configuration, picks
// the ports and the user to run as.
func (l *Local) prepare() error {
	uid, gid, cred, err := runAs()
	if err != nil {
		return err
	}
	l.cred = cred

	dir, err := os.MkdirTemp("", dirPattern)
	if err != nil {
		return fmt.Errorf("create folder: %w", err)
	}
	l.dir = dir
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		l.dir = real
	}
	self, err := readProc(os.Getpid())
	if err != nil {
		return fmt.Errorf("read own start time: %w", err)
	}
	if err := writePidFile(filepath.Join(l.dir, ownerFile), os.Getpid(), self.start); err != nil {
		return fmt.Errorf("owner: %w", err)
	}
	if l.keepDir {
		if err := os.WriteFile(filepath.Join(l.dir, keepFile), []byte("LocalOptions.KeepDir\n"), 0o644); err != nil {
			return fmt.Errorf("keep marker: %w", err)
		}
	}

	if l.pgPass, l.rmqUser, l.rmqPass, err = credentials(); err != nil {
		return err
	}
	// The server's unix socket: only the user it runs as may reach it (the
	// folder above is 0700 too; this one says so where the socket is).
	if err := os.Mkdir(l.socketDir(), 0o700); err != nil {
		return fmt.Errorf("postgres socket folder: %w", err)
	}

	if l.pgPort, err = l.alloc.Port(); err != nil {
		return fmt.Errorf("service port: %w", err)
	}
	if len(l.nodes) > 1 {
		if l.cookie, err = erlangCookie(); err != nil {
			return err
		}
	}

	if l.rep != nil {
		if err := l.prepareStandby(); err != nil {
			return err
		}
	}
	for i := range l.nodes {
		n := &rabbitNode{i: i}
		l.nodes[i] = n
		for _, p := range []*int{&n.amqpPort, &n.mgmtPort, &n.distPort, &n.epmdPort} {
			if *p, err = l.alloc.Port(); err != nil {
				return fmt.Errorf("service port: %w", err)
			}
		}
		if err := l.prepareRabbit(n); err != nil {
			return err
		}
	}
	if cred != nil {
		if err := chownTree(l.dir, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// credentials makes a run's random PostgreSQL password and RabbitMQ user
// and password: 24 random bytes (48 hex digits) for each password, from
// crypto/rand, so another local user can neither guess nor reuse them.
// Hex needs no escaping in a URL, a pwfile or rabbitmq.conf.
func credentials() (pgPass, rmqUser, rmqPass string, err error) {
	var b [24 + 6 + 24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", "", fmt.Errorf("random credentials: %w", err)
	}
	return hex.EncodeToString(b[:24]), "faultline-" + hex.EncodeToString(b[24:30]), hex.EncodeToString(b[30:]), nil
}

// Secrets implements Infra: the run's PostgreSQL and RabbitMQ passwords,
// the replication role's where there is a standby, and a cluster's
// Erlang cookie.
func (l *Local) Secrets() []string {
	out := []string{l.pgPass, l.rmqPass}
	if l.rep != nil {
		out = append(out, l.rep.pass)
	}
	if l.cookie != "" {
		out = append(out, l.cookie)
	}
	return out
}

// runAs returns the user children run as: when root, FAULTLINE_RUN_AS or
// nobody (PostgreSQL refuses to run as root); otherwise the current user
// (cred nil).
func runAs() (uid, gid int, cred *syscall.Credential, err error) {
	if os.Geteuid() != 0 {
		return os.Geteuid(), os.Getegid(), nil, nil
	}
	name := os.Getenv("FAULTLINE_RUN_AS")
	if name == "" {
		name = "nobody"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("user to run services as (FAULTLINE_RUN_AS): %w", err)
	}
	uid, err = strconv.Atoi(u.Uid)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("user %s: uid %q: %w", name, u.Uid, err)
	}
	gid, err = strconv.Atoi(u.Gid)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("user %s: gid %q: %w", name, u.Gid, err)
	}
	if uid == 0 {
		return 0, 0, nil, fmt.Errorf("user %s is root: PostgreSQL refuses to run as root; set FAULTLINE_RUN_AS to an unprivileged user", name)
	}
	return uid, gid, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

func chownTree(dir string, uid, gid int) error {
	err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("chown folder to uid %d: %w", uid, err)
	}
	return nil
}

func (l *Local) logf(format string, args ...any) {
	fmt.Fprintf(l.logw, format+"\n", args...)
}

// Name implements Infra.
func (l *Local) Name() string { return "local" }

// CanRestartBroker implements Infra: the local broker can be crashed and
// started again.
func (l *Local) CanRestartBroker() bool { return true }

// Dir is the temporary folder holding data and logs (*.log) of the services.
func (l *Local) Dir() string { return l.dir }

// waitReady polls probe until it succeeds, bounded by ctx and startTimeout.
// If c exits first it fails at once with the tail of c's log.
func waitReady(ctx context.Context, c *child, what string, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, probeTimeout)
		err := probe(pctx)
		pcancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-c.done:
			return fmt.Errorf("wait for %s: %w", what, c.exitError())
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w (last probe: %v); last output of %s:\n%s", what, ctx.Err(), last, c.name, c.tail())
		case <-time.After(pollInterval):
		}
	}
}

// Stop implements Infra. It SIGKILLs the brokers and epmds (and closes a
// cluster's epmd registrations and removes its inter-node links), shuts PostgreSQL
// down fast (SIGINT, then SIGKILL after 5 s or when ctx ends), kills any
// process still working in the folder, checks that no port still listens,
// and removes the folder (unless KeepDir). Killing does not wait for ctx:
// only the graceful part is bounded by it. A second Stop returns the first
// one's result.
func (l *Local) Stop(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return l.stopErr
	}
	l.stopped = true
	begin := time.Now()

	var errs []error
	groups := map[int]bool{}
	brokers := l.brokerChildren()
	for _, c := range brokers {
		groups[c.pid] = true
		c.kill(syscall.SIGKILL)
	}
	if l.rep != nil && l.rep.fwd != nil {
		if err := l.rep.fwd.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range l.regs {
		_ = c.Close()
	}
	l.regs = nil
	if l.rep != nil && l.rep.front != nil {
		if err := l.rep.front.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	pgs := l.pgChildren()
	for _, c := range pgs {
		groups[c.pid] = true
		c.signalLeader(syscall.SIGINT)
	}
	// Side by side: a standby's shutdown does not wait for the primary's.
	gctx, gcancel := context.WithTimeout(ctx, pgFastShutdown)
	for _, c := range pgs {
		if err := c.wait(gctx); err != nil {
			l.logf("local infra: %s fast shutdown: %v; killing it", c.name, err)
			c.kill(syscall.SIGKILL)
		}
	}
	gcancel()
	kctx, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	for _, c := range append(brokers, pgs...) {
		if err := c.wait(kctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := l.removeLinks(kctx); err != nil {
		errs = append(errs, err)
	}
	if left := killStrays(l.dir, groups, killWait); len(left) > 0 {
		errs = append(errs, fmt.Errorf("processes %v survive SIGKILL", left))
	}
	if err := checkPortsClosed(l.ports(), l.dir); err != nil {
		errs = append(errs, err)
	} else {
		l.alloc.Free(l.ports()...) // every service is gone: the ports are anyone's again
	}
	if l.dir != "" {
		if l.keepDir {
			l.logf("local infra: kept %s", l.dir)
		} else if err := os.RemoveAll(l.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove folder: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		l.stopErr = fmt.Errorf("local infra: stop: %w", err)
		return l.stopErr
	}
	l.logf("local infra: stopped in %s", time.Since(begin).Round(10*time.Millisecond))
	return nil
}

// pgChildren are the PostgreSQL servers' postmasters: the primary's and
// the standby's.
func (l *Local) pgChildren() []*child {
	var out []*child
	if l.pg != nil {
		out = append(out, l.pg)
	}
	if l.rep != nil && l.rep.child != nil {
		out = append(out, l.rep.child)
	}
	return out
}

func (l *Local) ports() []int {
	all := []int{l.pgPort}
	for _, n := range l.nodes {
		if n != nil {
			all = append(all, n.amqpPort, n.mgmtPort, n.distPort, n.epmdPort)
		}
	}
	var out []int
	if l.rep != nil {
		all = append(all, l.rep.port)
	}
	for _, p := range all {
		if p != 0 {
			out = append(out, p)
		}
	}
	return out
}

// brokerChildren are the nodes' brokers and epmds that were started; l.mu
// is held.
func (l *Local) brokerChildren() []*child {
	var out []*child
	for _, n := range l.nodes {
		if n == nil {
			continue
		}
		for _, c := range []*child{n.rabbit, n.epmd} {
			if c != nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// checkPortsClosed verifies that nothing of ours accepts connections on the
// loopback ports any more, allowing a second for sockets to close. A port
// that listens again because another program (another test binary's
// infrastructure, say) took it after ours let it go is not ours: it is
// reported only when its listener runs in dir or cannot be told.
func checkPortsClosed(ports []int, dir string) error {
	deadline := time.Now().Add(time.Second)
	for {
		var open []string
		for _, p := range ports {
			c, err := net.DialTimeout("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), 200*time.Millisecond)
			if err == nil {
				c.Close()
				open = append(open, strconv.Itoa(p))
			}
		}
		if len(open) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var ours []string
			for _, p := range open {
				port, _ := strconv.Atoi(p)
				if pid, ok := listenerPid(port); ok && !inDir(pid, dir) {
					continue // someone else's now
				}
				ours = append(ours, p)
			}
			if len(ours) == 0 {
				return nil
			}
			return fmt.Errorf("ports %s still listen after stop", strings.Join(ours, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pids returns the live processes this provider runs (for tests and
// diagnostics): its children's groups and whatever works in its folder.
func (l *Local) pids() []int {
	l.mu.Lock()
	groups := map[int]bool{}
	cs := append(l.brokerChildren(), l.pgChildren()...)
	for _, c := range cs {
		if !c.exited() {
			groups[c.pid] = true
		}
	}
	l.mu.Unlock()
	var out []int
	for _, p := range strays(l.dir, groups) {
		out = append(out, p.pid)
	}
	return out
}
