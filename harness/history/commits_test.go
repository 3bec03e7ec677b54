package history

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
