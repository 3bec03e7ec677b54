package fault

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/result"
)

// A wait is seen when it ended without an error; one that did not see its
// cause keeps why, and what it saw instead.
func TestWaitOf(t *testing.T) {
	assert.Equal(t, result.Wait{Cause: "c", Seen: true, TookMS: 1500, BoundMS: 5000, Detail: "relay-2"},
		waitOf("c", 1500*time.Millisecond, 5*time.Second, "relay-2", nil))
	assert.Equal(t, result.Wait{Cause: "c", TookMS: 5000, BoundMS: 5000, Detail: "not within 5s; held 5s: no claims"},
		waitOf("c", 5*time.Second, 5*time.Second, "held 5s: no claims", errors.New("not within 5s")))
	assert.Equal(t, "not opened", unseen(false, "not opened", nil).Error())
	assert.NoError(t, unseen(true, "not opened", nil))
	assert.EqualError(t, unseen(true, "", errors.New("ctx")), "ctx")

	var w waits
	err := w.wait("the cause", time.Second, func() (string, error) { return "", errors.New("boom") })
	assert.EqualError(t, err, "boom")
	require.Len(t, w, 1)
	assert.False(t, w[0].Seen)
	assert.Equal(t, int64(1000), w[0].BoundMS)
	assert.Equal(t, "boom", w[0].Detail)
}

// Each held insert is one wait for every relay to be past it, bounded by
// the hold: seen when every relay was, not seen when the target's own
// sessions waited for it or its hold ran out first. The judgment of the
// window (judgeCommitOrder) reads the same rows.
func TestCommitOrderWaits(t *testing.T) {
	held := []heldInsert{
		{number: 4, eventID: "E4", heldMS: 1300, later: 3, passedBy: 2, relays: 2},
		{number: 8, eventID: "E8", heldMS: 5000, later: 2, passedBy: 1, relays: 2},
		{number: 12, eventID: "E12", heldMS: 40, later: 0, passedBy: 0, relays: 2, blocked: 1},
	}
	got := commitOrderWaits(held, 5*time.Second)
	require.Len(t, got, 3)
	assert.Equal(t, result.Wait{Cause: "every relay to be past held insert #4 (E4) before its commit", Seen: true, TookMS: 1300, BoundMS: 5000,
		Detail: "2 of 2 relays past it, 3 later inserts committed first"}, got[0])
	assert.False(t, got[1].Seen)
	assert.True(t, got[1].BoundReached())
	assert.Equal(t, "not every relay was seen past it; 1 of 2 relays past it, 2 later inserts committed first", got[1].Detail)
	assert.False(t, got[2].Seen)
	assert.False(t, got[2].BoundReached())
	assert.Contains(t, got[2].Detail, "1 of the target's sessions waited for it")

	opened, passed, _, _ := judgeCommitOrder(held, 20)
	assert.True(t, opened)
	assert.Equal(t, []string{"E4"}, passed)
	assert.Empty(t, commitOrderWaits(nil, 5*time.Second))
}
