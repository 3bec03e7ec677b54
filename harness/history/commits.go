package history

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"
)

// Commit is one committed write to a table faultline watches, told by the
// trigger it installed in the run's database (pg_notify, delivered when the
// writing transaction commits).
type Commit struct {
	Table   string // outbox, facts or effects
	Op      string // INSERT or UPDATE
	Writer  string // the writer's application_name: the instance faultline handed the URL to
	EventID string
	Status  string // the outbox row's new status
	Claim   string // the outbox row's new claim
	At      time.Time
}

// Observed tables.
const (
	TableOutbox  = "outbox"
	TableFacts   = "facts"
	TableEffects = "effects"
	// TablePosition is an offset relay's position table (relay.position):
	// a committed write to it is the relay's mark.
	TablePosition = "position"
	// TablePublish is not a table: a message the target published to its
	// exchange, seen the moment the broker routes it to a queue faultline
	// binds beside the target's (its publisher is not known: a scenario
	// timed by it runs one instance of the publishing role).
	TablePublish = "publish"
)

// Commits fans the run's commit notifications out to the faults waiting
// for one. It is safe for concurrent use.
type Commits struct {
	mu   sync.Mutex
	subs map[int]*subscription
	next int
	// Err is set when a watched table could not be watched.
	err error
	// seen counts the commits told per table, with the last one's time.
	seen map[string]Seen
	// ids are the eventIds of the commits told, per table.
	ids map[string]map[string]bool
}

// Seen is how many commits of writes to a table were told, and when the
// last one was.
type Seen struct {
	Commits int
	Last    time.Time
}

type subscription struct {
	match func(Commit) bool
	ch    chan Commit
}

// NewCommits makes an empty feed.
func NewCommits() *Commits { return &Commits{subs: map[int]*subscription{}} }

// Publish hands c to every subscriber it matches (never blocking: a
// subscriber takes the first one it matches).
func (c *Commits) Publish(commit Commit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]Seen{}
	}
	s := c.seen[commit.Table]
	s.Commits++
	s.Last = commit.At
	c.seen[commit.Table] = s
	if commit.EventID != "" {
		if c.ids == nil {
			c.ids = map[string]map[string]bool{}
		}
		if c.ids[commit.Table] == nil {
			c.ids[commit.Table] = map[string]bool{}
		}
		c.ids[commit.Table][commit.EventID] = true
	}
	for id, s := range c.subs {
		if s.match(commit) {
			select {
			case s.ch <- commit:
			default:
			}
			delete(c.subs, id)
		}
	}
}

// Seen is what was told of the commits to table so far.
func (c *Commits) Seen(table string) Seen {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[table]
}

// EventIDs are the eventIds of the commits to table told so far, in a map
// of the caller's own.
func (c *Commits) EventIDs(table string) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.ids[table])
}

// Fail records that the feed cannot work (a table could not be watched).
func (c *Commits) Fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

// Err is why the feed does not work, if it does not.
func (c *Commits) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Wait blocks until a commit matching match is told, or ctx ends.
func (c *Commits) Wait(ctx context.Context, match func(Commit) bool) (Commit, error) {
	return c.Subscribe(match)(ctx)
}

// Subscribe watches for a commit matching match from now on; await
// blocks until the first one is told, or ctx ends. A caller that makes
// the commit happen subscribes first, so that it cannot be told before.
func (c *Commits) Subscribe(match func(Commit) bool) (await func(ctx context.Context) (Commit, error)) {
	if err := c.Err(); err != nil {
		return func(context.Context) (Commit, error) { return Commit{}, err }
	}
	ch := make(chan Commit, 1)
	c.mu.Lock()
	id := c.next
	c.next++
	c.subs[id] = &subscription{match: match, ch: ch}
	c.mu.Unlock()
	return func(ctx context.Context) (Commit, error) {
		select {
		case commit := <-ch:
			return commit, nil
		case <-ctx.Done():
			c.mu.Lock()
			delete(c.subs, id)
			c.mu.Unlock()
			return Commit{}, fmt.Errorf("wait for a commit: %w", ctx.Err())
		}
	}
}
