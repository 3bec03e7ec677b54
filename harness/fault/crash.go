package fault

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// Crash arms the crash point at a window of a process instance and waits
// for it to fire: kill (SIGKILL, then the process is restarted unless
// NoRestart), pause (the process freezes itself; it is resumed after Hold),
// delay, or hold (only the call site waits, until what the fault waits
// for is seen: UntilRouted).
//
// A kill is made at the point, not by it: the point freezes the process
// (the protocol's pause), faultline waits until everything the frozen
// process wrote has been read by the processes at the other end of its
// sockets, and then sends SIGKILL. What the process did before the point
// (an ack, a publish) has then reached its peer, however slow the
// machine: killed by its own point, a process whose sockets hold unread
// input is reset, and a reset discards what it had written and not yet
// sent, and what its peer had received and not yet read.
type Crash struct {
	Process history.Ref   `json:"process"` // instance reference: "relay-1", "consumer"
	Point   string        `json:"point"`   // the protocol's window, e.g. protocol.RelayAfterConfirm
	Action  string        `json:"action"`  // crashpoint.Kill, Pause, Delay or Hold
	Hit     int64         `json:"hit"`     // fire on this hit (1-based)
	Delay   time.Duration `json:"delay"`   // for Delay
	// Hold is how long a paused process stays frozen; with UntilTakeover,
	// the least of the longest it waits for the takeover (TakeoverWait).
	Hold time.Duration `json:"hold"`
	// RestartAfter is how long a killed process stays dead.
	RestartAfter time.Duration `json:"restart_after"`
	NoRestart    bool          `json:"no_restart"`
	// UntilTakeover keeps a paused relay frozen until another relay is
	// seen to claim a row of each claim the frozen relay holds (in the
	// outbox's audit trail, which the fault asks for: waitTakeover): its
	// claims are past their lease and taken over, whatever the lease and
	// the machine's pace. A freeze that saw no takeover did not open its
	// window.
	UntilTakeover bool `json:"until_takeover"`
	// UntilNacked keeps a paused consumer frozen until the broker is seen
	// refusing a publish to the target's queue (full behind the frozen
	// consumer, with an overflow that rejects publishes: waitRefused), at
	// most Hold. The broker's side is read, not the relays' event logs: a
	// relay that does not wait for its confirms logs no nack.
	UntilNacked bool `json:"until_nacked"`
	// UntilRouted ends a hold once the broker's firehose has copied every
	// publish of the batch the held relay logged ahead of its hit (the
	// broker took them and answered each on the relay's connection, which
	// the relay goes on reading), at most Hold: the relay's next step finds
	// those answers in hand, whatever the machine's pace.
	UntilRouted bool `json:"until_routed"`
	// Trigger: zero arms the point in the environment at start, so hits
	// count from the process's start; otherwise it is armed over HTTP when
	// the trigger fires and hits count from then.
	Trigger Trigger `json:"trigger"`
}

// Observes implements Observer: a freeze until a takeover reads the
// takeover, and the fencing check the order of the claims, from the
// outbox's audit trail; a hold until routed reads the broker's firehose.
func (c Crash) Observes() []history.Source {
	if c.UntilRouted {
		return append(auditIf(c.UntilTakeover), history.SourceRouted)
	}
	return auditIf(c.UntilTakeover)
}

// auditIf is the audit trail where a fault reads it, nothing otherwise.
func auditIf(reads bool) []history.Source {
	if reads {
		return []history.Source{history.SourceAudit}
	}
	return nil
}

// KindCrash is the crash point fault's kind, as a schedule names it
// (results name it by its action: crash, pause, delay).
const KindCrash = "crash"

func init() {
	register(Desc[Crash]{
		Name:    KindCrash,
		Example: Crash{Process: "relay-1", Point: protocol.RelayAfterConfirm, Action: crashpoint.Pause, Hit: 2, Hold: 5 * time.Second, Trigger: Trigger{AfterOrders: 10}},
		Doc:     "a process killed, frozen or delayed at one of its crash points, on its n-th hit",
		Opens:   "the crash point's window",
		Check: func(p Crash) error {
			if err := errors.Join(Need(KindCrash, p.Process != "", "process"), Need(KindCrash, p.Point != "", "point")); err != nil {
				return err
			}
			switch p.Action {
			case crashpoint.Kill, crashpoint.Pause:
			case crashpoint.Delay:
				if p.Delay <= 0 {
					return errors.New("crash fault: action delay needs a delay")
				}
			case crashpoint.Hold:
				// A hold ends on what it waits for, never after a set time.
				if !p.UntilRouted || p.Hold <= 0 {
					return errors.New("crash fault: action hold needs until_routed and a hold (the most it waits)")
				}
			default:
				return fmt.Errorf("crash fault: action %q: want kill, pause, delay or hold", p.Action)
			}
			if p.UntilRouted && p.Action != crashpoint.Hold {
				return errors.New("crash fault: until_routed ends a hold: action hold")
			}
			if p.Hit < 0 {
				return fmt.Errorf("crash fault: hit %d: want 1 or more", p.Hit)
			}
			return nil
		},
		Window:    func(c Crash) (history.Ref, string) { return c.Process, c.Point },
		Touches:   func(c Crash) Touch { return Touch{Instances: []history.Ref{c.Process}} },
		Trigger:   func(c Crash) Trigger { return c.Trigger },
		Enumerate: enumerateCrashes,
		Shrink: func(c Crash, sh *Shrink[Crash]) {
			for _, h := range Earlier(c.Hit) {
				g := c
				g.Hit = h
				sh.Add(fmt.Sprintf("hit %d → %d", c.Hit, h), g)
			}
			if c.Trigger != (Trigger{}) {
				from := len(sh.out)
				sh.Trigger(func(c *Crash) *Trigger { return &c.Trigger })
				for i := from; i < len(sh.out); i++ {
					if g := sh.out[i].Fault.(Crash); g.Trigger == (Trigger{}) {
						g.Trigger.AfterOrders = 1 // stays armed by its trigger, not at start
						sh.out[i].Fault = g
					}
				}
			}
			sh.Shorter("hold", func(c *Crash) *time.Duration { return &c.Hold })
			sh.Shorter("delay", func(c *Crash) *time.Duration { return &c.Delay })
			sh.None("restart after", func(c *Crash) *time.Duration { return &c.RestartAfter })
		},
	})
}

// enumerateCrashes are each crash point of each instance × hit 1..hits ×
// kill, and pause past the lease, each with what its window needs to open.
func enumerateCrashes(s *Surface, hits int) []Candidate {
	hold := Hold(s.Lease)
	var out []Candidate
	for _, in := range s.Instances {
		for _, w := range in.Points {
			open, ok := s.Opener(in, w, "")
			if !ok {
				continue
			}
			for hit := 1; hit <= hits; hit++ {
				key := PointKey(in.Ref, w)
				depth := (hit - 1) + (in.N - 1)
				kill := Crash{Process: in.Ref, Point: w, Action: crashpoint.Kill, Hit: int64(hit), RestartAfter: RestartAfter, Trigger: open.Trigger}
				pause := Crash{Process: in.Ref, Point: w, Action: crashpoint.Pause, Hit: int64(hit), Hold: hold, Trigger: open.Trigger}
				out = append(out, open.Candidate(kill, depth, key), open.Candidate(pause, depth, key))
			}
		}
	}
	return out
}

// arming is what the point is armed with: a kill freezes the process at
// it, faultline kills it (Inject).
func (c Crash) arming() string {
	action := c.Action
	if action == crashpoint.Kill {
		action = crashpoint.Pause
	}
	return crashpoint.Arming{Action: action, Delay: c.Delay, Hit: max(c.Hit, 1)}.String()
}

func (c Crash) armAtStart() bool { return c.Trigger == (Trigger{}) }

// Describe implements Fault.
func (c Crash) Describe() result.Fault {
	kind := "crash"
	switch c.Action {
	case crashpoint.Pause, crashpoint.Delay, crashpoint.Hold:
		kind = c.Action
	}
	detail := c.Point + " " + crashpoint.Arming{Action: c.Action, Delay: c.Delay, Hit: max(c.Hit, 1)}.String()
	if c.Action == crashpoint.Pause && c.UntilNacked {
		detail += fmt.Sprintf(", held until the broker refuses a publish to the full queue (at most %s)", c.Hold)
	} else if c.Action == crashpoint.Pause && c.UntilTakeover {
		detail += fmt.Sprintf(", held until its claims are seen taken over (at most four leases, or %s if longer)", c.Hold)
	} else if c.Action == crashpoint.Pause {
		detail += fmt.Sprintf(", held %s", c.Hold)
	} else if c.Action == crashpoint.Hold {
		detail += fmt.Sprintf(", the call site held until the broker has taken every publish of the batch ahead of it (at most %s)", c.Hold)
	}
	if !c.armAtStart() {
		detail += ", armed " + c.Trigger.String()
	}
	return result.Fault{Kind: kind, Target: string(c.Process), Detail: detail}
}

// StartArming implements StartArmer.
func (c Crash) StartArming() (ref history.Ref, window, arming string, ok bool) {
	return c.Process, c.Point, c.arming(), c.armAtStart()
}

// Require implements Requirer: the target offers the crash point.
func (c Crash) Require(env *Env) error {
	_, err := env.Point(c.Process, c.Point)
	return err
}

// Inject implements Fault.
func (c Crash) Inject(ctx context.Context, env *Env) result.Fault {
	return withWaits(func(w *waits) result.Fault { return c.inject(ctx, env, w) })
}

// inject is Inject, recording what it waits for in w.
func (c Crash) inject(ctx context.Context, env *Env, w *waits) result.Fault {
	start := time.Now()
	if c.Action == crashpoint.Pause && c.UntilTakeover {
		// Whatever ends the fault first, a fault waiting for the thaw
		// (Unbind.UntilThawed) is let go; only the first landing counts.
		defer env.Landings.land(ThawedKey(c.Process), fmt.Errorf("%s was not frozen and thawed at %s", c.Process, c.Point))
	}
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
	hit, err := reachPoint(ctx, env, w, c.Process, c.Point, own, time.Time{})
	if err != nil {
		return record(c, start, false, fmt.Errorf("crash point %s never fired: %w", c.Point, err))
	}
	env.Logf("%s hit %s (hit %d, %s)", c.Process, c.Point, hit.Hit, c.Action)
	switch c.Action {
	case crashpoint.Kill:
		if err := waitStopped(ctx, env, c.Process, w); err != nil {
			return record(c, start, true, err)
		}
		sentErr := waitSent(ctx, env, p, w)
		if err := p.Kill(); err != nil {
			return record(c, start, true, fmt.Errorf("kill %s at its crash point: %w", c.Process, err))
		}
		if sentErr != nil {
			return record(c, start, false, sentErr)
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
		if err := waitStopped(ctx, env, c.Process, w); err != nil {
			return record(c, start, true, err)
		}
		var holdErr error
		var seen string
		switch {
		case c.UntilTakeover:
			seen, holdErr = waitTakeover(ctx, env, w, c.Process, TakeoverWait(c.Hold, env.Lease))
		case c.UntilNacked:
			seen, holdErr = waitRefused(ctx, env, w, c.Process, c.Hold)
		default:
			holdErr = pause(ctx, c.Hold)
		}
		thawed := time.Now() // before the resume: its late write comes after
		if err := p.Resume(); err != nil {
			return notUndone(record(c, start, true, holdErr), fmt.Errorf("resume %s: %w", c.Process, err))
		}
		if c.UntilTakeover && holdErr == nil {
			env.Landings.landAt(ThawedKey(c.Process), thawed, nil)
		}
		if holdErr != nil {
			return record(c, start, !errors.Is(holdErr, errUnseen), holdErr)
		}
		r := record(c, start, true, nil)
		if seen != "" {
			r.Detail += "; " + seen
		}
		return r
	case crashpoint.Hold:
		seen, holdErr := waitRouted(ctx, env, w, c.Process, hit, c.Hold)
		// Released whatever ended the wait: a cancelled run's too.
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := p.Disarm(releaseCtx, own); err != nil {
			return notUndone(record(c, start, true, holdErr), fmt.Errorf("release the hold of %s: %w", c.Process, err))
		}
		if holdErr != nil {
			return record(c, start, !errors.Is(holdErr, errUnseen), holdErr)
		}
		r := record(c, start, true, nil)
		r.Detail += "; " + seen
		return r
	}
	return record(c, start, true, nil)
}

// ThawedKey is what a freeze past the lease of process lands on (in the
// run's Landings) when the process is thawed after a takeover: a fault
// that must outlast its late write (Unbind.UntilThawed) waits for it.
func ThawedKey(process history.Ref) string { return "thawed " + string(process) }

// TakeoverWait is the longest a freeze waits for its claim to be taken
// over: at least least, and four leases (the lease runs out, a claim
// comes round and takes the rows). It bounds a wait for a cause the audit
// trail shows: a takeover seen sooner ends it sooner.
func TakeoverWait(least, lease time.Duration) time.Duration { return max(least, 4*lease) }

// errUnseen: the freeze ended without what it waited for (a takeover, a
// nack): its window did not open.
var errUnseen = errors.New("not seen")

// waitTakeover waits, at most within, until frozen's claims are seen
// taken over; it records the wait in w and says what it saw. Where the
// outbox is audited with its claim column, the takeover is read as the
// database committed it (auditTakeover): the trail orders the claims, so
// neither the wait nor the fencing check rests on when a frozen relay's
// lines reach its event log. Elsewhere another relay's event log must
// show a claim of a row of frozen's last logged claim.
func waitTakeover(ctx context.Context, env *Env, w *waits, frozen history.Ref, within time.Duration) (seen string, err error) {
	if in, err := env.Roles.Instance(frozen); err == nil && env.Audit != nil {
		trail, err := env.Audit(ctx, 0)
		if err != nil {
			return "", fmt.Errorf("read the audit trail when %s froze: %w", frozen, err)
		}
		// The trail names a write's writer by the session's
		// application_name, which faultline hands each instance in its
		// URL; a pipeline that sets its own shows no claim of frozen's,
		// and its takeover is read from the event logs.
		if slices.ContainsFunc(trail, func(a history.AuditRow) bool { return a.Claims() && a.Writer == in.Name }) {
			return waitAuditedTakeover(ctx, env, w, in.Name, frozen, trail, within)
		}
	}
	err = w.wait(fmt.Sprintf("another relay to take %s's claim over", frozen), within, func() (string, error) {
		mine, err := lastClaim(env, frozen)
		if err != nil {
			return "", fmt.Errorf("window not opened: %w: %w", errUnseen, err)
		}
		started := time.Now()
		other, e, err := waitOtherRelays(ctx, env, frozen, within, func(e eventlog.Entry) bool { return takesOver(mine, e) })
		if err != nil {
			return "", fmt.Errorf("window not opened: %w of %s's claim by another relay: %w", errUnseen, frozen, err)
		}
		seen = fmt.Sprintf("%s took %s over after %s", other, e.EventID, time.Since(started).Round(time.Millisecond))
		return seen, nil
	})
	return seen, err
}

// waitAuditedTakeover waits, at most within, until the audit trail shows
// another writer's claim of a row of each claim frozen (whose sessions
// write as writer) holds (trail is the trail read when it froze):
// heldClaims. A claim whose rows frozen's own
// open transaction has locked cannot be taken over by anyone and is not
// waited for (lockedBy); one claim at least must be seen taken over.
func waitAuditedTakeover(ctx context.Context, env *Env, w *waits, writer string, frozen history.Ref, trail []history.AuditRow, within time.Duration) (seen string, err error) {
	held := auditHeld(trail, writer)
	err = w.wait(fmt.Sprintf("another relay to claim a row of each claim %s holds (audit trail)", frozen), within, func() (string, error) {
		if held.live() == 0 {
			return "", fmt.Errorf("window not opened: %w: the audit trail shows %s holding no claim when it froze", errUnseen, frozen)
		}
		started := time.Now()
		var locked int
		// The whole trail each time: a write's id is drawn when it is
		// made, not when it commits, so a later read from the last id seen
		// could miss one.
		err := poll.Until(ctx, within, 200*time.Millisecond, func() (bool, error) {
			trail, err := env.Audit(ctx, 0)
			if err != nil {
				return false, err
			}
			held = auditHeld(trail, writer)
			pending := held.pending()
			locked = 0
			for _, ids := range pending {
				ok, err := lockedBy(ctx, env, writer, ids)
				if err != nil {
					return false, err
				}
				if ok {
					locked++
				}
			}
			return len(held.taken) > 0 && locked == len(pending), nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", fmt.Errorf("window not opened: %w: %d of %s's claims seen taken over by another relay, %d not (%d of them locked by its own open transaction): %w",
				errUnseen, len(held.taken), frozen, len(held.pending()), locked, err)
		}
		seen = fmt.Sprintf("%s took %s over after %s", held.by, held.eventID, time.Since(started).Round(time.Millisecond))
		if n := len(held.taken); n > 1 {
			seen += fmt.Sprintf(" (a row of each of %d claims %s held)", n, frozen)
		}
		if locked > 0 {
			seen += fmt.Sprintf("; %d claims locked by %s's own open transaction not waited for", locked, frozen)
		}
		return seen, nil
	})
	return seen, err
}

// lockedBy reports whether every row of ids (outbox eventIds) is locked
// by an open transaction of the writer's sessions: the row's xmax is the
// transaction id of one of them (an UPDATE or FOR UPDATE not yet ended).
// No other relay's claim can take such a row over while the writer is
// frozen. Read from the row versions and pg_stat_activity only: it takes
// no lock that could make a relay skip a row.
func lockedBy(ctx context.Context, env *Env, writer string, ids []string) (bool, error) {
	ob := env.Observe.Outbox
	pool, ok := env.DB[ob.Database]
	if !ok || ob.EventID == "" || len(ids) == 0 {
		return false, nil
	}
	q := fmt.Sprintf(`SELECT count(*) FROM %s t WHERE t.%s::text = ANY($1) AND t.xmax::text IN
		(SELECT a.backend_xid::text FROM pg_stat_activity a WHERE a.application_name = $2 AND a.backend_xid IS NOT NULL)`,
		pgx.Identifier(target.Ident(ob.Name)).Sanitize(), pgx.Identifier{ob.EventID}.Sanitize())
	var n int
	if err := pool.QueryRow(ctx, q, ids, writer).Scan(&n); err != nil {
		return false, fmt.Errorf("read the locks on %s's rows: %w", writer, err)
	}
	return n == len(ids), nil
}

// heldClaims follows, through an audit trail, the claims one writer (a
// frozen relay) holds: each claim's rows it has not written since it made
// the claim. A lease renewal keeps a row; a retry, mark or failure write,
// or its own new claim, ends it. Another writer's claim of such a row
// takes the claim over. The writes of one row are in trail order (each
// waits for the row lock of the one before).
type heldClaims struct {
	writer string
	claims map[string]map[string]bool // claim → rows held
	rowOf  map[string]string          // row → the claim holding it
	// taken are the claims taken over since the writer's last write (one
	// taken before it is history: the writer went on working after it);
	// by and eventID name the last takeover seen.
	taken       map[string]bool
	by, eventID string
}

// auditHeld reads what writer holds from trail.
func auditHeld(trail []history.AuditRow, writer string) heldClaims {
	h := heldClaims{writer: writer, claims: map[string]map[string]bool{}, rowOf: map[string]string{}, taken: map[string]bool{}}
	for _, a := range trail {
		h.see(a)
	}
	return h
}

// see takes the next write of the trail.
func (h *heldClaims) see(a history.AuditRow) {
	if a.EventID == "" {
		return
	}
	claim, held := h.rowOf[a.EventID]
	if a.Writer == h.writer {
		clear(h.taken) // what was taken before is history now
		if held && !a.Claims() && a.NewClaim == claim && a.NewStatus == "Processing" {
			return // a renewal
		}
		if held {
			h.drop(a.EventID)
		}
		if a.Claims() {
			if h.claims[a.NewClaim] == nil {
				h.claims[a.NewClaim] = map[string]bool{}
			}
			h.claims[a.NewClaim][a.EventID] = true
			h.rowOf[a.EventID] = a.NewClaim
		}
		return
	}
	if held && a.Claims() {
		h.drop(a.EventID)
		h.taken[claim] = true
		h.by, h.eventID = a.Writer, a.EventID
	}
}

func (h *heldClaims) drop(row string) {
	claim := h.rowOf[row]
	delete(h.rowOf, row)
	delete(h.claims[claim], row)
	if len(h.claims[claim]) == 0 {
		delete(h.claims, claim)
	}
}

// pending are the claims still holding rows and not taken over, each as
// its rows.
func (h heldClaims) pending() [][]string {
	var out [][]string
	for claim, rows := range h.claims {
		if h.taken[claim] {
			continue
		}
		out = append(out, slices.Sorted(maps.Keys(rows)))
	}
	return out
}

// live counts the claims the writer holds or has had taken since its
// last write.
func (h heldClaims) live() int {
	n := len(h.taken)
	for claim := range h.claims {
		if !h.taken[claim] {
			n++
		}
	}
	return n
}

// waitOtherRelays waits, at most within, for a line that matches in the
// event log of a relay other than exclude (any relay if exclude is not
// one), written from now on; it says whose it was.
func waitOtherRelays(ctx context.Context, env *Env, exclude history.Ref, within time.Duration, match func(eventlog.Entry) bool) (history.Ref, eventlog.Entry, error) {
	skip := ""
	if me, err := env.Roles.Instance(exclude); err == nil {
		skip = me.Name
	}
	type from struct {
		ref    history.Ref
		offset int64
	}
	var others []from
	for n := 1; n <= env.Roles.Count(protocol.Relay); n++ {
		ref := history.RefOf(protocol.Relay, n)
		in, err := env.Roles.Instance(ref)
		if err != nil || in.Name == skip || !in.EventLog {
			continue
		}
		p, err := env.Process(ref)
		if err != nil {
			continue
		}
		var size int64
		if st, err := os.Stat(p.EventLogPath()); err == nil {
			size = st.Size()
		}
		others = append(others, from{ref, size})
	}
	if len(others) == 0 {
		return "", eventlog.Entry{}, errors.New("no other relay writes an event log")
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	type hit struct {
		ref history.Ref
		e   eventlog.Entry
	}
	found := make(chan hit, len(others))
	for _, o := range others {
		go func() {
			if e, err := env.waitLogFrom(ctx, o.ref, o.offset, within, match); err == nil {
				found <- hit{o.ref, e}
			}
		}()
	}
	select {
	case h := <-found:
		return h.ref, h.e, nil
	case <-ctx.Done():
		if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
			return "", eventlog.Entry{}, err
		}
		return "", eventlog.Entry{}, fmt.Errorf("none seen in %s", within)
	}
}

// lastClaim is the set of eventIds of the last claim in process's event
// log.
func lastClaim(env *Env, process history.Ref) (map[string]bool, error) {
	p, err := env.Process(process)
	if err != nil {
		return nil, err
	}
	entries, _, err := readFrom(p.EventLogPath(), 0)
	if err != nil {
		return nil, fmt.Errorf("read %s's event log: %w", process, err)
	}
	rows := lastClaimOf(entries)
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s's event log shows no claim", process)
	}
	return rows, nil
}

// lastClaimOf is the set of eventIds of the last claim in entries.
func lastClaimOf(entries []eventlog.Entry) map[string]bool {
	var claim string
	rows := map[string]bool{}
	for _, e := range entries {
		if e.Event != eventlog.Claimed {
			continue
		}
		if e.ClaimID != claim {
			claim, rows = e.ClaimID, map[string]bool{}
		}
		rows[e.EventID] = true
	}
	return rows
}

// takesOver reports whether e, from another relay's event log, claims a
// row of the frozen relay's last claim (mine).
func takesOver(mine map[string]bool, e eventlog.Entry) bool {
	return e.Event == eventlog.Claimed && mine[e.EventID]
}

// waitSent waits until everything the frozen process wrote to its sockets
// has been read by their peers (supervisor.Process.Unsent), at most
// env.Deadline (a peer that never reads: the kill would take back what the
// process wrote, and the window did not open); w records the wait.
func waitSent(ctx context.Context, env *Env, p *supervisor.Process, w *waits) error {
	var unsent int64
	return w.wait(fmt.Sprintf("what %s wrote to its sockets to be read by their peers", p.Name()), env.Deadline, func() (string, error) {
		err := poll.Until(ctx, env.Deadline, 10*time.Millisecond, func() (bool, error) {
			var err error
			unsent, err = p.Unsent()
			return err == nil && unsent == 0, err
		})
		if err != nil {
			return "", fmt.Errorf("window not opened: %d bytes %s wrote were still unread by their peers after its crash point: %w", unsent, p.Name(), err)
		}
		return "", nil
	})
}

// reachPoint waits until the process's event log shows it at its crash
// point own (c.Point as the target maps it), in a line written from since
// on; w records the wait. A point that has not fired within the wait is
// disarmed (disarmLate): left armed, a later hit would freeze the process
// with no one to thaw or restart it, and a pipeline left without its relay
// is not one that lost events. A hit that came before the disarm took
// effect is returned: the window opened late.
func reachPoint(ctx context.Context, env *Env, w *waits, process history.Ref, point, own string, since time.Time) (eventlog.Entry, error) {
	var hit eventlog.Entry
	match := func(e eventlog.Entry) bool {
		return e.Event == eventlog.CrashPoint && e.Point == own && !e.Time.Before(since)
	}
	err := w.wait(fmt.Sprintf("%s to reach %s", process, point), env.Deadline, func() (string, error) {
		var err error
		if hit, err = env.WaitLog(ctx, process, match); err != nil {
			return "", err
		}
		return fmt.Sprintf("hit %d", hit.Hit), nil
	})
	if err == nil {
		return hit, nil
	}
	late, found, lateErr := disarmLate(ctx, env, w, process, point, own, match)
	if found {
		return late, nil
	}
	return hit, errors.Join(err, lateErr)
}

// disarmLate disarms the crash point own of process after its wait ran
// out and says whether it fired all the same. A hit is logged and synced
// before its action, so once the disarm is answered, or the process is
// seen frozen or gone, a hit that came is either in the event log or, in
// a process still writing its line, counted in the point's fired total
// (read before and after the disarm): then its line is waited for.
func disarmLate(ctx context.Context, env *Env, w *waits, process history.Ref, point, own string, match func(eventlog.Entry) bool) (eventlog.Entry, bool, error) {
	p, err := env.Process(process)
	if err != nil {
		return eventlog.Entry{}, false, err
	}
	fired := func() (int64, bool) {
		st, err := p.CrashPoint(ctx, own)
		return st.Fired, err == nil
	}
	var hit eventlog.Entry
	var found bool
	err = w.wait(fmt.Sprintf("%s's %s disarmed, its wait over", process, point), env.Deadline, func() (string, error) {
		var err error
		if hit, found, err = env.findLog(process, match); err != nil || found {
			return fmt.Sprintf("hit %d after its wait", hit.Hit), err
		}
		before, counted := fired()
		disarmed := make(chan error, 1)
		go func() { disarmed <- p.Disarm(ctx, own) }()
		var disarmErr error
		// A frozen process answers nothing: its state says it stopped.
		if err := poll.Until(ctx, env.Deadline, 10*time.Millisecond, func() (bool, error) {
			select {
			case disarmErr = <-disarmed:
				return true, nil
			default:
				stopped, err := p.Stopped()
				return stopped || !p.Running(), err
			}
		}); err != nil {
			return "", fmt.Errorf("disarm %s at %s: %w", process, point, err)
		}
		if hit, found, err = env.findLog(process, match); err != nil || found {
			return fmt.Sprintf("hit %d after its wait", hit.Hit), err
		}
		if after, ok := fired(); counted && ok && after > before {
			if hit, err = env.WaitLog(ctx, process, match); err != nil {
				return "", fmt.Errorf("%s fired %s while it was disarmed and logged no hit: %w", process, point, err)
			}
			found = true
			return fmt.Sprintf("hit %d after its wait", hit.Hit), nil
		}
		if disarmErr != nil {
			return "", disarmErr
		}
		return "disarmed, not hit", nil
	})
	return hit, found, err
}

// waitStopped waits until the process is frozen (state T); w records the
// wait.
func waitStopped(ctx context.Context, env *Env, name history.Ref, w *waits) error {
	p, err := env.Process(name)
	if err != nil {
		return err
	}
	return w.wait(fmt.Sprintf("%s to be frozen at its crash point", name), env.Deadline, func() (string, error) {
		if err := poll.Until(ctx, env.Deadline, 10*time.Millisecond, p.Stopped); err != nil {
			return "", fmt.Errorf("%s did not freeze at its pause crash point: %w", name, err)
		}
		return "", nil
	})
}
