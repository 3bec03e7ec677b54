package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/protocol/crashpoint"
)

// maxFailedRestarts is how many restarts in a row under a restart policy
// may fail (the new incarnation exits before it is ready, or is not ready
// within its readiness timeout) before the policy gives up and the process
// is down for good: at most this many times (backoff + readiness timeout).
const maxFailedRestarts = 5

// Kinds of a process's Event.
const (
	EventExited        = "exited"         // it ended by itself
	EventRestarted     = "restarted"      // its restart policy started it again
	EventRestartFailed = "restart-failed" // a restart by its policy did not become ready
	EventGaveUp        = "gave-up"        // its policy stopped trying
)

// Event is a point of a process's life faultline did not cause: it exited
// by itself, and what its restart policy did about it.
type Event struct {
	At     time.Time
	Kind   string // EventExited, EventRestarted, EventRestartFailed, EventGaveUp
	Detail string // how it exited, the new pid, why a restart failed
}

// History is the process's exits by itself and its policy's restarts, in order.
func (p *Process) History() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.history)
}

// DownError is a process down against its restart policy: it exited by
// itself with no restart coming, or its policy gave up.
type DownError struct {
	Name   string
	Reason string
	Output string // its last lines of output
}

func (e *DownError) Error() string {
	return fmt.Sprintf("process %s is down: %s; its last output:\n%s", e.Name, e.Reason, e.Output)
}

// Down says why the process is down against its restart policy; nil while
// it runs, while its policy is restarting it, and when faultline itself
// ended it (Kill, Stop, a kill crash point: the fault that did it restarts
// it or means it to stay down).
func (p *Process) Down() error {
	p.mu.Lock()
	inc, restarting, gaveUp := p.inc, p.restarting, p.gaveUp
	byItself := inc != nil && inc.byItself
	p.mu.Unlock()
	switch {
	case gaveUp != nil:
		return &DownError{Name: p.spec.Name, Reason: gaveUp.Error(), Output: lastLines(p.outputTail(inc), outputLines)}
	case inc == nil || !inc.exited() || !byItself || restarting:
		return nil
	}
	why := "its restart policy is never"
	if p.spec.Restart.Always {
		why = "before it was ready, after a restart faultline asked for: its restart policy answers only the end of a ready process"
	}
	return &DownError{Name: p.spec.Name, Reason: fmt.Sprintf("pid %d exited by itself (%s) with no restart coming: %s", inc.pid, inc.reason, why),
		Output: lastLines(p.outputTail(inc), outputLines)}
}

// Down joins the DownError of every process down against its restart
// policy, in start order; nil if none is.
func (s *Supervisor) Down() error {
	var errs []error
	for _, p := range s.Processes() {
		errs = append(errs, p.Down())
	}
	return errors.Join(errs...)
}

// outputLines is how many lines of its output a DownError carries.
const outputLines = 10

// lastLines is the last n lines of text.
func lastLines(text string, n int) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// endedByUs records that faultline ends inc (before it signals it), so its
// exit is not one its restart policy answers.
func (p *Process) endedByUs(inc *incarnation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	inc.ours = true
}

// markReady records that inc became ready; if it has already exited by
// itself, its restart policy takes it up now.
func (p *Process) markReady(inc *incarnation) {
	p.mu.Lock()
	inc.ready = true
	queued := p.queueLocked(inc)
	p.mu.Unlock()
	if queued {
		go p.supervise(inc)
	}
}

// onExit is told, before inc.done is closed, that inc has ended and been
// reaped: an end by itself is recorded and, under restart: always, a
// restart queued.
func (p *Process) onExit(inc *incarnation) {
	p.mu.Lock()
	inc.byItself = !inc.ours && !(inc.killArmed && inc.reason == "killed by SIGKILL")
	if inc.byItself && inc.ready {
		p.history = append(p.history, Event{At: time.Now(), Kind: EventExited, Detail: fmt.Sprintf("pid %d: %s", inc.pid, inc.reason)})
	}
	queued := p.queueLocked(inc)
	p.mu.Unlock()
	switch {
	case queued:
		p.sup.logf(p.spec.Name, "pid %d exited by itself; restart (policy always) in %s", inc.pid, p.spec.Restart.Backoff)
		go p.supervise(inc)
	case inc.byItself && inc.ready:
		p.sup.logf(p.spec.Name, "pid %d exited by itself; no restart (policy never)", inc.pid)
	}
}

// queueLocked reports whether inc's end is one for its restart policy to
// answer, now and not already: it became ready, then exited by itself,
// is still the current incarnation, and the policy is always. The caller
// holds p.mu.
func (p *Process) queueLocked(inc *incarnation) bool {
	if !p.spec.Restart.Always || inc.queued || !inc.ready || !inc.byItself || p.inc != inc {
		return false
	}
	inc.queued, p.restarting = true, true
	return true
}

// supervise restarts the process after prev ended by itself: after the
// backoff, again after each failed restart, until one becomes ready,
// maxFailedRestarts fail in a row (then it is down: see Down), someone
// else restarted it, or StopAll ends the supervisor's life.
func (p *Process) supervise(prev *incarnation) {
	s := p.sup
	done := func(gaveUp error) {
		p.mu.Lock()
		p.restarting = false
		if gaveUp != nil {
			p.gaveUp = gaveUp
			p.history = append(p.history, Event{At: time.Now(), Kind: EventGaveUp, Detail: gaveUp.Error()})
		}
		p.mu.Unlock()
	}
	for failed := 0; ; {
		if wait(s.life, p.spec.Restart.Backoff) != nil || p.current() != prev {
			done(nil) // stopped, or restarted meanwhile by whoever ended it
			return
		}
		inc, err := p.restart(s.life, fmt.Sprintf("policy always, after pid %d %s", prev.pid, prev.reason), nil)
		if err == nil {
			p.mu.Lock()
			p.history = append(p.history, Event{At: time.Now(), Kind: EventRestarted, Detail: fmt.Sprintf("pid %d (incarnation %d)", inc.pid, inc.n)})
			p.mu.Unlock()
			done(nil)
			return
		}
		if s.life.Err() != nil || inc == nil {
			// Stopped under it, or nothing could be spawned at all.
			if inc == nil && s.life.Err() == nil {
				done(fmt.Errorf("restart policy always: %w", err))
			} else {
				done(nil)
			}
			return
		}
		failed++
		p.mu.Lock()
		p.history = append(p.history, Event{At: time.Now(), Kind: EventRestartFailed, Detail: firstLine(err.Error())})
		p.mu.Unlock()
		s.logf(p.spec.Name, "restart %d of at most %d in a row failed: %s", failed, maxFailedRestarts, firstLine(err.Error()))
		if failed >= maxFailedRestarts {
			done(fmt.Errorf("restart policy always gave up after %d restarts in a row that never became ready (last: %s)", failed, firstLine(err.Error())))
			return
		}
		prev = inc
	}
}

// wait waits d, or until ctx ends (its error).
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// armsKill reports whether env arms a crash point with the kill action.
func armsKill(env []string) bool {
	for _, kv := range env {
		list, ok := strings.CutPrefix(kv, crashpoint.EnvVar+"=")
		if !ok {
			continue
		}
		points, err := crashpoint.ParseList(list)
		if err != nil {
			continue // the process refuses it at start: it never becomes ready
		}
		for _, a := range points {
			if a.Action == crashpoint.Kill {
				return true
			}
		}
	}
	return false
}
