package supervisor

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exitByItself asks testproc to exit with code, as a program that
// crashes on its own would (testproc never answers: it is gone).
func exitByItself(t *testing.T, p *Process, code string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.ControlAddr()+"/exit/"+code, nil)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
	}
}

func kinds(events []Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Kind)
	}
	return out
}

func (p *Process) restartQueued() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarting
}

// TestRestartPolicy: under restart: always a process that exits by itself
// is started again after its backoff; one faultline ended (Kill, a kill
// crash point, StopAll) is not; under never it stays down, and Down says
// so with its last output.
func TestRestartPolicy(t *testing.T) {
	t.Parallel()
	always := Restart{Always: true, Backoff: 100 * time.Millisecond}
	tests := []struct {
		name    string
		restart Restart
		args    []string
		end     func(t *testing.T, s *Supervisor, p *Process)
		// then
		restarted bool     // a second incarnation runs
		history   []string // kinds of p.History()
		down      []string // what Down's error says; nil: not down
	}{
		{
			name: "always: an exit by itself is restarted", restart: always,
			end:       func(t *testing.T, _ *Supervisor, p *Process) { exitByItself(t, p, "1") },
			restarted: true, history: []string{EventExited, EventRestarted},
		},
		{
			name: "never: an exit by itself is down", restart: Restart{},
			end:     func(t *testing.T, _ *Supervisor, p *Process) { exitByItself(t, p, "1"); waitExit(t, p) },
			history: []string{EventExited},
			down:    []string{"process relay-1 is down", "exited by itself (exit status 1)", "restart policy is never", "testproc exiting with status 1"},
		},
		{
			name: "always: a restart that never becomes ready gives up", restart: Restart{Always: true, Backoff: 10 * time.Millisecond},
			args:    []string{"--once", "ONCE"},
			end:     func(t *testing.T, _ *Supervisor, p *Process) { exitByItself(t, p, "1") },
			history: []string{EventExited, EventRestartFailed, EventRestartFailed, EventRestartFailed, EventRestartFailed, EventRestartFailed, EventGaveUp},
			down:    []string{"process relay-1 is down", "gave up after 5 restarts in a row", "testproc runs once"},
		},
		{
			name: "always: a kill is the fault's", restart: always,
			end: func(t *testing.T, _ *Supervisor, p *Process) { require.NoError(t, p.Kill()) },
		},
		{
			name: "always: a kill crash point is the fault's", restart: always,
			end: func(t *testing.T, _ *Supervisor, p *Process) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				require.NoError(t, p.Arm(ctx, afterConfirm, "kill@1"))
				_, _, _ = get(p.ControlAddr(), "/hit/"+afterConfirm, 5*time.Second)
				waitExit(t, p)
			},
		},
		{
			name: "always: StopAll restarts nothing", restart: always,
			end: func(t *testing.T, s *Supervisor, _ *Process) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				require.NoError(t, s.StopAll(ctx))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, log := newSupervisorLog(t)
			args := tt.args
			if len(args) == 2 && args[0] == "--once" {
				args = []string{"--once", filepath.Join(t.TempDir(), args[1])}
			}
			spec := testSpec(t, s, "relay-1", args...)
			spec.Restart = tt.restart
			p := start(t, s, spec)
			first, exited := p.Pid(), p.Exited()

			tt.end(t, s, p)
			select { // its restart policy has decided once the first incarnation is seen to end
			case <-exited:
			case <-time.After(10 * time.Second):
				require.FailNow(t, "the first incarnation never ended")
			}

			if tt.restarted || tt.down != nil && tt.restart.Always {
				// The policy works on its own clock: wait for what it ends in.
				require.Eventually(t, func() bool { return !p.restartQueued() }, 30*time.Second, 10*time.Millisecond, "the policy never settled:\n%s", log.String())
			}
			if tt.restarted {
				require.True(t, p.Running())
				assert.NotEqual(t, first, p.Pid())
				assert.Equal(t, 2, p.incarnations())
				requireHealthy(t, p)
				assert.Contains(t, log.String(), "exited by itself; restart (policy always) in 100ms")
				assert.Contains(t, log.String(), "restarted pid")
			} else {
				// The decision is taken before the exit is seen: nothing queued
				// now is nothing restarted later.
				assert.False(t, p.restartQueued() && tt.down == nil, "a restart is queued")
			}
			assert.Equal(t, tt.history, kinds(p.History()))
			err := p.Down()
			if tt.down == nil {
				assert.NoError(t, err)
				assert.NoError(t, s.Down())
				return
			}
			var down *DownError
			require.True(t, errors.As(s.Down(), &down), "want a *DownError, got %v", s.Down())
			assert.Equal(t, "relay-1", down.Name)
			for _, want := range tt.down {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}
