package supervisor

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// EnvRunMark is the environment variable that marks every process faultline
// starts for a target (a supervisor's processes, a build, a schema
// command) with a token of its own. The environment is inherited, so the
// token also marks every descendant, those that leave the process group
// (setsid) included: at the end, KillMarked finds them all in /proc. A
// descendant that clears its environment escapes the mark; nothing short
// of a cgroup would catch that one.
const EnvRunMark = "FAULTLINE_RUN_MARK"

// newMark is a fresh random token (128 bits): no two supervisors or
// commands share one, so a sweep kills only its own processes.
func newMark() string { return rand.Text() }

// markEnv is the environment entry of mark.
func markEnv(mark string) string { return EnvRunMark + "=" + mark }

// withMark is env with mark as its one EnvRunMark entry: an inherited mark
// (faultline started by faultline) is replaced, not added to.
func withMark(env []string, mark string) []string {
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return len(kv) > len(EnvRunMark) && kv[:len(EnvRunMark)+1] == EnvRunMark+"="
	})
	return append(env, markEnv(mark))
}

// marked returns the pids of the processes whose environment holds
// EnvRunMark=mark exactly, our own process aside. A process that vanishes
// while read, or whose environment we may not read (another user's), is
// not one of ours: it is skipped. A zombie's environment reads empty.
func marked(mark string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("scan /proc for run mark: %w", err)
	}
	want := []byte(markEnv(mark))
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ESRCH) {
				continue
			}
			return nil, fmt.Errorf("scan /proc for run mark: %w", err)
		}
		for kv := range bytes.SplitSeq(data, []byte{0}) {
			if bytes.Equal(kv, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}

// KillMarked sends SIGKILL to every process marked with mark (see
// EnvRunMark), and scans again until two scans in a row find none: a marked process
// may fork between the scan and its kill. It returns the pids it killed,
// and an error if some are still there when ctx ends.
func KillMarked(ctx context.Context, mark string) ([]int, error) {
	var killed []int
	// A process in the middle of an exec shows an empty environment for a
	// moment: one scan that finds nothing is not enough, two in a row are.
	empty := 0
	for {
		pids, err := marked(mark)
		if err != nil {
			return killed, err
		}
		if len(pids) == 0 {
			if empty++; empty == 2 {
				return killed, nil
			}
		} else {
			empty = 0
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return killed, fmt.Errorf("kill marked pid %d: %w", pid, err)
			}
			if !slices.Contains(killed, pid) {
				killed = append(killed, pid)
			}
		}
		select {
		case <-ctx.Done():
			return killed, fmt.Errorf("marked processes %v still there: %w", pids, ctx.Err())
		case <-time.After(10 * time.Millisecond): // a killed process takes a moment to go
		}
	}
}
