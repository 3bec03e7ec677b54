package fault

import (
	"testing"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An outage judged by its shape ends, past its least, once it saw a row
// given up on, retries backing off, or a publish into it taken for
// delivered; near the retry budget, at once unless its retries are shown
// flat; at its most, having seen none, it did not open its window —
// whatever the pace of the relays.
func TestUnbindSettled(t *testing.T) {
	u := Unbind{Duration: 3 * time.Second, Shape: true, Max: time.Minute, Budget: 8}
	backedOff := history.RetryShape{Claims: 40, Retries: 60, MostRetries: 4, Levels: []history.Level{{Ratio: 3, Rests: 9, Claims: 9}, {Ratio: 6, Rests: 6, Claims: 6}}}
	flat := history.RetryShape{Claims: 40, Retries: 60, MostRetries: 4, Levels: []history.Level{{Ratio: 0.9, Rests: 9, Claims: 9}, {Ratio: 1.1, Rests: 6, Claims: 6}, {Ratio: 1.2, Rests: 5, Claims: 5}}}
	untold := history.RetryShape{Claims: 40, Retries: 60, MostRetries: 4, Levels: []history.Level{{Ratio: 1.4, Rests: 9, Claims: 9}, {Ratio: 1.7, Rests: 6, Claims: 6}}}
	near := func(s history.RetryShape) history.RetryShape { s.MostRetries = 7; return s }
	require.True(t, backedOff.BackedOff())
	require.True(t, flat.Flat())
	require.False(t, untold.BackedOff() || untold.Flat())
	for _, tc := range []struct {
		name     string
		u        Unbind
		held     time.Duration
		failedAt time.Duration // when a row was first seen given up on; 0 with none: none
		shape    history.RetryShape
		stop     bool
		closed   string
	}{
		{name: "backed off, before its least", u: u, held: 2 * time.Second, shape: backedOff},
		{name: "backed off, past its least: opened", u: u, held: 3 * time.Second, shape: backedOff, stop: true},
		{name: "backed off, near the budget before its least: opened", u: u, held: 2 * time.Second, shape: near(backedOff), stop: true},
		{name: "flat, no row given up on yet: held on", u: u, held: 30 * time.Second, shape: flat},
		{name: "flat, near the budget: held on", u: u, held: 30 * time.Second, shape: near(flat)},
		{name: "a row given up on inside its least, retries untold: opened at its least", u: u, held: 3 * time.Second, failedAt: 700 * time.Millisecond, shape: func() history.RetryShape { s := near(untold); s.Failed = 6; return s }(), stop: true},
		{name: "a row given up on, not yet its least", u: u, held: time.Second, failedAt: time.Second, shape: history.RetryShape{Failed: 1}},
		{name: "a row given up on past its least, retries flat: opened", u: u, held: 9 * time.Second, failedAt: 9 * time.Second, shape: func() history.RetryShape { s := near(flat); s.Failed = 1; return s }(), stop: true},
		{name: "a row given up on past its least, before its budget: opened", u: u, held: 9 * time.Second, failedAt: 9 * time.Second, shape: history.RetryShape{Claims: 40, Retries: 60, MostRetries: 2, Failed: 1}, stop: true},
		// A correct relay's backoff (100 ms to 1 s) hidden in claim waits of
		// seconds until its seventh attempt, as a loaded machine read it.
		{name: "a row given up on past its least after its budget, retries untold: not opened", u: u, held: 8 * time.Second, failedAt: 8 * time.Second, shape: history.RetryShape{Claims: 613, Retries: 604, MostRetries: 7, Failed: 8, Levels: []history.Level{{Ratio: 1.00, Rests: 104, Claims: 29}, {Ratio: 1.16, Rests: 95, Claims: 21}, {Ratio: 1.38, Rests: 87, Claims: 15}, {Ratio: 1.29, Rests: 64, Claims: 9}, {Ratio: 1.29, Rests: 33, Claims: 6}, {Ratio: 1.67, Rests: 8, Claims: 3}}}, stop: true, closed: "after spending its budget of 8"},
		{name: "a row given up on past its least, no budget known, retries untold: not opened", u: Unbind{Duration: 3 * time.Second, Shape: true, Max: time.Minute}, held: 9 * time.Second, failedAt: 9 * time.Second, shape: func() history.RetryShape { s := untold; s.Failed = 1; return s }(), stop: true, closed: "no budget known"},
		{name: "publishes into it written Published: opened", u: u, held: 3 * time.Second, shape: history.RetryShape{Claims: 9, PublishedInside: 9}, stop: true},
		{name: "untold, far from the budget: held on", u: u, held: 5 * time.Second, shape: untold},
		{name: "untold, near the budget: not opened", u: u, held: 5 * time.Second, shape: near(untold), stop: true, closed: "within a retry of its budget of 8"},
		{name: "untold, near the budget before its least: held on", u: u, held: 400 * time.Millisecond, shape: near(untold)},
		{name: "untold, no budget known: held on", u: Unbind{Duration: 3 * time.Second, Shape: true, Max: time.Minute}, held: 5 * time.Second, shape: near(untold)},
		{name: "at its most, flat, nothing given up on: not opened", u: u, held: time.Minute, shape: flat, stop: true, closed: "no row was given up on, no retries backed off"},
		{name: "at its most, no claim: not opened", u: u, held: time.Minute, shape: history.RetryShape{}, stop: true, closed: "no relay claimed a row"},
		{name: "most below least: the least bounds it", u: Unbind{Duration: 2 * time.Second, Shape: true, Max: time.Second}, held: 1500 * time.Millisecond, shape: flat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failedAt := tc.failedAt
			if tc.shape.Failed == 0 {
				failedAt = -1
			}
			stop, closed := tc.u.settled(tc.held, failedAt, tc.shape)
			assert.Equal(t, tc.stop, stop, "stop")
			if tc.closed == "" {
				assert.Empty(t, closed, "opened")
			} else {
				assert.Contains(t, closed, tc.closed, "not opened")
			}
		})
	}
}
