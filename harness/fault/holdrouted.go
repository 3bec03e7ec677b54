package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// heldBatch is the batch a relay held at its crash point had published:
// the eventIds of the last claim with published lines ahead of the hit in
// its event log, and the time of that claim's first line (its claimed
// line where the relay logs one): a copy the broker's firehose gave of
// one of those eventIds after it is of that claim's publish or a later
// one.
func heldBatch(entries []eventlog.Entry, hit eventlog.Entry) (claim string, ids []string, since time.Time) {
	end := len(entries)
	for i, e := range entries {
		if e.Event == eventlog.CrashPoint && e.Point == hit.Point && e.Hit == hit.Hit && e.Time.Equal(hit.Time) {
			end = i
			break
		}
	}
	for i := end - 1; i >= 0; i-- {
		if e := entries[i]; e.Event == eventlog.Published && e.ClaimID != "" {
			claim = e.ClaimID
			break
		}
	}
	if claim == "" {
		return "", nil, time.Time{}
	}
	seen := map[string]bool{}
	for _, e := range entries[:end] {
		if e.ClaimID != claim {
			continue
		}
		if since.IsZero() {
			since = e.Time
		}
		if e.Event == eventlog.Published && !seen[e.EventID] {
			seen[e.EventID] = true
			ids = append(ids, e.EventID)
		}
	}
	return claim, ids, since
}

// notYetRouted are the ids with no firehose copy at or after since.
func notYetRouted(routed map[string][]time.Time, ids []string, since time.Time) []string {
	var out []string
	for _, id := range ids {
		copied := false
		for _, at := range routed[id] {
			if !at.Before(since) {
				copied = true
				break
			}
		}
		if !copied {
			out = append(out, id)
		}
	}
	return out
}

// waitRouted waits, at most within, until the broker's firehose has copied
// every publish of the batch held's instance published ahead of its hit:
// the broker has taken them, and answered each (a return for one routed
// nowhere, then its confirm) on the relay's connection, which the relay,
// held only at its call site, goes on reading. It says what it saw; a wait
// that saw not all of them did not open its window (errUnseen).
func waitRouted(ctx context.Context, env *Env, w *waits, held history.Ref, hit eventlog.Entry, within time.Duration) (seen string, err error) {
	if env.Routed == nil {
		return "", fmt.Errorf("hold until routed: the run's firehose is off")
	}
	p, err := env.Process(held)
	if err != nil {
		return "", err
	}
	entries, _, err := readFrom(p.EventLogPath(), 0)
	if err != nil {
		return "", fmt.Errorf("read %s's event log: %w", held, err)
	}
	claim, ids, since := heldBatch(entries, hit)
	if claim == "" {
		return "", fmt.Errorf("window not opened: %w: %s logged no publish ahead of its hit", errUnseen, held)
	}
	started := time.Now()
	var missing []string
	err = w.wait(fmt.Sprintf("the broker to take the %d publishes of %s's held batch", len(ids), held), within, func() (string, error) {
		err := poll.Until(ctx, within, 5*time.Millisecond, func() (bool, error) {
			missing = notYetRouted(env.Routed(ids), ids, since)
			return len(missing) == 0, nil
		})
		return fmt.Sprintf("%d of %d copied", len(ids)-len(missing), len(ids)), err
	})
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		return "", fmt.Errorf("window not opened: %w: the broker took %d of the %d publishes of %s's claim %s within %s", errUnseen, len(ids)-len(missing), len(ids), held, claim, within)
	}
	return fmt.Sprintf("held %s until the broker had taken the %d publishes of claim %s", time.Since(started).Round(time.Millisecond), len(ids), claim), nil
}
