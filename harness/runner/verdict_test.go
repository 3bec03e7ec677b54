package runner

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/ports"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/safe"
	"github.com/faultline-dev/faultline/harness/supervisor"
)

// fakeLink is a link double: Down and Up succeed or fail as told.
type fakeLink struct {
	name     string
	upErr    error
	down, up int
}

func (l *fakeLink) Down(context.Context) error { l.down++; return nil }

func (l *fakeLink) Up(context.Context) error {
	l.up++
	if l.upErr != nil {
		return errors.New("link " + l.name + " up: " + l.upErr.Error())
	}
	return nil
}

// outage is a fault double: it takes its link down and brings it back,
// recording, as the real faults do, an undo that failed.
type outage struct{ link *fakeLink }

func (o outage) Describe() result.Fault {
	return result.Fault{Kind: "link-down", Target: o.link.name, Detail: "down for 0s"}
}

func (o outage) Inject(ctx context.Context, _ *fault.Env) result.Fault {
	r := o.Describe()
	r.Hit = o.link.Down(ctx) == nil
	if err := o.link.Up(ctx); err != nil {
		r.UndoError = err.Error()
	}
	return r
}

// TestVerdict: a run whose fault could not be undone, or whose process
// stayed down against its restart policy, is indeterminate with the reason,
// even when the invariants broke meanwhile (what broke them is the
// harness's doing); a violation otherwise is a fail.
func TestVerdict(t *testing.T) {
	lost := result.Invariant{Name: "no-lost-event", Violations: []result.Violation{{Kind: "lost"}}}
	held := result.Invariant{Name: "no-lost-event", OK: true}
	down := &supervisor.DownError{Name: "inventory", Reason: "pid 42 exited by itself (exit status 1) with no restart coming: its restart policy is never",
		Output: "panic: connection reset\ngoroutine 1 [running]:"}
	tests := []struct {
		name        string
		restoreErr  error // the fake link's Up
		invariants  []result.Invariant
		err         error
		interrupted bool
		want        string
		reason      []string
	}{
		{name: "link restored, invariants held", invariants: []result.Invariant{held}, want: result.Pass},
		{name: "link restored, a violation", invariants: []result.Invariant{lost}, want: result.Fail, reason: []string{"invariant broken: no-lost-event"}},
		{name: "link not restored", restoreErr: errors.New("connection refused"), invariants: []result.Invariant{lost}, want: result.Indeterminate,
			reason: []string{"fault not undone: link-down consumer.pg", "link consumer.pg up: connection refused"}},
		{name: "link not restored, nothing observed", restoreErr: errors.New("connection refused"), err: errors.New("not waiting for convergence"), want: result.Indeterminate,
			reason: []string{"fault not undone: link-down consumer.pg"}},
		{name: "process stayed down, lost and not converged", invariants: []result.Invariant{lost, {Name: "converged"}}, err: errors.Join(down), want: result.Indeterminate,
			reason: []string{"process inventory is down", "exit status 1", "panic: connection reset"}},
		{name: "process down, wrapped", err: errors.Join(errors.New("other"), down), want: result.Indeterminate, reason: []string{"process inventory is down"}},
		{name: "a panic beats a violation", invariants: []result.Invariant{lost}, err: &safe.PanicError{Where: "run", Value: "boom"}, want: result.Indeterminate, reason: []string{"boom"}},
		{name: "interrupted", invariants: []result.Invariant{lost}, interrupted: true, want: result.Indeterminate, reason: []string{result.Interrupted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			link := &fakeLink{name: "consumer.pg", upErr: tt.restoreErr}
			r := &run{res: &result.Scenario{}}
			wait, _ := r.inject(context.Background(), &fault.Env{}, []fault.Fault{outage{link: link}})
			r.res.Faults = wait()
			require.Len(t, r.res.Faults, 1)
			require.True(t, r.res.Faults[0].Hit)
			require.Equal(t, 1, link.up, "the fault tried to undo itself")
			r.res.Invariants = tt.invariants

			got, reason := r.res.Judge(ending(tt.err, tt.interrupted, context.Canceled))
			assert.Equal(t, tt.want, got, reason)
			for _, want := range tt.reason {
				assert.Contains(t, reason, want)
			}
		})
	}
}

// TestCheckAddrs: a link carries traffic when the server behind it answers
// the protocol's first bytes; a proxy that accepts and then closes (its
// upstream unreachable) or nothing listening fails the check, naming the
// link.
func TestCheckAddrs(t *testing.T) {
	serve := func(t *testing.T, answer bool) string {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				if answer {
					buf := make([]byte, 8)
					if _, err := c.Read(buf); err == nil {
						_, _ = c.Write([]byte("N"))
					}
				}
				c.Close()
			}
		}()
		return ln.Addr().String()
	}
	// closed is a port nothing listens on: reserved, so that no other
	// test or run binds it meanwhile (a port picked free and closed again
	// could be taken by anything beside this test).
	closed := func(t *testing.T) string {
		alloc := ports.New()
		t.Cleanup(alloc.Close)
		addr, err := alloc.Addr()
		require.NoError(t, err)
		return addr
	}
	tests := []struct {
		name  string
		addrs func(t *testing.T) map[string]string
		want  []string // in the error; nil: no error
	}{
		{"every link answers", func(t *testing.T) map[string]string {
			return map[string]string{"consumer.pg": serve(t, true), "consumer.amqp": serve(t, true)}
		}, nil},
		{"upstream unreachable", func(t *testing.T) map[string]string {
			return map[string]string{"consumer.pg": serve(t, true), "relay-1.amqp": serve(t, false)}
		}, []string{"link relay-1.amqp", "carries no traffic"}},
		{"nothing listening", func(t *testing.T) map[string]string {
			return map[string]string{"order.pg": closed(t)}
		}, []string{"link order.pg", "dial"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkAddrs(context.Background(), tt.addrs(t), 2*time.Second)
			if tt.want == nil {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range tt.want {
				assert.Contains(t, err.Error(), want)
			}
			assert.NotContains(t, err.Error(), "consumer.pg", "a link that answers is not named")
		})
	}
}

// TestRunBoundFollowsTheLease: a run may last as long as a fault waits
// for a takeover beyond its usual bound, so a long lease keeps its
// past-lease windows.
func TestRunBoundFollowsTheLease(t *testing.T) {
	assert.Equal(t, 3*time.Minute+8*time.Second, runBound(2*time.Second))
	assert.Equal(t, 5*time.Minute, runBound(30*time.Second))
	assert.Greater(t, runBound(2*time.Minute), fault.TakeoverWait(0, 2*time.Minute))
}
