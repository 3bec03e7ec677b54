package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Command is a program run to its end for a target: its build step, a
// schema command.
type Command struct {
	Args    []string // the executable and its arguments
	Env     []string // added to ours
	Dir     string   // working directory
	Timeout time.Duration
}

// commandWaitDelay is how long a command's end waits for its output pipe
// once the command has exited or been killed: a descendant that survives
// it (one that left the process group) may hold the pipe open for ever.
const commandWaitDelay = 2 * time.Second

// commandOutput bounds the output kept for the error (its tail).
const commandOutput = 16 << 10

// RunCommand runs c to its end, bounded by c.Timeout and ctx, and returns
// an error carrying the tail of its output if it fails. The command runs in
// its own process group, which the timeout kills whole (SIGKILL); the wait
// does not block on the output pipe a surviving descendant holds; and once
// it is over, every process it left behind, those that left the group with
// setsid included, is killed (they carry its run mark, see EnvRunMark).
func RunCommand(ctx context.Context, c Command) error {
	return runCommand(ctx, c, newMark())
}

func runCommand(ctx context.Context, c Command, mark string) error {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return errors.New("run command: no command")
	}
	tctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, c.Args[0], c.Args[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = withMark(environ(c.Env), mark)
	out := &tail{max: commandOutput}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The timeout kills the whole group, not only the command: a build
	// tool's workers would otherwise run on.
	cmd.Cancel = func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill process group %d: %w", cmd.Process.Pid, err)
		}
		return nil
	}
	cmd.WaitDelay = commandWaitDelay
	start := time.Now()
	err := cmd.Run()
	// Whatever it left behind goes, in its group or out of it.
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	sweep, cancelSweep := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelSweep()
	_, sweepErr := KillMarked(sweep, mark)

	what := fmt.Sprintf("%s (in %s)", strings.Join(c.Args, " "), c.Dir)
	switch {
	case errors.Is(err, exec.ErrWaitDelay):
		// It exited well, leaving a descendant on its output: swept above.
		err = nil
	case err != nil && tctx.Err() == context.DeadlineExceeded && ctx.Err() == nil:
		err = fmt.Errorf("%s: timed out after %s (killed with its process group after %s): %w", what, c.Timeout, time.Since(start).Round(time.Millisecond), err)
	case err != nil:
		err = fmt.Errorf("%s: %w", what, err)
	}
	if err != nil {
		if o := strings.TrimSpace(out.String()); o != "" {
			err = fmt.Errorf("%w\n%s", err, o)
		}
	}
	if sweepErr != nil {
		err = errors.Join(err, fmt.Errorf("%s: leftover processes: %w", what, sweepErr))
	}
	return err
}

// tail is a writer that keeps the last max bytes written to it; safe for
// the two goroutines that copy stdout and stderr.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
	cut bool
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cut {
		return "…\n" + string(t.buf)
	}
	return string(t.buf)
}
