package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// Crash arms the crash point at a window of a process instance and waits
// for it to fire: kill
// (SIGKILL, then the process is restarted unless NoRestart), pause (the
// process freezes itself; it is resumed after Hold) or delay.
type Crash struct {
	Process string        // instance reference: "relay-1", "consumer"
	Point   string        // the protocol's window, e.g. protocol.RelayAfterConfirm
	Action  string        // crashpoint.Kill, Pause or Delay
	Delay   time.Duration // for Delay
	Hit     int64         // fire on this hit (1-based)
	// Trigger: zero arms the point in the environment at start, so hits
	// count from the process's start; otherwise it is armed over HTTP when
	// the trigger fires and hits count from then.
	Trigger Trigger
	// Hold is how long a paused process stays frozen.
	Hold time.Duration
	// RestartAfter is how long a killed process stays dead.
	RestartAfter time.Duration
	NoRestart    bool
}

func (c Crash) arming() string {
	return crashpoint.Arming{Action: c.Action, Delay: c.Delay, Hit: max(c.Hit, 1)}.String()
}

func (c Crash) armAtStart() bool { return c.Trigger == (Trigger{}) }

// Describe implements Fault.
func (c Crash) Describe() result.Fault {
	kind := "crash"
	if c.Action == crashpoint.Pause {
		kind = "pause"
	} else if c.Action == crashpoint.Delay {
		kind = "delay"
	}
	detail := c.Point + " " + c.arming()
	if c.Action == crashpoint.Pause {
		detail += fmt.Sprintf(", held %s", c.Hold)
	}
	if !c.armAtStart() {
		detail += ", armed " + c.Trigger.String()
	}
	return result.Fault{Kind: kind, Target: c.Process, Detail: detail}
}

// StartArming implements StartArmer.
func (c Crash) StartArming() (ref, window, arming string, ok bool) {
	return c.Process, c.Point, c.arming(), c.armAtStart()
}

// Require implements Requirer: the target offers the crash point.
func (c Crash) Require(env *Env) error {
	_, err := env.Point(c.Process, c.Point)
	return err
}

// Inject implements Fault.
func (c Crash) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	p, err := env.Process(c.Process)
	if err != nil {
		return record(c, start, false, err)
	}
	own, err := env.Point(c.Process, c.Point)
	if err != nil {
		return record(c, start, false, err)
	}
	if !c.armAtStart() {
		if err := env.Wait(ctx, c.Trigger); err != nil {
			return record(c, start, false, err)
		}
		start = time.Now()
		if err := p.Arm(ctx, own, c.arming()); err != nil {
			return record(c, start, false, err)
		}
	}
	hit, err := env.WaitLog(ctx, c.Process, func(e eventlog.Entry) bool {
		return e.Event == eventlog.CrashPoint && e.Point == own
	})
	if err != nil {
		return record(c, start, false, fmt.Errorf("crash point %s never fired: %w", c.Point, err))
	}
	env.Logf("%s hit %s (hit %d, %s)", c.Process, c.Point, hit.Hit, c.Action)
	switch c.Action {
	case crashpoint.Kill:
		waitCtx, cancel := context.WithTimeout(ctx, env.Deadline)
		err := p.WaitExit(waitCtx)
		cancel()
		if err != nil {
			return record(c, start, true, fmt.Errorf("%s did not die after its kill crash point: %w", c.Process, err))
		}
		if c.NoRestart {
			return record(c, start, true, nil)
		}
		if err := pause(ctx, c.RestartAfter); err != nil {
			return record(c, start, true, err)
		}
		if err := p.Restart(ctx); err != nil {
			return notUndone(record(c, start, true, nil), fmt.Errorf("restart %s: %w", c.Process, err))
		}
	case crashpoint.Pause:
		if err := waitStopped(ctx, env, c.Process); err != nil {
			return record(c, start, true, err)
		}
		holdErr := pause(ctx, c.Hold)
		if err := p.Resume(); err != nil {
			return notUndone(record(c, start, true, holdErr), fmt.Errorf("resume %s: %w", c.Process, err))
		}
		if holdErr != nil {
			return record(c, start, true, holdErr)
		}
	}
	return record(c, start, true, nil)
}

// waitStopped waits until the process is frozen (state T).
func waitStopped(ctx context.Context, env *Env, name string) error {
	p, err := env.Process(name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, env.Deadline)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if stopped, err := p.Stopped(); err == nil && stopped {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not freeze at its pause crash point", name)
		case <-tick.C:
		}
	}
}
