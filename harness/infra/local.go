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
}

// Timeouts of the local provider. Start-ups are bounded by them and by the
// caller's context, whichever ends first.
const (
	// startTimeout bounds one service, from spawn to ready. It is a bound,
	// not a wait: a quiet machine boots RabbitMQ in about 10 s, but make
	// test starts a broker per test binary, two at once on two cores, and
	// one such boot stalled 40 s between two of its steps and ran out of
	// 90 s (system/variant).
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

	pgPort, amqpPort, mgmtPort, distPort, epmdPort int

	// Credentials of this run, random, set by prepare and fixed after: no
	// service trusts a connection without them (see credentials).
	pgPass           string // of the superuser postgres (scram-sha-256, TCP and socket)
	rmqUser, rmqPass string // the broker's only user, an administrator; there is no guest

	rabbitArgv, rabbitEnv []string

	pgTook, rabbitTook time.Duration // start-up of each, set once by StartLocal

	mu      sync.Mutex // guards the fields below; held by broker restarts and Stop
	pg      *child
	epmd    *child
	rabbit  *child
	stopped bool
	stopErr error
}

var (
	_ Infra      = (*Local)(nil)
	_ StartTimer = (*Local)(nil)
)

// StartLocal starts a private PostgreSQL 15 and RabbitMQ 3.10 (with the
// management plugin) on free loopback ports in a new folder
// $TMPDIR/faultline-local-*, and waits until both answer. It first removes
// folders and processes left by earlier runs that died without Stop.
//
// When running as root, PostgreSQL and RabbitMQ run as the user named by
// FAULTLINE_RUN_AS, or nobody. Every child runs in its own process group and
// is SIGKILLed by the kernel if the test binary dies. ctx bounds the
// start-up only; the services live until Stop.
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
	l := &Local{logw: logw, keepDir: opts.KeepDir, alloc: alloc, http: &http.Client{Timeout: 10 * time.Second}}
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
	l.logf("local infra: postgres %s, rabbitmq %s (total %s) in %s",
		pgTook.Round(100*time.Millisecond), rabbitTook.Round(100*time.Millisecond),
		time.Since(begin).Round(100*time.Millisecond), l.dir)
	return l, nil
}

// StartTimes implements StartTimer: how long PostgreSQL and RabbitMQ took
// to answer at start-up (side by side, so the slower is the start-up).
func (l *Local) StartTimes() map[string]time.Duration {
	return map[string]time.Duration{"postgres": l.pgTook, "rabbitmq": l.rabbitTook}
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

	for _, p := range []*int{&l.pgPort, &l.amqpPort, &l.mgmtPort, &l.distPort, &l.epmdPort} {
		if *p, err = l.alloc.Port(); err != nil {
			return fmt.Errorf("service port: %w", err)
		}
	}

	if err := l.prepareRabbit(); err != nil {
		return err
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

// Secrets implements Infra: the run's PostgreSQL and RabbitMQ passwords.
func (l *Local) Secrets() []string { return []string{l.pgPass, l.rmqPass} }

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

// Stop implements Infra. It SIGKILLs the broker and epmd, shuts PostgreSQL
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
	for _, c := range []*child{l.rabbit, l.epmd} {
		if c == nil {
			continue
		}
		groups[c.pid] = true
		c.kill(syscall.SIGKILL)
	}
	if l.pg != nil {
		groups[l.pg.pid] = true
		l.pg.signalLeader(syscall.SIGINT)
		gctx, cancel := context.WithTimeout(ctx, pgFastShutdown)
		if err := l.pg.wait(gctx); err != nil {
			l.logf("local infra: postgres fast shutdown: %v; killing it", err)
			l.pg.kill(syscall.SIGKILL)
		}
		cancel()
	}
	kctx, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	for _, c := range []*child{l.rabbit, l.epmd, l.pg} {
		if c == nil {
			continue
		}
		if err := c.wait(kctx); err != nil {
			errs = append(errs, err)
		}
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

func (l *Local) ports() []int {
	var out []int
	for _, p := range []int{l.pgPort, l.amqpPort, l.mgmtPort, l.distPort, l.epmdPort} {
		if p != 0 {
			out = append(out, p)
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
	for _, c := range []*child{l.pg, l.epmd, l.rabbit} {
		if c != nil && !c.exited() {
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
