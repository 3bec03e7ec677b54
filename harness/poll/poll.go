// Package poll is the one loop the harness waits in for something it can
// only observe by asking again: a broker counter, a table, a process's
// event log. A wait ends on what it observes, bounded so that a cause
// that never comes ends it too; the bound is never what it waits for.
package poll

import (
	"context"
	"fmt"
	"time"
)

// Until calls done at once and then every interval until done reports
// true (Until returns nil), ctx ends, or within passes. Past within, or
// with ctx done, it returns an error saying so, wrapping done's error if
// the last call failed: a wait that failed to read is told apart from
// one that read and did not see.
func Until(ctx context.Context, within, interval time.Duration, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last error
	for {
		ok, err := done()
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("within %s: %w", within, last)
			}
			return fmt.Errorf("not within %s", within)
		case <-tick.C:
		}
	}
}
