package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/faultline-dev/faultline/protocol/crashpoint"

	"github.com/faultline-dev/faultline/harness/safe"
)

// Process is one supervised program across its incarnations (a restart is
// a new incarnation with the same name and event log). Its methods are safe
// for concurrent use and act on the current incarnation.
type Process struct {
	sup  *Supervisor
	spec Spec

	mu     sync.Mutex
	inc    *incarnation // current; never nil once Start has returned it
	n      int          // incarnations started
	paused bool         // Pause sent SIGSTOP and no Resume since
	// restarting: its restart policy will start it again (a restart is
	// queued or under way); gaveUp: why the policy stopped trying.
	restarting bool
	gaveUp     error
	history    []Event // exits by itself and the policy's restarts, in order
}

// incarnation is one OS process of a Process.
type incarnation struct {
	n      int
	cmd    *exec.Cmd
	pid    int
	logOff int64 // where this incarnation's lines start in the event log
	outOff int64 // where its output starts in the .out file
	done   chan struct{}
	reason string // valid once done is closed

	// Guarded by the Process's mu. ours: faultline ended it (Kill, Stop,
	// a failed start); killArmed: a kill crash point was armed in it, so
	// its SIGKILL is a fault's, which restarts it (or not) itself; ready:
	// it became ready; byItself: it ended otherwise (set before done is
	// closed); queued: its restart policy took it up.
	ours, killArmed, ready, byItself, queued bool
}

func (inc *incarnation) exited() bool {
	select {
	case <-inc.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the incarnation's process group. A process that has
// already exited is not an error.
func (inc *incarnation) signal(sig syscall.Signal) error {
	if inc.exited() {
		return nil
	}
	if err := syscall.Kill(-inc.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s to process group %d: %w", signalName(sig), inc.pid, err)
	}
	return nil
}

// Name is the process's unique name.
func (p *Process) Name() string { return p.spec.Name }

// Role is the process's role (producer, relay, consumer).
func (p *Process) Role() string { return p.spec.Role }

// Spec is the spec the process was started with.
func (p *Process) Spec() Spec {
	s := p.spec
	s.Command = slices.Clone(s.Command)
	s.Env = slices.Clone(s.Env)
	return s
}

// EventLogPath is the process's event log, shared by all its incarnations;
// empty if it writes none.
func (p *Process) EventLogPath() string { return p.spec.EventLog }

// OutPath is the file holding the process's stdout and stderr.
func (p *Process) OutPath() string { return p.sup.outPath(p.spec.Name) }

func (p *Process) current() *incarnation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inc
}

// Pid is the current incarnation's pid.
func (p *Process) Pid() int { return p.current().pid }

// ControlAddr is the process's control address (host:port); empty if it
// has none. It stays the same across restarts.
func (p *Process) ControlAddr() string { return p.spec.Control }

// incarnations is how many times the process has been started.
func (p *Process) incarnations() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// Running reports whether the current incarnation has not exited (a paused
// process is running).
func (p *Process) Running() bool { return !p.current().exited() }

// Exited is closed when the current incarnation ends, for any reason. After
// a Restart it is a new channel.
func (p *Process) Exited() <-chan struct{} { return p.current().done }

// ExitReason says how the current incarnation ended ("killed by SIGKILL",
// "exit status 1"); empty while it runs.
func (p *Process) ExitReason() string {
	inc := p.current()
	if !inc.exited() {
		return ""
	}
	return inc.reason
}

// WaitExit waits until the current incarnation ends or ctx is done.
func (p *Process) WaitExit(ctx context.Context) error {
	inc := p.current()
	select {
	case <-inc.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for %s (pid %d) to exit: %w", p.spec.Name, inc.pid, ctx.Err())
	}
}

// Kill sends SIGKILL to the process group and waits until it is reaped. It
// fails with ErrNotRunning if the process had already exited.
func (p *Process) Kill() error {
	inc := p.current()
	if inc.exited() {
		return fmt.Errorf("kill %s (pid %d): %w (%s)", p.spec.Name, inc.pid, ErrNotRunning, inc.reason)
	}
	p.endedByUs(inc)
	if err := inc.signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s: %w", p.spec.Name, err)
	}
	p.sup.logf(p.spec.Name, "killed pid %d (SIGKILL)", inc.pid)
	return p.reap(inc)
}

// reap waits (bounded) until inc has been reaped.
func (p *Process) reap(inc *incarnation) error {
	t := time.NewTimer(p.sup.reapTimeout)
	defer t.Stop()
	select {
	case <-inc.done:
		return nil
	case <-t.C:
		return fmt.Errorf("%s (pid %d): not reaped %s after SIGKILL", p.spec.Name, inc.pid, p.sup.reapTimeout)
	}
}

// Pause freezes the process with SIGSTOP and returns once /proc shows it stopped.
func (p *Process) Pause() error {
	inc := p.current()
	if inc.exited() {
		return fmt.Errorf("pause %s (pid %d): %w (%s)", p.spec.Name, inc.pid, ErrNotRunning, inc.reason)
	}
	if err := inc.signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause %s: %w", p.spec.Name, err)
	}
	p.mu.Lock()
	if p.inc == inc {
		p.paused = true
	}
	p.mu.Unlock()
	if err := p.waitState(inc, true); err != nil {
		return fmt.Errorf("pause %s: %w", p.spec.Name, err)
	}
	p.sup.logf(p.spec.Name, "paused pid %d (SIGSTOP)", inc.pid)
	return nil
}

// Resume continues a paused (or self-stopped) process with SIGCONT and
// returns once /proc shows it running.
func (p *Process) Resume() error {
	inc := p.current()
	if inc.exited() {
		return fmt.Errorf("resume %s (pid %d): %w (%s)", p.spec.Name, inc.pid, ErrNotRunning, inc.reason)
	}
	if err := inc.signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("resume %s: %w", p.spec.Name, err)
	}
	p.mu.Lock()
	if p.inc == inc {
		p.paused = false
	}
	p.mu.Unlock()
	if err := p.waitState(inc, false); err != nil {
		return fmt.Errorf("resume %s: %w", p.spec.Name, err)
	}
	p.sup.logf(p.spec.Name, "resumed pid %d (SIGCONT)", inc.pid)
	return nil
}

// waitState polls /proc until the incarnation is (or is no longer) stopped.
func (p *Process) waitState(inc *incarnation, stopped bool) error {
	deadline := time.Now().Add(p.sup.signalWait)
	for {
		st, err := procStopped(inc.pid)
		switch {
		case inc.exited():
			return fmt.Errorf("pid %d: %w (%s)", inc.pid, ErrNotRunning, inc.reason)
		case err == nil && st == stopped:
			return nil
		case time.Now().After(deadline):
			if err != nil {
				return err
			}
			return fmt.Errorf("pid %d: stopped=%v after %s, want %v", inc.pid, st, p.sup.signalWait, stopped)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Frozen reports whether the process is frozen: after Pause, or because it
// stopped itself (a crash point's pause action sends itself SIGSTOP).
func (p *Process) Frozen() bool {
	p.mu.Lock()
	inc, paused := p.inc, p.paused
	p.mu.Unlock()
	if inc.exited() {
		return false
	}
	if paused {
		return true
	}
	st, _ := procStopped(inc.pid)
	return st
}

// Stopped reports whether /proc/<pid>/stat shows the current incarnation in
// the stopped state (T). An exited process is not stopped.
func (p *Process) Stopped() (bool, error) {
	inc := p.current()
	if inc.exited() {
		return false, nil
	}
	st, err := procStopped(inc.pid)
	if err != nil && inc.exited() {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", p.spec.Name, err)
	}
	return st, nil
}

// procStopped reads the state field of /proc/<pid>/stat: T (stopped) or t
// (stopped by a tracer) count as stopped.
func procStopped(pid int) (bool, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, fmt.Errorf("process state of pid %d: %w", pid, err)
	}
	// pid (comm) state ...; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return false, fmt.Errorf("process state of pid %d: malformed /proc stat %q", pid, data)
	}
	state := data[i+2]
	return state == 'T' || state == 't', nil
}

// Stop ends the process gracefully: SIGCONT (a stopped process cannot handle
// a signal), its stop signal (default SIGTERM), up to its stop timeout
// (default 3 s, or until ctx ends), then SIGKILL to its process group; it returns once the process is reaped. A process that has
// already exited is not an error.
func (p *Process) Stop(ctx context.Context) error {
	inc := p.current()
	if inc == nil || inc.exited() {
		return nil
	}
	p.endedByUs(inc)
	err := errors.Join(inc.signal(syscall.SIGCONT), inc.signal(p.spec.Stop.Signal))
	if err != nil {
		p.sup.logf(p.spec.Name, "stop pid %d: %v", inc.pid, err)
	} else {
		p.sup.logf(p.spec.Name, "stopping pid %d (SIGCONT, %s)", inc.pid, signalName(p.spec.Stop.Signal))
	}
	t := time.NewTimer(p.spec.Stop.Timeout)
	defer t.Stop()
	select {
	case <-inc.done:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	if err := inc.signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("stop %s: %w", p.spec.Name, err)
	}
	p.sup.logf(p.spec.Name, "killed pid %d (SIGKILL): still running after %s", inc.pid, signalName(p.spec.Stop.Signal))
	if err := p.reap(inc); err != nil {
		return fmt.Errorf("stop %s: %w", p.spec.Name, err)
	}
	return nil
}

// Restart starts a new incarnation with the same spec and waits like Start.
// Crash point arming in Spec.Env (FAULTLINE_CRASHPOINTS=...) is dropped;
// pass it again in extraEnv to keep it. The current incarnation must have
// exited (Kill or Stop it first). If the new one does not become ready it is
// killed and the error carries the tail of its output.
func (p *Process) Restart(ctx context.Context, extraEnv ...string) error {
	_, err := p.restart(ctx, "", extraEnv)
	return err
}

// Respawn starts a new incarnation like Restart but does not wait for it
// to be ready, for a caller that has evidence of its own that the
// incarnation works: a fault that slowed the process's database link
// cannot take a health check that pings that database as that evidence,
// and reads the broker instead. The incarnation is not marked ready, so
// Spec.Restart.Always does not start it again if it exits; a later
// Restart (after Kill) waits as usual.
func (p *Process) Respawn(extraEnv ...string) error {
	if _, err := p.respawn(extraEnv); err != nil {
		return fmt.Errorf("respawn: %w", err)
	}
	return nil
}

// respawn starts a new incarnation with the spec's environment (crash
// point armings dropped) and extraEnv.
func (p *Process) respawn(extraEnv []string) (*incarnation, error) {
	env := slices.DeleteFunc(slices.Clone(p.spec.Env), isCrashpointEnv)
	env = append(env, extraEnv...)
	s := p.sup
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("start %s: %w", p.spec.Name, ErrStopped)
	}
	return p.spawnLocked(env)
}

// restart is Restart, its log line saying why (empty: at the caller's
// request); it returns the new incarnation.
func (p *Process) restart(ctx context.Context, why string, extraEnv []string) (*incarnation, error) {
	inc, err := p.respawn(extraEnv)
	if err != nil {
		return nil, fmt.Errorf("restart: %w", err)
	}
	if err := p.waitReady(ctx, inc); err != nil {
		p.abandon(inc)
		return inc, fmt.Errorf("restart: %w", err)
	}
	p.markReady(inc)
	if why != "" {
		why = ": " + why
	}
	p.sup.logf(p.spec.Name, "restarted pid %d (incarnation %d)%s", inc.pid, inc.n, why)
	return inc, nil
}

// spawnLocked starts a new incarnation with extra environment env. The
// caller holds p.sup.mu, so StopAll cannot miss a process started here.
func (p *Process) spawnLocked(env []string) (*incarnation, error) {
	s := p.sup
	name := p.spec.Name
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inc != nil && !p.inc.exited() {
		return nil, fmt.Errorf("start %s: incarnation %d (pid %d) is still running; Kill or Stop it first", name, p.inc.n, p.inc.pid)
	}

	out, err := os.OpenFile(s.outPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: output file: %w", name, err)
	}
	defer out.Close() // the child has its own copy
	st, err := out.Stat()
	if err != nil {
		return nil, fmt.Errorf("start %s: output file: %w", name, err)
	}

	args := p.spec.Command
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = s.dir
	if p.spec.Dir != "" {
		cmd.Dir = p.spec.Dir
	}
	cmd.Env = s.environ(env)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logOff := sizeOf(p.spec.EventLog) // before it can write its first line
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.n++
	inc := &incarnation{
		n:         p.n,
		cmd:       cmd,
		pid:       cmd.Process.Pid,
		logOff:    logOff,
		outOff:    st.Size(),
		done:      make(chan struct{}),
		killArmed: armsKill(env),
	}
	p.inc = inc
	p.paused = false
	go func() {
		defer close(inc.done) // whatever happens here, the waiters go on
		err := cmd.Wait()
		if perr := safe.Do("wait for "+name, func() error {
			inc.reason = describeExit(cmd.ProcessState, err)
			s.logf(name, "exited pid %d: %s", inc.pid, inc.reason)
			return nil
		}); perr != nil {
			inc.reason = perr.Error()
		}
		p.onExit(inc)
	}()
	s.logf(name, "spawned pid %d (incarnation %d): %s", inc.pid, inc.n, strings.Join(args, " "))
	return inc, nil
}

// abandon kills an incarnation that did not become ready and waits for it.
func (p *Process) abandon(inc *incarnation) {
	p.endedByUs(inc)
	_ = inc.signal(syscall.SIGKILL)
	_ = p.reap(inc)
}

// waitReady waits until inc is ready as its spec says: its HTTP URL
// answers 200, its TCP address accepts, or a line of its output after its
// start matches.
func (p *Process) waitReady(ctx context.Context, inc *incarnation) error {
	ready := p.spec.Ready
	ctx, cancel := context.WithTimeout(ctx, ready.Timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	out := &lineReader{path: p.OutPath(), off: inc.outOff}
	lastProblem := "not asked yet"
	for {
		var err error
		switch {
		case ready.HTTP != "":
			err = p.getOK(ctx, ready.HTTP)
		case ready.TCP != "":
			err = dialOK(ctx, ready.TCP)
		case ready.Log != nil:
			err = out.find(ready.Log)
		}
		if err == nil {
			return nil
		}
		if ctx.Err() == nil || lastProblem == "not asked yet" {
			lastProblem = err.Error() // keep the last real answer over our own deadline
		}
		select {
		case <-inc.done:
			return fmt.Errorf("start %s: pid %d exited before it was ready: %s; output:\n%s",
				p.spec.Name, inc.pid, inc.reason, p.outputTail(inc))
		case <-ctx.Done():
			return fmt.Errorf("start %s: pid %d not ready within %s (%s): %w; output:\n%s",
				p.spec.Name, inc.pid, ready.Timeout, lastProblem, ctx.Err(), p.outputTail(inc))
		case <-tick.C:
		}
	}
}

// getOK asks url and wants a 200.
func (p *Process) getOK(ctx context.Context, url string) error {
	// longer than the reference's own 2 s bound on its health check, so a
	// slow dependency shows up as its 503 rather than our timeout
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("ready URL %q: %w", url, err)
	}
	resp, err := p.sup.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// dialOK wants addr to accept a TCP connection.
func dialOK(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	return c.Close()
}

// outputTail is the last few KiB the incarnation wrote to stdout/stderr,
// and, for a process that writes an event log, the last lines it logged
// there: a program that logs its errors only to its event log (the Node
// example does) would otherwise fail to start with "(no output)" and no
// word of why.
func (p *Process) outputTail(inc *incarnation) string {
	const max = 4 << 10
	out := fileTail(p.OutPath(), inc.outOff, max)
	if out == "" {
		out = "(no output)"
	}
	if p.spec.EventLog == "" {
		return out
	}
	if logged := fileTail(p.spec.EventLog, inc.logOff, max); logged != "" {
		out += "\nevent log, last lines:\n" + lastLines(logged, eventLogLines)
	}
	return out
}

// eventLogLines is how many of its last event log lines a process that
// did not start carries in its error: its last errors, not a screenful of
// deliveries.
const eventLogLines = 8

// sizeOf is the size of the file at path, 0 when there is none (yet).
func sizeOf(path string) int64 {
	if path == "" {
		return 0
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// fileTail is what path holds past offset from, at most its last max
// bytes; "" when that is only blank, or "(… unavailable: why)".
func fileTail(path string, from, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + filepath.Base(path) + " unavailable: " + err.Error() + ")"
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "(" + filepath.Base(path) + " unavailable: " + err.Error() + ")"
	}
	if st.Size()-from > max {
		from = st.Size() - max
	}
	if from >= st.Size() {
		return ""
	}
	data, err := io.ReadAll(io.NewSectionReader(f, from, st.Size()-from))
	if err != nil {
		return "(" + filepath.Base(path) + " unavailable: " + err.Error() + ")"
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return ""
	}
	return string(data)
}

// lineReader reads complete lines appended to a file after an offset.
type lineReader struct {
	path    string
	off     int64
	partial []byte
}

// find reads the lines appended since the last call and reports whether
// one matches re (nil), or what it has read so far (an error).
func (r *lineReader) find(re *regexp.Regexp) error {
	f, err := os.Open(r.path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no output yet matching %q", re)
	}
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, r.off, 1<<40))
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	r.off += int64(len(data))
	buf := append(r.partial, data...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		line := buf[:i]
		buf = buf[i+1:]
		if re.Match(line) {
			r.partial = nil
			return nil
		}
	}
	r.partial = slices.Clone(buf)
	return fmt.Errorf("no line of output matching %q yet", re)
}

// Arm arms a crash point of the current incarnation over its control server,
// e.g. Arm(ctx, "relay.after-confirm", "kill@3"). A non-2xx answer is an
// error carrying the server's text.
func (p *Process) Arm(ctx context.Context, point, arming string) error {
	inc := p.current()
	if a, err := crashpoint.ParseArming(arming); err == nil && a.Action == crashpoint.Kill {
		// Before the request: the point may fire before its answer arrives.
		p.mu.Lock()
		inc.killArmed = true
		p.mu.Unlock()
	}
	if err := p.control(ctx, http.MethodPut, point, arming); err != nil {
		return fmt.Errorf("arm %s %s=%s: %w", p.spec.Name, point, arming, err)
	}
	p.sup.logf(p.spec.Name, "armed %s=%s", point, arming)
	return nil
}

// Disarm disarms a crash point of the current incarnation.
func (p *Process) Disarm(ctx context.Context, point string) error {
	if err := p.control(ctx, http.MethodDelete, point, ""); err != nil {
		return fmt.Errorf("disarm %s %s: %w", p.spec.Name, point, err)
	}
	p.sup.logf(p.spec.Name, "disarmed %s", point)
	return nil
}

func (p *Process) control(ctx context.Context, method, point, body string) error {
	inc := p.current()
	if inc.exited() {
		return fmt.Errorf("pid %d: %w (%s)", inc.pid, ErrNotRunning, inc.reason)
	}
	addr := p.spec.Control
	if addr == "" {
		return fmt.Errorf("%s has no control address (its target file gives it no crash points)", p.spec.Name)
	}
	u := "http://" + addr + "/crashpoints/" + url.PathEscape(point)
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := p.sup.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, bytes.TrimSpace(text))
	}
	return nil
}

// CrashPoints lists the current incarnation's crash points with their state.
func (p *Process) CrashPoints(ctx context.Context) ([]crashpoint.Status, error) {
	inc := p.current()
	addr := p.spec.Control
	if addr == "" {
		return nil, fmt.Errorf("crash points of %s: it has no control address", p.spec.Name)
	}
	if inc.exited() {
		return nil, fmt.Errorf("crash points of %s: %w (%s)", p.spec.Name, ErrNotRunning, inc.reason)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/crashpoints", nil)
	if err != nil {
		return nil, fmt.Errorf("crash points of %s: %w", p.spec.Name, err)
	}
	resp, err := p.sup.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("crash points of %s: %w", p.spec.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("crash points of %s: %s: %s", p.spec.Name, resp.Status, bytes.TrimSpace(text))
	}
	var out []crashpoint.Status
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("crash points of %s: %w", p.spec.Name, err)
	}
	return out, nil
}

// CrashPoint is the state of the current incarnation's crash point name.
func (p *Process) CrashPoint(ctx context.Context, name string) (crashpoint.Status, error) {
	points, err := p.CrashPoints(ctx)
	if err != nil {
		return crashpoint.Status{}, err
	}
	for _, st := range points {
		if st.Name == name {
			return st, nil
		}
	}
	return crashpoint.Status{}, fmt.Errorf("crash points of %s: no point %q", p.spec.Name, name)
}

// describeExit renders how a process ended: "exit status 1", "killed by SIGKILL".
func describeExit(ps *os.ProcessState, waitErr error) string {
	if ps == nil {
		return fmt.Sprintf("wait failed: %v", waitErr)
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return ps.String()
	}
	switch {
	case ws.Signaled():
		r := "killed by " + signalName(ws.Signal())
		if ws.CoreDump() {
			r += " (core dumped)"
		}
		return r
	case ws.Exited():
		return fmt.Sprintf("exit status %d", ws.ExitStatus())
	default:
		return ps.String()
	}
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGILL:
		return "SIGILL"
	case syscall.SIGFPE:
		return "SIGFPE"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGSTOP:
		return "SIGSTOP"
	case syscall.SIGCONT:
		return "SIGCONT"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	case syscall.SIGTRAP:
		return "SIGTRAP"
	case syscall.SIGSYS:
		return "SIGSYS"
	}
	return fmt.Sprintf("signal %d", int(sig))
}
