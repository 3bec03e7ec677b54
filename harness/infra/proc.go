package infra

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// child is one long- or short-lived process started by the local provider.
// Its output goes to a log file in the folder; its pid and start time go to
// <name>.pid there, so a later run can find it if this one dies.
type child struct {
	name    string
	cmd     *exec.Cmd
	pid     int
	start   uint64 // start time in clock ticks since boot, from /proc
	logPath string
	logOff  int64         // where this run's output starts in logPath
	done    chan struct{} // closed once the process has been reaped
	waitErr error         // valid after done is closed
}

// spawn starts argv as a child in its own process group, killed by the
// kernel if the thread that started it dies, running as cred (nil: as us),
// with its working directory in dir (the sweep finds strays by it).
func spawn(dir, name string, argv, env []string, cred *syscall.Credential) (*child, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("start %s: stat log: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = nil
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Credential: cred,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{
		name:    name,
		cmd:     cmd,
		pid:     cmd.Process.Pid,
		logPath: logPath,
		logOff:  st.Size(),
		done:    make(chan struct{}),
	}
	if p, err := readProc(c.pid); err == nil {
		c.start = p.start
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	if err := writePidFile(filepath.Join(dir, name+".pid"), c.pid, c.start); err != nil {
		c.kill(syscall.SIGKILL)
		<-c.done
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return c, nil
}

// exited reports whether the process has ended and been reaped.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill sends sig to the child's whole process group while the leader is not
// yet reaped (so its pid, and with it the group id, cannot have been
// reused). After that the group is left to killStrays.
func (c *child) kill(sig syscall.Signal) {
	if c.exited() {
		return
	}
	_ = syscall.Kill(-c.pid, sig)
}

// signalLeader sends sig to the group leader only.
func (c *child) signalLeader(sig syscall.Signal) {
	if c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(sig)
}

// wait waits until the child is reaped or ctx ends.
func (c *child) wait(ctx context.Context) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for %s (pid %d) to exit: %w", c.name, c.pid, ctx.Err())
	}
}

// exitError describes an unexpected exit with the tail of the child's log.
func (c *child) exitError() error {
	return fmt.Errorf("%s (pid %d) exited: %v; last output:\n%s", c.name, c.pid, c.waitErr, c.tail())
}

// tail returns the last lines this run of the child wrote to its log.
func (c *child) tail() string {
	return tailFile(c.logPath, c.logOff, 25, 4096)
}

func tailFile(path string, from int64, maxLines, maxBytes int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if off := st.Size() - int64(maxBytes); off > from {
		from = off
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return strings.Join(lines, "\n")
}

// procInfo is what the provider needs from /proc/<pid>/stat.
type procInfo struct {
	pid   int
	state byte
	pgrp  int
	start uint64
}

// readProc parses /proc/<pid>/stat.
func readProc(pid int) (procInfo, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, err
	}
	// The command name is in parentheses and may contain anything, so the
	// fields are counted from after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat: no ')'", pid)
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); pgrp is field 5, starttime field 22.
	if len(fields) < 20 {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(fields))
	}
	pgrp, err := strconv.Atoi(fields[2])
	if err != nil {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat pgrp: %w", pid, err)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return procInfo{}, fmt.Errorf("parse /proc/%d/stat starttime: %w", pid, err)
	}
	return procInfo{pid: pid, state: fields[0][0], pgrp: pgrp, start: start}, nil
}

// listProcs returns every live (not zombie) process. Zombies count as gone:
// they hold no port, file or memory, and are reaped by whoever is their
// parent.
func listProcs() []procInfo {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := readProc(pid)
		if err != nil || p.state == 'Z' || p.state == 'X' {
			continue
		}
		out = append(out, p)
	}
	return out
}

// alive reports whether pid is a live process; if start is not zero it must
// also have that start time (otherwise the pid was reused).
func alive(pid int, start uint64) bool {
	p, err := readProc(pid)
	if err != nil || p.state == 'Z' || p.state == 'X' {
		return false
	}
	return start == 0 || p.start == start
}

// cwdUnder reports whether pid's working directory is dir or inside it.
func cwdUnder(pid int, dir string) bool {
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		return false
	}
	cwd = strings.TrimSuffix(cwd, " (deleted)")
	return cwd == dir || strings.HasPrefix(cwd, dir+string(filepath.Separator))
}

// strays returns the live processes, other than this one, that are members
// of one of groups or, if dir is not empty, run with their working directory
// in dir. Every child runs in dir, and PostgreSQL's backends, which put
// themselves in sessions of their own, run in its data directory under dir.
func strays(dir string, groups map[int]bool) []procInfo {
	self := os.Getpid()
	byCwd := dir != "" && filepath.IsAbs(dir) && filepath.Clean(dir) != "/"
	var out []procInfo
	for _, p := range listProcs() {
		if p.pid == self {
			continue
		}
		if groups[p.pgrp] || byCwd && cwdUnder(p.pid, dir) {
			out = append(out, p)
		}
	}
	return out
}

// killStrays SIGKILLs the processes strays finds and waits up to timeout
// for them to be gone. It returns the pids that are still alive. With dir
// empty it kills only the groups.
func killStrays(dir string, groups map[int]bool, timeout time.Duration) []int {
	found := strays(dir, groups)
	for _, p := range found {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(timeout)
	for {
		var left []int
		for _, p := range found {
			if alive(p.pid, p.start) {
				left = append(left, p.pid)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writePidFile(path string, pid int, start uint64) error {
	if err := os.WriteFile(path, []byte(fmt.Sprintf("%d %d\n", pid, start)), 0o644); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	return nil
}

func readPidFile(path string) (pid int, start uint64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, 0, fmt.Errorf("pid file %s is empty", path)
	}
	pid, err = strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return 0, 0, fmt.Errorf("pid file %s: bad pid %q", path, f[0])
	}
	if len(f) > 1 {
		start, err = strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("pid file %s: bad start time %q", path, f[1])
		}
	}
	return pid, start, nil
}

const (
	dirPattern    = "faultline-local-*"
	ownerFile     = "owner.pid"
	keepFile      = "KEEP"
	ownerlessWait = time.Minute // a folder without owner.pid younger than this may be being created
)

// sweepStale removes the folders under root left by local providers whose
// test binary died without Stop: folders matching dirPattern whose owner.pid
// names a process that no longer runs (or that have had no owner.pid for a
// minute). It kills their children's process groups, as recorded in their
// pid files, and any process still working in the folder, then removes the
// folder. Folders with a KEEP file (LocalOptions.KeepDir) are left alone.
// It returns the folders it removed.
func sweepStale(root string, logf func(format string, args ...any)) []string {
	matches, err := filepath.Glob(filepath.Join(root, dirPattern))
	if err != nil {
		return nil
	}
	var removed []string
	for _, dir := range matches {
		st, err := os.Lstat(dir)
		if err != nil || !st.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, keepFile)); err == nil {
			continue
		}
		// Another user's folder: we could neither kill its processes nor
		// remove it (the temporary directory is sticky).
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && os.Geteuid() != 0 && int(sys.Uid) != os.Geteuid() {
			continue
		}
		why := ""
		owner, ownerStart, err := readPidFile(filepath.Join(dir, ownerFile))
		switch {
		case errors.Is(err, os.ErrNotExist):
			if time.Since(st.ModTime()) < ownerlessWait {
				continue
			}
			why = "no owner.pid"
		case err != nil:
			why = err.Error()
		case alive(owner, ownerStart):
			continue
		default:
			why = fmt.Sprintf("owner pid %d is gone or reused", owner)
		}
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		groups := staleGroups(dir)
		left := killStrays(dir, groups, 5*time.Second)
		if len(left) > 0 {
			logf("local infra: stale %s (%s): processes %v survive SIGKILL; leaving it", dir, why, left)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			logf("local infra: stale %s (%s): remove: %v", dir, why, err)
			continue
		}
		logf("local infra: removed stale %s (%s)", dir, why)
		removed = append(removed, dir)
	}
	return removed
}

// staleGroups reads the children's pid files in dir and returns the process
// groups that may still hold them. A recorded leader that is alive with
// another start time means the pid was reused: that group is not ours. A
// leader that is gone leaves its group id reserved while any member lives,
// so members found with that group id are ours.
func staleGroups(dir string) map[int]bool {
	groups := map[int]bool{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	for _, f := range files {
		if filepath.Base(f) == ownerFile {
			continue
		}
		pid, start, err := readPidFile(f)
		if err != nil {
			continue
		}
		if p, err := readProc(pid); err == nil && start != 0 && p.start != start {
			continue
		}
		groups[pid] = true
	}
	return groups
}

// listenerPid finds the process with a listening TCP socket on port, from
// /proc/net/tcp{,6} and the processes' descriptors.
func listenerPid(port int) (int, bool) {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			i := strings.LastIndexByte(f[1], ':')
			if p, err := strconv.ParseInt(f[1][i+1:], 16, 32); err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0, false
	}
	for _, p := range listProcs() {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.pid, fd.Name())); err == nil && inodes[link] {
				return p.pid, true
			}
		}
	}
	return 0, false
}

// inDir reports whether pid works in dir (its cwd is under it).
func inDir(pid int, dir string) bool {
	return dir != "" && cwdUnder(pid, dir)
}
