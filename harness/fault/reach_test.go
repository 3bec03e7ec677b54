package fault

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/ports"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// buildTestproc builds the supervisor's protocol-speaking test process
// once for the package's tests, into a folder removed by TestMain.
var buildTestproc = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(testprocDir, "testproc")
	out, err := exec.Command("go", "build", "-o", bin, "../supervisor/testdata/testproc").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build testproc: %w: %s", err, out)
	}
	return bin, nil
})

// testprocDir holds the built test process; TestMain makes and removes it.
var testprocDir string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fault-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testprocDir = dir
	return m.Run()
}

// reachEnv runs the supervisor's protocol-speaking test process as relay-1
// and returns an Env whose faults wait within for a window to open.
func reachEnv(t *testing.T, within time.Duration) (*Env, *supervisor.Process, string) {
	t.Helper()
	dir := t.TempDir()
	bin, err := buildTestproc()
	require.NoError(t, err)

	sup := supervisor.New(filepath.Join(dir, "run"), io.Discard)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		assert.NoError(t, sup.StopAll(ctx))
	})
	alloc := ports.New()
	t.Cleanup(alloc.Close)
	control, err := alloc.Addr()
	require.NoError(t, err)
	logPath := sup.EventLogPath("relay-1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := sup.Start(ctx, supervisor.Spec{
		Name: "relay-1", Role: protocol.Relay,
		Command:  []string{bin, "--event-log", logPath, "--control-addr", control},
		EventLog: logPath, Control: control,
		Ready: supervisor.Ready{HTTP: "http://" + control + "/healthz"},
	})
	require.NoError(t, err)
	env := &Env{
		Roles: NewRoles([]Instance{{Name: "relay-1", Role: protocol.Relay, EventLog: true,
			Points: map[string]string{protocol.RelayAfterConfirm: protocol.RelayAfterConfirm}}}),
		Processes:    sup,
		Acknowledged: func() int64 { return 1 },
		Landings:     NewLandings(),
		Deadline:     within,
		Logf:         func(string, ...any) {},
	}
	return env, p, control
}

// hitPoint makes the test process reach its crash point; a pause never
// answers, so the request is not waited for.
func hitPoint(t *testing.T, control, point string) {
	t.Helper()
	go func() {
		resp, err := http.Get("http://" + control + "/hit/" + point)
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
}

func pointArmed(t *testing.T, p *supervisor.Process, point string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := p.CrashPoint(ctx, point)
	require.NoError(t, err)
	return st.Armed
}

// A crash point that does not fire within its wait is disarmed: its
// window stays unopened, and a later hit neither freezes nor kills the
// process, which would otherwise be left frozen with no one to thaw it.
func TestCrashPointNotReachedIsDisarmed(t *testing.T) {
	t.Parallel()
	env, p, control := reachEnv(t, 300*time.Millisecond)
	f := Crash{Process: "relay-1", Point: protocol.RelayAfterConfirm, Action: crashpoint.Pause, Hit: 1,
		Trigger: Trigger{AfterOrders: 1}, Hold: time.Second}
	res := f.Inject(context.Background(), env)
	assert.False(t, res.Hit, "a point never reached opened no window: %+v", res)
	assert.False(t, pointArmed(t, p, protocol.RelayAfterConfirm), "the point is still armed after its wait ran out")

	// The hit is answered once it has passed the point; a frozen process
	// answers nothing.
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + control + "/hit/" + protocol.RelayAfterConfirm)
	if assert.NoError(t, err, "a hit after the wait froze the process") {
		_ = resp.Body.Close()
	} else {
		_ = p.Resume()
	}
}

// A hit that lands after the wait ran out, before the disarm, is the
// window opened late: the process frozen at the point is found, and the
// fault does what it was for (here: holds, then thaws it).
func TestCrashPointHitLateIsTaken(t *testing.T) {
	t.Parallel()
	env, p, control := reachEnv(t, 2*time.Second)
	ctx := context.Background()
	require.NoError(t, p.Arm(ctx, protocol.RelayAfterConfirm, crashpoint.Arming{Action: crashpoint.Pause, Hit: 1}.String()))
	hitPoint(t, control, protocol.RelayAfterConfirm)
	require.NoError(t, poll.Until(ctx, 10*time.Second, 10*time.Millisecond, p.Stopped), "the test process never froze at its point")

	var w waits
	match := func(e eventlog.Entry) bool {
		return e.Event == eventlog.CrashPoint && e.Point == protocol.RelayAfterConfirm
	}
	hit, found, err := disarmLate(ctx, env, &w, "relay-1", protocol.RelayAfterConfirm, protocol.RelayAfterConfirm, match)
	require.NoError(t, err)
	assert.True(t, found, "the frozen process's hit was not found")
	assert.EqualValues(t, 1, hit.Hit)
	require.NoError(t, p.Resume())
	assert.False(t, pointArmed(t, p, protocol.RelayAfterConfirm))
}
