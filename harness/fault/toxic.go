package fault

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/proxies"
)

// Toxic puts a Toxiproxy toxic on one link for Duration.
//
// With At set, the toxic lands at a known point of a process: after the
// trigger, the crash point At.Point is armed with a short delay, and the
// toxic goes on while the process waits there — e.g. after its confirms and
// before its Published write, so that write is the one slowed down.
type Toxic struct {
	Link     string
	Toxic    proxies.Toxic
	Trigger  Trigger
	Duration time.Duration
	At       *Sync
}

// Sync names a crash point used as a synchronisation point: the process
// pauses there for Delay while the fault lands.
type Sync struct {
	Process string // instance reference
	Point   string // window
	Delay   time.Duration
}

// Require implements Requirer: the link, and the sync point if any.
func (t Toxic) Require(env *Env) error {
	if _, err := env.Roles.Link(t.Link); err != nil {
		return err
	}
	if t.At != nil {
		if _, err := env.Point(t.At.Process, t.At.Point); err != nil {
			return err
		}
	}
	return nil
}

// Describe implements Fault.
func (t Toxic) Describe() result.Fault {
	detail := fmt.Sprintf("%s %s %s for %s, %s", t.Toxic.Type(), t.Toxic.Direction(), attributes(t.Toxic), t.Duration, t.Trigger)
	if t.At != nil {
		detail += fmt.Sprintf(", while %s waits at %s", t.At.Process, t.At.Point)
	}
	return result.Fault{Kind: "toxic", Target: t.Link, Detail: detail}
}

// Inject implements Fault.
func (t Toxic) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	link, err := env.Link(t.Link)
	if err != nil {
		return record(t, start, false, err)
	}
	if err := env.Wait(ctx, t.Trigger); err != nil {
		return record(t, start, false, err)
	}
	if t.At != nil {
		if err := t.At.wait(ctx, env); err != nil {
			return record(t, start, false, err)
		}
	}
	start = time.Now()
	applied, err := link.Add(ctx, t.Toxic)
	if err != nil {
		return record(t, start, false, err)
	}
	env.Logf("toxic %s on %s", t.Toxic.Type(), t.Link)
	holdErr := pause(ctx, t.Duration)
	if err := applied.Remove(context.WithoutCancel(ctx)); err != nil {
		return notUndone(record(t, start, true, holdErr), fmt.Errorf("remove the toxic on %s: %w", t.Link, err))
	}
	return record(t, start, true, holdErr)
}

// wait arms the synchronisation point and waits until the process is there.
func (s *Sync) wait(ctx context.Context, env *Env) error {
	p, err := env.Process(s.Process)
	if err != nil {
		return err
	}
	own, err := env.Point(s.Process, s.Point)
	if err != nil {
		return err
	}
	armed := time.Now()
	arming := crashpoint.Arming{Action: crashpoint.Delay, Delay: s.Delay, Hit: 1}.String()
	if err := p.Arm(ctx, own, arming); err != nil {
		return err
	}
	_, err = env.WaitLog(ctx, s.Process, func(e eventlog.Entry) bool {
		return e.Event == eventlog.CrashPoint && e.Point == own && !e.Time.Before(armed)
	})
	return err
}

// attributes renders a toxic's attributes as sorted key=value pairs.
func attributes(t proxies.Toxic) string {
	attrs := t.Attributes()
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, attrs[k])
	}
	return strings.Join(parts, " ")
}
