package history

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The feed keeps the eventIds of the commits it was told, per table, and
// hands out a copy: what a checker reads after the run is what committed,
// whatever the database holds by then.
func TestCommitsKeepTheirEventIDs(t *testing.T) {
	c := NewCommits()
	now := time.Now()
	c.Publish(Commit{Table: TableEffects, Op: "INSERT", EventID: "e1", At: now})
	c.Publish(Commit{Table: TableEffects, Op: "INSERT", EventID: "e2", At: now})
	c.Publish(Commit{Table: TableOutbox, Op: "UPDATE", EventID: "o1", At: now})
	c.Publish(Commit{Table: TableFacts, Op: "INSERT", At: now}) // no eventId column

	ids := c.EventIDs(TableEffects)
	assert.Equal(t, map[string]bool{"e1": true, "e2": true}, ids)
	ids["e3"] = true
	assert.NotContains(t, c.EventIDs(TableEffects), "e3", "a copy, not the feed's own")
	assert.Equal(t, map[string]bool{"o1": true}, c.EventIDs(TableOutbox))
	assert.Empty(t, c.EventIDs(TableFacts))
	assert.Equal(t, 2, c.Seen(TableEffects).Commits)
}

// A subscriber is told the first matching commit published after it
// subscribed, however late it starts waiting; one that gives up is
// forgotten.
func TestCommitsSubscribe(t *testing.T) {
	c := NewCommits()
	claims := func(cm Commit) bool { return cm.Table == TableOutbox && cm.Status == "Processing" }
	c.Publish(Commit{Table: TableOutbox, Status: "Processing", EventID: "before"})
	await := c.Subscribe(claims)
	c.Publish(Commit{Table: TableOutbox, Status: "Published", EventID: "mark"})
	c.Publish(Commit{Table: TableOutbox, Status: "Processing", EventID: "first"})
	c.Publish(Commit{Table: TableOutbox, Status: "Processing", EventID: "second"})
	got, err := await(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "first", got.EventID)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.Subscribe(claims)(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	c.mu.Lock()
	assert.Empty(t, c.subs, "no subscription left behind")
	c.mu.Unlock()
}
