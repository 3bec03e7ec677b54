package fault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/protocol"

	"github.com/jackc/pgx/v5"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
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
//
// At a relay's claim (the outbox written Processing) the claim is held at
// its COMMIT, the relay frozen there and the claim let through (see
// claimHold), and the fault acts on it there: frozen,
// its sockets drained and its database sessions idle, the claimed row
// still Processing under that claim, or the window did not open (it had
// gone on to write the row). The link faults land while it is frozen; it
// is thawed for them to act on, unless the action is on the frozen process
// at once. With UntilTakeover a pause lasts until another relay's claim of
// the row commits (at most TakeoverWait of Hold and the lease).
type OnCommit struct {
	Process      history.Ref   `json:"process"` // instance reference: "producer", "relay-1", "consumer"
	Action       string        `json:"action"`  // ActKill, ActPause or ActNone
	Nth          int           `json:"hit"`
	Hold         time.Duration `json:"hold"`          // for ActPause
	RestartAfter time.Duration `json:"restart_after"` // for ActKill
	ToxicLink    history.Link  `json:"link"`          // a link to put Toxic on at the commit
	Toxic        proxies.Toxic `json:"toxic"`
	ToxicFor     time.Duration `json:"duration"`
	// Table is history.TableOutbox, TableFacts, TableEffects, TablePosition, or
	// TablePublish: then the commit waited for is a publish of any
	// process's (seen on the broker, its publisher unknown).
	Table string `json:"table"`
	// Status, for the outbox: the new status the write must set
	// ("Processing": a claim).
	Status   string         `json:"status"`
	Cut      []history.Link `json:"cut"` // link references to take down CutAfter after the commit
	CutAfter time.Duration  `json:"cut_after"`
	CutFor   time.Duration  `json:"cut_for"`   // how long they stay down
	ActAfter time.Duration  `json:"act_after"` // between the link faults and the action
	// UntilTakeover, for ActPause at a relay's claim: frozen until another
	// relay claims the row.
	UntilTakeover bool `json:"until_takeover"`
	// ToxicUntilOvertaken, at a relay's claim, keeps Toxic on until
	// another relay's claim of the row commits (at most TakeoverWait of
	// ToxicFor and the lease; not seen, the window did not open). A
	// latency that holds back what the relay sends then lets its late
	// write through the moment it is late, however slow the machine. (An
	// offset relay's mark has no such cause: its group may wait on the
	// lock the held-back relay holds.)
	ToxicUntilOvertaken bool    `json:"toxic_until_overtaken"`
	Trigger             Trigger `json:"trigger"`
}

// KindOnCommit is the black-box window fault's kind, as a schedule names
// it.
const KindOnCommit = "on-commit"

func init() {
	register(Desc[OnCommit]{
		Name:    KindOnCommit,
		Example: OnCommit{Process: "relay-1", Table: history.TableOutbox, Status: "Processing", Nth: 2, Trigger: Trigger{AfterOrders: 10}, ToxicLink: "relay-1.amqp", Toxic: proxies.Latency{Latency: 150 * time.Millisecond, Stream: proxies.Downstream}, ToxicFor: time.Second, Cut: []history.Link{"relay-1.pg"}, CutFor: time.Second, Action: ActKill, RestartAfter: RestartAfter},
		Doc:     "at the n-th commit of an instance's write to a watched table: a toxic, links cut, then a kill or a freeze (a black-box window, no crash point)",
		Opens:   "blackbox.<role>.<table>[.<status>]",
		Check:   checkOnCommit,
		Window:  func(c OnCommit) (history.Ref, string) { return c.Process, BlackBoxWindow(c.Process, c.Table, c.Status) },
		Touches: func(c OnCommit) Touch {
			t := Touch{Instances: []history.Ref{c.Process}, Links: slices.Clone(c.Cut)}
			if c.ToxicLink != "" {
				t.Links = append([]history.Link{c.ToxicLink}, t.Links...)
			}
			return t
		},
		Trigger:   func(c OnCommit) Trigger { return c.Trigger },
		Enumerate: enumerateOnCommits,
		Offered: func(s *Surface) []Offer {
			var out []Offer
			for _, role := range protocol.Roles() {
				table, status, ok := s.BlackBoxTable(role)
				if ok && s.Watches(table) && len(s.Processes[role]) > 0 {
					out = append(out, Offer{Name: BlackBoxWindow(history.Ref(role), table, status), Role: role, By: s.Processes[role]})
				}
			}
			return out
		},
		Shrink: func(c OnCommit, sh *Shrink[OnCommit]) {
			for _, h := range Earlier(int64(c.Nth)) {
				g := c
				g.Nth = int(h)
				sh.Add(fmt.Sprintf("commit #%d → #%d", c.Nth, h), g)
			}
			sh.Trigger(func(c *OnCommit) *Trigger { return &c.Trigger })
			sh.Shorter("hold", func(c *OnCommit) *time.Duration { return &c.Hold })
			sh.Shorter("cut", func(c *OnCommit) *time.Duration { return &c.CutFor })
			sh.Shorter("toxic", func(c *OnCommit) *time.Duration { return &c.ToxicFor })
			sh.None("restart after", func(c *OnCommit) *time.Duration { return &c.RestartAfter })
		},
	})
}

// checkOnCommit refuses an OnCommit read from a schedule that is not sound.
func checkOnCommit(p OnCommit) error {
	var errs []error
	if p.Process == "" {
		errs = append(errs, errors.New("on-commit fault: needs process"))
	}
	switch p.Table {
	case history.TableOutbox, history.TableFacts, history.TableEffects, history.TablePosition, history.TablePublish:
	default:
		errs = append(errs, fmt.Errorf("on-commit fault: table %q: want %s, %s, %s, %s or %s", p.Table, history.TableOutbox, history.TableFacts, history.TableEffects, history.TablePosition, history.TablePublish))
	}
	switch p.Action {
	case ActKill, ActPause, ActNone:
	default:
		errs = append(errs, fmt.Errorf("on-commit fault: action %q: want %s, %s or %s", p.Action, ActKill, ActPause, ActNone))
	}
	if p.Nth < 0 {
		errs = append(errs, fmt.Errorf("on-commit fault: hit %d: want 1 or more", p.Nth))
	}
	if (p.ToxicLink == "") != (p.Toxic == nil) {
		errs = append(errs, errors.New("on-commit fault: link and toxic go together"))
	}
	if p.ToxicUntilOvertaken && (p.ToxicLink == "" || p.Table != history.TableOutbox || p.Status != "Processing") {
		errs = append(errs, errors.New("on-commit fault: toxic_until_overtaken needs a toxic, at a claim (table outbox, status Processing)"))
	}
	return errors.Join(errs...)
}

// enumerateOnCommits are the black-box windows: for each instance whose
// role writes a watched table, at the commit of its 1st..hits-th write
// there, it is killed, frozen past the lease, or its database link is cut
// for a lease — with what holds the window open from outside: a
// producer's broker link down first (a publish after the commit cannot
// slip out before the kill), a relay's confirms slowed a little (the kill
// lands before it marks).
func enumerateOnCommits(s *Surface, hits int) []Candidate {
	var out []Candidate
	for _, in := range s.Instances {
		table, status, ok := s.BlackBoxTable(in.Role)
		if !ok || !s.Watches(table) {
			continue
		}
		at := Trigger{AfterOrders: SyncAfter}
		after := at // once the opening fault, if any, has landed
		var open Opening
		switch in.Role {
		case protocol.Producer:
			if l := in.Ref.Broker(); s.HasLink(l) {
				open.Faults = []Fault{LinkDown{Link: l, Trigger: at, Duration: 2 * s.Lease}}
				open.Keys = []string{LinkKey(l)}
				after.AfterLink = l
			}
		case protocol.Relay:
			if l := in.Ref.Broker(); s.HasLink(l) {
				open.Faults = []Fault{Toxic{Link: l, Toxic: proxies.Latency{Latency: 150 * time.Millisecond, Stream: proxies.Downstream}, Trigger: at, Duration: 4 * s.Lease}}
				open.Keys = []string{LinkKey(l)}
				after.AfterLink = l
			}
		}
		key := "commit:" + string(in.Ref)
		for hit := 1; hit <= hits; hit++ {
			depth := (hit - 1) + (in.N - 1)
			c := OnCommit{Process: in.Ref, Table: table, Status: status, Nth: hit, Trigger: after}
			kill, pause := c, c
			kill.Action, kill.RestartAfter = ActKill, RestartAfter
			pause.Action, pause.Hold = ActPause, Hold(s.Lease)
			out = append(out, open.Candidate(kill, depth, key), open.Candidate(pause, depth, key))
			if l := in.Ref.DB(); s.HasLink(l) {
				cut := c
				cut.Action, cut.Cut, cut.CutFor = ActNone, []history.Link{l}, s.Lease
				out = append(out, open.Candidate(cut, depth, key))
			}
		}
	}
	return out
}

// Observes implements Observer: the commits it is timed by, and the
// publishes where a publish times it.
func (c OnCommit) Observes() []history.Source {
	if c.Table == history.TablePublish {
		return []history.Source{history.SourceCommits, history.SourcePublishes}
	}
	return []history.Source{history.SourceCommits}
}

func (c OnCommit) what() string {
	if c.Table == history.TablePublish {
		return "publish (seen on the broker)"
	}
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
	return result.Fault{Kind: kind, Target: string(c.Process), Detail: detail}
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
	return withWaits(func(w *waits) result.Fault { return c.inject(ctx, env, w) })
}

// inject is Inject, recording what it waits for in w.
func (c OnCommit) inject(ctx context.Context, env *Env, w *waits) result.Fault {
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
	var hold *takeoverHold
	if c.ToxicUntilOvertaken {
		var drop func()
		if hold, drop, err = holdTakeovers(ctx, env, in.Name); err != nil {
			return record(c, start, false, err)
		}
		defer drop()
	}
	var claim *claimHold
	if c.pins() {
		var why string
		if claim, why, err = holdClaim(ctx, env, in.Name, max(c.Nth, 1)); err != nil {
			return record(c, start, false, err)
		}
		if claim == nil {
			env.Logf("%s: its claim is not held at its COMMIT (frozen once the commit is told): %s", in.Name, why)
		} else {
			defer func() {
				if err := claim.drop(ctx); err != nil {
					env.Logf("remove the claim hold: %v", err)
				}
			}()
		}
	}
	var commit history.Commit
	if claim != nil {
		if commit, err = claim.freeze(ctx, env, p, max(c.Nth, 1), w); err != nil {
			return record(c, start, false, err)
		}
	} else {
		waited := time.Now()
		wctx, cancel := context.WithTimeout(ctx, env.Deadline)
		seen := 0
		commit, err = env.Commits.Wait(wctx, func(cm history.Commit) bool {
			if cm.Table != c.Table || (c.Table != history.TablePublish && cm.Writer != in.Name) || (c.Status != "" && cm.Status != c.Status) {
				return false
			}
			seen++
			return seen >= max(c.Nth, 1)
		})
		cancel()
		if err != nil {
			err = fmt.Errorf("no commit of %s by %s seen within %s: %w", c.what(), in.Name, env.Deadline, err)
		}
		w.add(fmt.Sprintf("the commit of %s's %s #%d", in.Name, c.what(), max(c.Nth, 1)), waited, env.Deadline, commit.EventID, err)
		if err != nil {
			return record(c, start, false, err)
		}
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
	saw := "" // what the fault waited for and saw, after the commit
	done := func(hit bool, err error) result.Fault {
		endLinks()
		r := record(c, start, hit, err)
		r.Detail += saw
		seen := "commit"
		if commit.EventID != "" {
			seen += " of " + commit.EventID
		}
		r.Detail += fmt.Sprintf(" — %s seen at %s", seen, commit.At.Format("15:04:05.000"))
		if commit.EventID != "" {
			r.EventIDs = []string{commit.EventID}
		}
		r.UndoError = strings.Join(undoErrs, "; ")
		return r
	}
	pinned := c.pins()
	if pinned {
		if ok, err := c.pin(ctx, env, p, in.Name, commit, claim != nil, w); err != nil || !ok {
			if rerr := p.Resume(); rerr != nil {
				undid(fmt.Errorf("resume %s: %w", in.Name, rerr))
			}
			return done(false, err)
		}
	}
	// thaw lets the pinned relay go on, for the link faults to act on
	// what it does next.
	thaw := func() error {
		if !pinned {
			return nil
		}
		pinned = false
		if err := p.Resume(); err != nil {
			return fmt.Errorf("resume %s: %w", in.Name, err)
		}
		return nil
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
	// A kill or a freeze of the pinned relay lands where it was pinned;
	// anything the links must act on first needs it running.
	if len(c.Cut) > 0 || c.ActAfter > 0 || c.Action == ActNone {
		if err := thaw(); err != nil {
			return done(true, err)
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
	if c.ToxicUntilOvertaken && untoxic != nil {
		within := TakeoverWait(c.ToxicFor, env.Lease)
		taken, holdErr, undoErr := lateAfterTakeover(ctx, w, hold, within, func() (string, error) {
			return waitClaimTakenOver(ctx, env, w, in.Name, commit, within)
		}, untoxic)
		if holdErr == nil {
			saw += "; " + taken
		}
		undid(undoErr)
		untoxic = nil
		if holdErr != nil {
			return done(!errors.Is(holdErr, errUnseen), holdErr)
		}
	}
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
		if pinned {
			break // frozen already
		}
		if actErr = p.Pause(); actErr == nil {
			env.Logf("%s frozen (SIGSTOP)", in.Name)
		}
	}
	if actErr != nil {
		return done(true, actErr)
	}
	switch c.Action {
	case ActKill:
		killed := time.Now()
		// A log relay killed at a publish: its window was open only if its
		// slot had not confirmed past the row yet.
		var behind error
		if c.Table == history.TablePublish && env.RelayModel == history.ModelLog {
			var ok bool
			var position string
			ok, position, behind = slotBehindAtDeath(ctx, env, commit.EventID, env.Deadline)
			if ok {
				saw += "; " + position
			}
		}
		endLinks()
		if err := pause(ctx, c.RestartAfter-time.Since(killed)); err != nil {
			return done(true, err)
		}
		if err := p.Restart(ctx); err != nil {
			undid(fmt.Errorf("restart %s: %w", in.Name, err))
		}
		if behind != nil {
			return done(!errors.Is(behind, errUnseen), behind)
		}
	case ActPause:
		var holdErr error
		taken := ""
		if c.UntilTakeover && commit.EventID != "" {
			if taken, holdErr = waitClaimTakenOver(ctx, env, w, in.Name, commit, TakeoverWait(c.Hold, env.Lease)); holdErr == nil {
				taken = "; " + taken
			}
		} else {
			holdErr = pause(ctx, c.Hold)
		}
		if err := p.Resume(); err != nil {
			undid(fmt.Errorf("resume %s: %w", in.Name, err))
		}
		r := done(!errors.Is(holdErr, errUnseen), holdErr)
		r.Detail += taken
		return r
	}
	return done(true, nil)
}

// pins says whether the fault freezes its process at the commit: at a
// relay's claim, where a relay left running can publish, be confirmed
// and write the row before faultline acts.
func (c OnCommit) pins() bool { return c.Table == history.TableOutbox && c.Status == "Processing" }

// pin freezes the relay whose claim committed (unless frozen already: its
// claim was held at its COMMIT, see claimHold) and reports whether it is
// still where the window is: its sockets drained and its database
// sessions idle (nothing it sent can still land), the claimed row still
// Processing under that claim. It returns an error saying why when it is
// not; the relay is left frozen either way. w records what it waits for.
func (c OnCommit) pin(ctx context.Context, env *Env, p *supervisor.Process, name string, commit history.Commit, frozen bool, w *waits) (bool, error) {
	if !frozen {
		if err := p.Pause(); err != nil {
			return false, fmt.Errorf("freeze %s at its claim: %w", name, err)
		}
	}
	if err := waitSent(ctx, env, p, w); err != nil {
		return false, err
	}
	ob := env.Observe.Outbox
	pool, ok := env.DB[ob.Database]
	if !ok || ob.Status == "" || ob.EventID == "" || commit.EventID == "" {
		return true, nil // nothing to read the row by: the freeze itself is the pin
	}
	// Frozen, the relay starts nothing new; what its sessions were running
	// ends (a COMMIT on its way lands before the row is read).
	if err := w.wait(fmt.Sprintf("%s's database sessions to be idle", name), env.Deadline, func() (string, error) {
		return "", poll.Until(ctx, env.Deadline, 10*time.Millisecond, func() (bool, error) {
			var active int
			err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'`, name).Scan(&active)
			return err == nil && active == 0, err
		})
	}); err != nil {
		return false, fmt.Errorf("window not opened: %s's database sessions still busy after it was frozen: %w", name, err)
	}
	table := pgx.Identifier(target.Ident(ob.Name)).Sanitize()
	claim := "NULL"
	if ob.Claim != "" {
		claim = pgx.Identifier{ob.Claim}.Sanitize() + "::text"
	}
	var status string
	var held *string
	q := fmt.Sprintf("SELECT %s::text, %s FROM %s WHERE %s::text = $1", pgx.Identifier{ob.Status}.Sanitize(), claim, table, pgx.Identifier{ob.EventID}.Sanitize())
	if err := pool.QueryRow(ctx, q, commit.EventID).Scan(&status, &held); err != nil {
		return false, fmt.Errorf("window not opened: read %s's claimed row %s: %w", name, commit.EventID, err)
	}
	if s := ob.ArticleStatus(status); s != "Processing" {
		return false, fmt.Errorf("window not opened: %s had already written %s to %s when it was frozen", name, s, commit.EventID)
	}
	if held != nil && commit.Claim != "" && *held != commit.Claim {
		return false, fmt.Errorf("window not opened: %s was under another claim (%s) when %s was frozen", commit.EventID, *held, name)
	}
	return true, nil
}

// waitClaimTakenOver waits, at most within, for another relay's claim of
// the row name claimed to commit (the commit feed); it records the wait in
// w and says what it saw, or that the window did not open (errUnseen).
func waitClaimTakenOver(ctx context.Context, env *Env, w *waits, name string, commit history.Commit, within time.Duration) (seen string, err error) {
	err = w.wait(fmt.Sprintf("another relay's claim of %s, claimed by %s, to commit", commit.EventID, name), within, func() (string, error) {
		if commit.EventID == "" {
			return "", fmt.Errorf("window not opened: %w: %s's claim named no eventId (observe.outbox.event_id) to see it taken over by", errUnseen, name)
		}
		started := time.Now()
		wctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		taken, err := env.Commits.Wait(wctx, func(cm history.Commit) bool {
			return cm.Table == history.TableOutbox && cm.EventID == commit.EventID && cm.Status == "Processing" && cm.Writer != name
		})
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", fmt.Errorf("window not opened: %w of %s's claim of %s by another relay in %s", errUnseen, name, commit.EventID, within)
		}
		seen = fmt.Sprintf("%s took %s over after %s", taken.Writer, commit.EventID, time.Since(started).Round(time.Millisecond))
		return seen, nil
	})
	return seen, err
}
