package supervisor

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitMarked waits until at least n processes carry mark, and returns them.
func waitMarked(t *testing.T, mark string, n int) []int {
	t.Helper()
	var pids []int
	require.Eventually(t, func() bool {
		var err error
		pids, err = marked(mark)
		require.NoError(t, err)
		return len(pids) >= n
	}, 5*time.Second, 10*time.Millisecond, "want %d processes with the mark", n)
	return pids
}

// gone reports whether pid no longer runs: no such process, or a zombie
// waiting for a reaper that is not ours (PID 1 in a container may never
// reap it).
func gone(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(data), ')')
	return i > 0 && i+2 < len(data) && data[i+2] == 'Z'
}

// A process that setsids a child leaves it outside its process group and
// session: the group's SIGKILL misses it, the mark finds it.
func TestKillMarkedFindsSetsidDescendants(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mark, other := newMark(), newMark()

	// Another run's process: the sweep must leave it alone.
	bystander := exec.Command("sleep", "300")
	bystander.Env = withMark(os.Environ(), other)
	require.NoError(t, bystander.Start())
	t.Cleanup(func() { _ = bystander.Process.Kill(); _ = bystander.Wait() })

	sh := exec.CommandContext(ctx, "sh", "-c", "setsid sleep 300 &")
	sh.Env = withMark(os.Environ(), mark)
	require.NoError(t, sh.Run(), "sh returns at once, its child runs on")
	left := waitMarked(t, mark, 1)

	killed, err := KillMarked(ctx, mark)
	require.NoError(t, err)
	for _, pid := range left {
		assert.Contains(t, killed, pid)
		assert.Eventually(t, func() bool { return gone(pid) }, 5*time.Second, 10*time.Millisecond, "pid %d still runs", pid)
	}
	after, err := marked(mark)
	require.NoError(t, err)
	assert.Empty(t, after, "nothing with the mark is left")
	assert.NotContains(t, killed, bystander.Process.Pid)
	assert.False(t, gone(bystander.Process.Pid), "another mark's process runs on")
	assert.Equal(t, []int{bystander.Process.Pid}, waitMarked(t, other, 1))
}

// StopAll kills what a supervised process setsid'd, not only its group.
func TestStopAllKillsSetsidDescendants(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := New(t.TempDir(), nil)
	_, err := s.Start(ctx, Spec{Name: "daemonizer", Command: []string{"sh", "-c", "setsid sleep 300 & echo ready; exec sleep 300"},
		Ready: Ready{Log: regexp.MustCompile("ready")}})
	require.NoError(t, err)
	pids := waitMarked(t, s.Mark(), 2) // the sh (now sleep) and the setsid'd sleep
	require.NoError(t, s.StopAll(ctx))
	left, err := marked(s.Mark())
	require.NoError(t, err)
	assert.Empty(t, left)
	for _, pid := range pids {
		assert.Eventually(t, func() bool { return gone(pid) }, 5*time.Second, 10*time.Millisecond, "pid %d still runs", pid)
	}
}

// A build or schema command's timeout holds whatever it leaves on its
// output, and nothing it started outlives it.
func TestRunCommand(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		timeout time.Duration
		wantErr []string // nil: no error
	}{
		{"a child in the group holds the output", "sleep 300 & sleep 300", 500 * time.Millisecond, []string{"timed out after 500ms", "killed with its process group"}},
		{"a setsid child holds the output", "setsid sleep 300 & sleep 300", 500 * time.Millisecond, []string{"timed out after 500ms"}},
		{"exits well, leaving a setsid child on the output", "setsid sleep 300 & echo built", time.Minute, nil},
		{"fails with its output", "echo boom >&2; exit 3", time.Minute, []string{"exit status 3", "boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			mark := newMark()
			start := time.Now()
			err := runCommand(ctx, Command{Args: []string{"sh", "-c", tt.script}, Dir: t.TempDir(), Timeout: tt.timeout}, mark)
			took := time.Since(start)
			assert.Less(t, took, tt.timeout+commandWaitDelay+3*time.Second, "the wait is bounded")
			if tt.wantErr == nil {
				assert.NoError(t, err)
			} else {
				require.Error(t, err)
				for _, want := range tt.wantErr {
					assert.Contains(t, err.Error(), want)
				}
			}
			left, err := marked(mark)
			require.NoError(t, err)
			assert.Empty(t, left, "nothing the command started is left")
		})
	}
}

func TestWithMarkReplacesAnInheritedMark(t *testing.T) {
	env := withMark([]string{"A=1", EnvRunMark + "=outer", "B=2"}, "inner")
	assert.Equal(t, []string{"A=1", "B=2", EnvRunMark + "=inner"}, env)
	assert.Len(t, slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return !strings.HasPrefix(kv, EnvRunMark+"=") }), 1)
}
