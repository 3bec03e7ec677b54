package fault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// OwnRetention replays an event inside the consumer's own inbox retention,
// with the target's own cleanup running: the scenario turns the target's
// retention setting down to Retention, and this fault sees the cleanup at
// work from the contract's inbox query (an eventId it listed is gone),
// takes an event the consumer applied after that, waits until the cleanup
// is seen deleting again with the event's inbox row written, and
// publishes a copy of it. A cleanup that keeps its retention leaves the
// row, and the inbox absorbs the copy; one that deletes younger rows lets
// it take effect twice (duplicate-effect).
//
// The window is inside the retention only if the copy was handled less
// than Retention after the event was first published (the relay's log:
// the inbox row cannot be older than that); past it, the row may have
// aged out within the retention, and the window did not open.
type OwnRetention struct {
	Consumer  history.Ref   `json:"consumer"`
	Retention time.Duration `json:"retention"`
	Trigger   Trigger       `json:"trigger"`
}

// KindOwnRetention is the own-retention fault's kind, as a schedule names it.
const KindOwnRetention = "own-retention"

func init() {
	register(Desc[OwnRetention]{
		Name:    KindOwnRetention,
		Example: OwnRetention{Consumer: "consumer", Retention: 4 * time.Second, Trigger: Trigger{AfterOrders: 20}},
		Doc:     "one event replayed inside the consumer's own inbox retention, once its own cleanup is seen deleting rows around it",
		Check: func(p OwnRetention) error {
			return errors.Join(Need(KindOwnRetention, p.Consumer != "", "consumer"), Need(KindOwnRetention, p.Retention > 0, "a retention"))
		},
		Touches: func(o OwnRetention) Touch { return Touch{Instances: []history.Ref{o.Consumer}} },
		Trigger: func(o OwnRetention) Trigger { return o.Trigger },
	})
}

// Describe implements Fault.
func (o OwnRetention) Describe() result.Fault {
	return result.Fault{Kind: KindOwnRetention, Target: string(o.Consumer),
		Detail: fmt.Sprintf("one event replayed inside the consumer's own inbox retention of %s, its cleanup seen deleting before and after the event's row was written, %s", o.Retention, o.Trigger)}
}

// Require implements Requirer: the consumer's and the relays' event logs
// (when the event was applied, first published, and what the copy did),
// the inbox query (the cleanup at work) and the payload query (the copy).
func (o OwnRetention) Require(env *Env) error {
	in, err := env.Roles.Instance(o.Consumer)
	if err != nil {
		return err
	}
	if !in.EventLog {
		return fmt.Errorf("the target's %s writes no event log to see the event applied and its copy handled", in.Role)
	}
	logged := false
	for _, r := range env.Roles.All() {
		logged = logged || r.Role == protocol.Relay && r.EventLog
	}
	if !logged {
		return fmt.Errorf("the target's relays write no event log to tell when an event was first published")
	}
	if env.Contract.Inbox == nil {
		return fmt.Errorf("the target's contract has no inbox query to see its cleanup at work")
	}
	if env.Contract.Payload == nil {
		return fmt.Errorf("the target's contract has no payload query")
	}
	return nil
}

// cleanupPoll is how often the inbox is read for the cleanup's deletions.
const cleanupPoll = 100 * time.Millisecond

// Inject implements Fault.
func (o OwnRetention) Inject(ctx context.Context, env *Env) result.Fault {
	return withWaits(func(w *waits) result.Fault { return o.inject(ctx, env, w) })
}

// inject is Inject, recording what it waits for in w.
func (o OwnRetention) inject(ctx context.Context, env *Env, w *waits) result.Fault {
	start := time.Now()
	fail := recorder(o, &start)
	if err := env.Wait(ctx, o.Trigger); err != nil {
		return fail(false, err)
	}
	// One deadline bounds the four waits together: the window is one.
	deadline := time.Now().Add(env.Deadline)
	q, pool, err := env.Query(env.Contract.Inbox, "inbox")
	if err != nil {
		return fail(false, err)
	}
	// deletion waits until an eventId the inbox listed is gone.
	deletion := func(cause string) error {
		return w.wait(cause, time.Until(deadline), func() (string, error) {
			var gone string
			listed := map[string]bool{}
			err := poll.Until(ctx, time.Until(deadline), cleanupPoll, func() (bool, error) {
				ids, err := eventIDs(ctx, pool, q, "inbox")
				if err != nil {
					return false, err
				}
				now := make(map[string]bool, len(ids))
				for _, id := range ids {
					now[id] = true
				}
				for id := range listed {
					if !now[id] {
						gone = id
						return true, nil
					}
				}
				listed = now
				return false, nil
			})
			if err != nil {
				return "", fmt.Errorf("window not opened: %w: no inbox row seen deleted by the target's cleanup (retention %s): %w", errUnseen, o.Retention, err)
			}
			return gone, nil
		})
	}
	if err := deletion("the target's inbox cleanup to delete a row (the inbox query)"); err != nil {
		return fail(false, err)
	}
	cleaned := time.Now()
	var applied eventlog.Entry
	if err := w.wait(fmt.Sprintf("%s to apply an event after the cleanup was seen at work (its event log)", o.Consumer), time.Until(deadline), func() (string, error) {
		var err error
		applied, err = env.waitLog(ctx, o.Consumer, time.Until(deadline), func(e eventlog.Entry) bool { return e.Event == eventlog.Reserved && e.Time.After(cleaned) })
		return applied.EventID, err
	}); err != nil {
		return fail(false, err)
	}
	id := applied.EventID
	published, err := firstPublished(env, id)
	if err != nil {
		return fail(false, err, id)
	}
	if err := deletion(fmt.Sprintf("the cleanup to delete a row again with %s's inbox row written", id)); err != nil {
		return fail(false, err, id)
	}
	msg, err := payloadOf(ctx, env, id)
	if err != nil {
		return fail(false, err, id)
	}
	replayedAt := time.Now()
	if err := publishCopy(ctx, env, id, msg); err != nil {
		return fail(false, err, id)
	}
	var handled eventlog.Entry
	if err := w.wait(fmt.Sprintf("%s to handle the copy of %s (its event log)", o.Consumer, id), time.Until(deadline), func() (string, error) {
		var err error
		handled, err = env.waitLog(ctx, o.Consumer, time.Until(deadline), func(e eventlog.Entry) bool {
			return e.EventID == id && (e.Event == eventlog.Duplicate || e.Event == eventlog.Reserved) && e.Time.After(replayedAt)
		})
		return handled.Event, err
	}); err != nil {
		return fail(true, err, id)
	}
	age := handled.Time.Sub(published)
	if age >= o.Retention {
		return fail(false, fmt.Errorf("window not opened: %w: the copy of %s was handled %s after its first publish, past the retention of %s", errUnseen, id, age.Round(time.Millisecond), o.Retention), id)
	}
	res := fail(true, nil, id)
	res.Detail += fmt.Sprintf(" — %s replayed and handled %s after its first publish (retention %s): %s", id, age.Round(time.Millisecond), o.Retention, handled.Event)
	env.Logf("copy of %s handled inside the retention: %s", id, handled.Event)
	return res
}

// firstPublished is when a relay first logged publishing the event: its
// inbox row cannot have been written before.
func firstPublished(env *Env, id string) (time.Time, error) {
	var first time.Time
	for _, in := range env.Roles.All() {
		if in.Role != protocol.Relay || !in.EventLog {
			continue
		}
		p, ok := env.Processes.Process(in.Name)
		if !ok {
			continue
		}
		entries, _, err := readFrom(p.EventLogPath(), 0)
		if err != nil {
			return first, fmt.Errorf("read %s's event log: %w", in.Name, err)
		}
		for _, e := range entries {
			if e.Event == eventlog.Published && e.EventID == id && (first.IsZero() || e.Time.Before(first)) {
				first = e.Time
			}
		}
	}
	if first.IsZero() {
		return first, fmt.Errorf("no relay's event log shows %s published", id)
	}
	return first, nil
}
