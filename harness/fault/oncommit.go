package fault

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/proxies"
)

// Actions on a process at a commit.
const (
	ActKill  = "kill"  // SIGKILL, then restarted after RestartAfter
	ActPause = "pause" // SIGSTOP for Hold, then SIGCONT
	ActNone  = "none"  // only the link faults
)

// OnCommit is a black-box window: it needs nothing of the target but its
// target file. After the trigger it waits for the Nth commit of a write by
// the process instance to a watched table (the trigger faultline installed
// notifies it when the writing transaction commits, naming the writer by
// the application_name faultline gave the instance), then — at once — puts
// Toxic on ToxicLink (for ToxicFor), after CutAfter cuts the links in Cut
// (for CutFor), after ActAfter more kills or freezes the instance. Its result says which commit it saw
// and when it acted: the evidence that the window opened.
type OnCommit struct {
	Process string // instance reference: "producer", "relay-1", "consumer"
	Table   string // TableOutbox, TableFacts, TableEffects
	// Status, for the outbox: the new status the write must set
	// ("Processing": a claim).
	Status  string
	Nth     int
	Trigger Trigger

	Cut       []string // link references to take down CutAfter after the commit
	CutAfter  time.Duration
	CutFor    time.Duration // how long they stay down
	ToxicLink string        // a link to put Toxic on at the commit
	Toxic     proxies.Toxic
	ToxicFor  time.Duration

	ActAfter     time.Duration // between the link faults and the action
	Action       string        // ActKill, ActPause or ActNone
	Hold         time.Duration // for ActPause
	RestartAfter time.Duration // for ActKill
}

// WaitsForCommits implements CommitWaiter.
func (c OnCommit) WaitsForCommits() {}

func (c OnCommit) what() string {
	s := c.Table + " write"
	if c.Status != "" {
		s = c.Table + " write to " + c.Status
	}
	return s
}

// Describe implements Fault.
func (c OnCommit) Describe() result.Fault {
	detail := fmt.Sprintf("at the commit of %s's write #%d (%s), %s", c.Process, max(c.Nth, 1), c.what(), c.Trigger)
	if c.ToxicLink != "" {
		detail += fmt.Sprintf("; %s %s on %s for %s", c.Toxic.Type(), c.Toxic.Direction(), c.ToxicLink, c.ToxicFor)
	}
	if len(c.Cut) > 0 {
		detail += fmt.Sprintf("; links %v cut %s later for %s", c.Cut, c.CutAfter, c.CutFor)
	}
	switch c.Action {
	case ActKill:
		detail += fmt.Sprintf("; then SIGKILL after %s, restarted after %s", c.ActAfter, c.RestartAfter)
	case ActPause:
		detail += fmt.Sprintf("; then SIGSTOP after %s for %s", c.ActAfter, c.Hold)
	}
	kind := "black-box"
	return result.Fault{Kind: kind, Target: c.Process, Detail: detail}
}

// Require implements Requirer: the instance and the links.
func (c OnCommit) Require(env *Env) error {
	if _, err := env.Roles.Instance(c.Process); err != nil {
		return err
	}
	for _, l := range c.Cut {
		if _, err := env.Roles.Link(l); err != nil {
			return err
		}
	}
	if c.ToxicLink != "" {
		if _, err := env.Roles.Link(c.ToxicLink); err != nil {
			return err
		}
	}
	switch c.Action {
	case ActKill, ActPause, ActNone:
	default:
		return fmt.Errorf("black-box fault: unknown action %q", c.Action)
	}
	return nil
}

// Inject implements Fault.
func (c OnCommit) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	in, err := env.Roles.Instance(c.Process)
	if err != nil {
		return record(c, start, false, err)
	}
	p, err := env.Process(c.Process)
	if err != nil {
		return record(c, start, false, err)
	}
	if err := env.Wait(ctx, c.Trigger); err != nil {
		return record(c, start, false, err)
	}
	wctx, cancel := context.WithTimeout(ctx, env.Deadline)
	seen := 0
	commit, err := env.Commits.Wait(wctx, func(cm Commit) bool {
		if cm.Table != c.Table || cm.Writer != in.Name || (c.Status != "" && cm.Status != c.Status) {
			return false
		}
		seen++
		return seen >= max(c.Nth, 1)
	})
	cancel()
	if err != nil {
		return record(c, start, false, fmt.Errorf("no commit of %s by %s seen within %s: %w", c.what(), in.Name, env.Deadline, err))
	}
	start = time.Now()
	// What the fault did to the links is undone on its own clock, from the
	// commit, by endLinks, on every way out once anything was done; what
	// could not be undone (a toxic left on, a link left down, a process
	// left frozen or dead) goes to the result's UndoError.
	var undoErrs []string
	undid := func(err error) {
		if err != nil {
			undoErrs = append(undoErrs, err.Error())
		}
	}
	var untoxic func() error
	var ups []func() error
	ended := false
	endLinks := func() {
		if ended {
			return
		}
		ended = true
		// pause fails only when ctx ends: then the links are undone at once.
		if untoxic != nil {
			_ = pause(ctx, c.ToxicFor-time.Since(start))
			undid(untoxic())
		}
		if len(ups) > 0 {
			_ = pause(ctx, c.CutAfter+c.CutFor-time.Since(start))
			for _, up := range ups {
				undid(up())
			}
		}
	}
	done := func(hit bool, err error) result.Fault {
		endLinks()
		r := record(c, start, hit, err)
		r.Detail += fmt.Sprintf(" — commit of %s seen at %s", commit.EventID, commit.At.Format("15:04:05.000"))
		if commit.EventID != "" {
			r.EventIDs = []string{commit.EventID}
		}
		r.UndoError = strings.Join(undoErrs, "; ")
		return r
	}
	if c.ToxicLink != "" {
		link, err := env.Link(c.ToxicLink)
		if err != nil {
			return done(false, err)
		}
		applied, err := link.Add(ctx, c.Toxic)
		if err != nil {
			return done(false, fmt.Errorf("toxic on %s: %w", c.ToxicLink, err))
		}
		untoxic = func() error {
			if err := applied.Remove(context.WithoutCancel(ctx)); err != nil {
				return fmt.Errorf("remove the toxic on %s: %w", c.ToxicLink, err)
			}
			return nil
		}
	}
	if len(c.Cut) > 0 {
		if err := pause(ctx, c.CutAfter); err != nil {
			return done(true, err)
		}
	}
	for _, ref := range c.Cut {
		link, err := env.Link(ref)
		if err != nil {
			return done(false, err)
		}
		if err := link.Down(ctx); err != nil {
			return done(false, fmt.Errorf("cut %s: %w", ref, err))
		}
		ups = append(ups, func() error { return link.Up(context.WithoutCancel(ctx)) }) // its error names the link
	}
	env.Logf("%s committed a %s (eventId %s) at %s; acting %s later", in.Name, c.what(), commit.EventID, commit.At.Format("15:04:05.000"), time.Since(commit.At).Round(time.Microsecond))
	if err := pause(ctx, c.ActAfter); err != nil {
		return done(true, err)
	}
	var actErr error
	switch c.Action {
	case ActKill:
		if actErr = p.Kill(); actErr == nil {
			env.Logf("%s killed (SIGKILL)", in.Name)
		}
	case ActPause:
		if actErr = p.Pause(); actErr == nil {
			env.Logf("%s frozen (SIGSTOP)", in.Name)
		}
	}
	if actErr != nil {
		return done(true, actErr)
	}
	switch c.Action {
	case ActKill:
		endLinks()
		if err := pause(ctx, c.RestartAfter); err != nil {
			return done(true, err)
		}
		if err := p.Restart(ctx); err != nil {
			undid(fmt.Errorf("restart %s: %w", in.Name, err))
		}
	case ActPause:
		holdErr := pause(ctx, c.Hold)
		if err := p.Resume(); err != nil {
			undid(fmt.Errorf("resume %s: %w", in.Name, err))
		}
		return done(true, holdErr)
	}
	return done(true, nil)
}
