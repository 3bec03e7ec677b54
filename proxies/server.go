package proxies

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/faultline-dev/faultline/harness/ports"
	"github.com/faultline-dev/faultline/proxies/toxiserver"
)

const (
	// startTimeout bounds StartServer when ctx has no earlier deadline.
	startTimeout = 30 * time.Second
	// startAttempts: the API port is reserved (harness/ports) and closed
	// for the server to bind, so only a program binding that very number
	// can take it in between; the server then exits and is started again
	// on a new port.
	startAttempts = 3
	pollInterval  = 20 * time.Millisecond
)

// SelfServer is the binary StartServer runs as the Toxiproxy server: the
// running one. It links this package, hence package toxiserver, so started
// with toxiserver.Marker it is the server (see toxiserver); nothing is
// built at run time.
func SelfServer() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("toxiproxy server: the running binary: %w", err)
	}
	return exe, nil
}

// Server is a running Toxiproxy server process.
type Server struct {
	cmd     *exec.Cmd
	apiAddr string
	client  *toxiproxy.Client
	// ports reserves the API's port and every link's listening port: a
	// link's port stays reserved while it is down (Toxiproxy closes its
	// listener and binds the same port again on Up), and is freed when the
	// link is removed or the server stops.
	ports *ports.Allocator

	linksMu sync.Mutex
	links   map[string]string // link name → its listening address

	exited  chan struct{} // closed once the process has exited and been reaped
	waitErr error         // cmd.Wait's result; read only after exited is closed

	stopOnce sync.Once
	stopErr  error
}

// ServerOption configures StartServer.
type ServerOption func(*serverConfig)

type serverConfig struct {
	logPath string
	level   string
}

// DefaultLogLevel is the server's log level unless WithLogLevel says
// otherwise: Toxiproxy logs every connection at info level, and its errors
// (an upstream it cannot dial, as while the broker restarts) are what is
// worth keeping.
const DefaultLogLevel = "error"

// WithLogFile appends the server's output (zerolog JSON lines, on its stdout
// and stderr) to the file at path, created with mode 0644 if need be.
// Without it the output is discarded.
func WithLogFile(path string) ServerOption {
	return func(c *serverConfig) { c.logPath = path }
}

// WithLogLevel sets the server's log level (LOG_LEVEL in its environment):
// trace, debug, info, warn, error, fatal, panic or disabled.
func WithLogLevel(level string) ServerOption {
	return func(c *serverConfig) { c.level = level }
}

// logLevels are the levels toxiproxy v2.5.0's server accepts in LOG_LEVEL
// (zerolog.ParseLevel); on any other value it logs that, then logs at every
// level.
var logLevels = []string{"trace", "debug", "info", "warn", "error", "fatal", "panic", "disabled"}

// StartServer starts binPath as the Toxiproxy server — with
// toxiserver.Marker in its environment, so binPath is a binary that links
// package toxiserver, SelfServer in practice — with its API on 127.0.0.1
// and a free port, and returns once the API answers. The process is killed if the
// calling process dies; call Stop when done.
//
// The server's own output never goes to log: it goes to the file WithLogFile
// names, at DefaultLogLevel unless WithLogLevel says otherwise, and is
// discarded without one; its last lines are in the error if the server exits
// before its API answers. log (nil: discarded) gets StartServer's notes: one
// line when a start attempt failed and is made again.
func StartServer(ctx context.Context, binPath string, log io.Writer, opts ...ServerOption) (*Server, error) {
	if log == nil {
		log = io.Discard
	}
	cfg := serverConfig{level: DefaultLogLevel}
	for _, opt := range opts {
		opt(&cfg)
	}
	if !slices.Contains(logLevels, cfg.level) {
		return nil, fmt.Errorf("start toxiproxy server %s: log level %q: want one of %s", binPath, cfg.level, strings.Join(logLevels, ", "))
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start toxiproxy server %s: %w", binPath, err)
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	var errs []error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		s, err := startOnce(ctx, binPath, cfg)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if !isEarlyExit(err) {
			break
		}
		if attempt < startAttempts {
			fmt.Fprintf(log, "toxiproxy: %v; starting it again on another port\n", err)
		}
	}
	return nil, fmt.Errorf("start toxiproxy server %s: %w", binPath, errors.Join(errs...))
}

// earlyExitError says the server exited before its API answered (which is
// what it does when its port was taken).
type earlyExitError struct {
	apiAddr string
	err     error
	output  string // the server's last output, if any
}

func (e *earlyExitError) Error() string {
	msg := fmt.Sprintf("server for %s exited before its API answered: %v", e.apiAddr, e.err)
	if e.output != "" {
		msg += "; its last output: " + e.output
	}
	return msg
}

func (e *earlyExitError) Unwrap() error { return e.err }

func startOnce(ctx context.Context, binPath string, cfg serverConfig) (*Server, error) {
	alloc := ports.New()
	apiPort, err := alloc.Port()
	if err != nil {
		return nil, fmt.Errorf("api port: %w", err)
	}
	port := strconv.Itoa(apiPort)
	started := false
	defer func() {
		if !started {
			alloc.Close()
		}
	}()
	last := new(tail)
	var out io.Writer = last
	var logFile *os.File
	if cfg.logPath != "" {
		logFile, err = os.OpenFile(cfg.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("log file: %w", err)
		}
		out = io.MultiWriter(logFile, last)
	}
	cmd := exec.Command(binPath, "-host", "127.0.0.1", "-port", port)
	// The last of a name in the environment is the one the server sees.
	cmd.Env = append(os.Environ(), toxiserver.Marker+"=1", "LOG_LEVEL="+cfg.level)
	// One writer for both streams: exec copies them through one pipe, so
	// their lines do not interleave mid-line.
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = serverProcAttr()
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			_ = logFile.Close()
		}
		return nil, fmt.Errorf("exec: %w", err)
	}
	apiAddr := net.JoinHostPort("127.0.0.1", port)
	s := &Server{
		cmd:     cmd,
		apiAddr: apiAddr,
		client:  toxiproxy.NewClient(apiAddr),
		exited:  make(chan struct{}),
		ports:   alloc,
		links:   map[string]string{},
	}
	started = true // Stop frees the ports from here on
	go func() {
		// Wait returns once the process has exited and its output has
		// been copied: the log file is complete when exited closes.
		s.waitErr = cmd.Wait()
		if logFile != nil {
			_ = logFile.Close()
		}
		close(s.exited)
	}()

	if err := s.waitForAPI(ctx, last); err != nil {
		if stopErr := s.Stop(); stopErr != nil && !isEarlyExit(err) {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	return s, nil
}

func isEarlyExit(err error) bool {
	var early *earlyExitError
	return errors.As(err, &early)
}

// waitForAPI polls the API until it answers, the process exits, or ctx ends.
func (s *Server) waitForAPI(ctx context.Context, out *tail) error {
	return pollAPI(ctx, s.client, s.apiAddr, s.exited, func() error {
		return &earlyExitError{apiAddr: s.apiAddr, err: s.exitStatus(), output: out.String()}
	})
}

// pollAPI asks a Toxiproxy API for its proxies every pollInterval until it
// answers or ctx ends; when exited closes (nil: never), it returns gone().
func pollAPI(ctx context.Context, client *toxiproxy.Client, apiAddr string, exited <-chan struct{}, gone func() error) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		_, err := call(ctx, client.Proxies)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return gone()
		case <-ctx.Done():
			return fmt.Errorf("wait for API on %s: %w (last error: %v)", apiAddr, ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

func (s *Server) exitStatus() error {
	if s.waitErr == nil {
		return errors.New("exit status 0")
	}
	return s.waitErr
}

// Client returns a client for the server's API.
func (s *Server) Client() *toxiproxy.Client { return s.client }

// APIAddr returns the API's address, 127.0.0.1:port.
func (s *Server) APIAddr() string { return s.apiAddr }

// Stop kills the server and waits until it has exited. Every proxy and its
// connections go with it. Stop is idempotent; it reports an error if the
// server had exited on its own before.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		select {
		case <-s.exited:
			s.stopErr = fmt.Errorf("stop toxiproxy server %s: it had already exited: %w", s.apiAddr, s.exitStatus())
			return
		default:
		}
		// Process.Kill goes through a pidfd on Linux, so it cannot hit a
		// reused pid even if the process exits right now.
		if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			s.stopErr = fmt.Errorf("stop toxiproxy server %s: %w", s.apiAddr, err)
		}
		<-s.exited
		s.ports.Close()
	})
	return s.stopErr
}

// call runs fn, a blocking toxiproxy client call that takes no context. It
// returns ctx's error without calling fn if ctx has ended, and returns early
// if ctx ends while fn runs; fn then finishes in the background and whether
// it took effect on the server is unknown. A call whose connection the
// server had just closed is made once more (see closedUnderIt).
func call[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		if closedUnderIt(err) && ctx.Err() == nil {
			v, err = fn()
		}
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// closedUnderIt reports an error of a request sent on a kept-alive
// connection just as the server closed it: Toxiproxy's API closes a
// connection idle for its read timeout (10 s), the client (http.Post on the
// default client) reuses idle connections, and Go does not send a POST
// again by itself. The request failed in the transport (a *url.Error) with
// no answer, so the server did not act on it and it can be sent again; an
// EOF while decoding an answer is not this.
func closedUnderIt(err error) bool {
	var transport *url.Error
	if !errors.As(err, &transport) {
		return false
	}
	return errors.Is(transport.Err, io.EOF) || errors.Is(transport.Err, syscall.ECONNRESET)
}

// tailSize bounds what tail keeps.
const tailSize = 2048

// tail keeps the last tailSize bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns what was kept, trimmed, with its lines joined by " | ".
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(strings.Split(strings.TrimSpace(string(t.buf)), "\n"), " | ")
}
