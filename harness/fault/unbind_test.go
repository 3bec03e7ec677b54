package fault

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/harness/check"
)

// A measured outage ends once it has held its least and its round trips
// fitted (or a row ended Failed inside it), or at its most; at its most it
// opened its window only if the relays claimed rows into it and never
// retried them, or the budget's round trips (2/3 of its Rounds) fitted:
// retrying with fewer fitted, the machine was too slow for it to tell a
// relay that backs off.
func TestUnbindSettled(t *testing.T) {
	u := Unbind{Duration: 3 * time.Second, Rounds: 45, Max: 10 * time.Second}
	fast := check.RetryPace{RoundTrip: 30 * time.Millisecond, ClaimWait: 20 * time.Millisecond, Retries: 40}  // 45 fit in 2.25 s
	slow := check.RetryPace{RoundTrip: 150 * time.Millisecond, ClaimWait: 50 * time.Millisecond, Retries: 40} // 45 fit in 9 s
	for _, tc := range []struct {
		name   string
		u      Unbind
		held   time.Duration
		pace   check.RetryPace
		stop   bool
		closed string // part of why it did not open; "" it opened or goes on
	}{
		{name: "fast round trips, not yet its least", u: u, held: 2500 * time.Millisecond, pace: fast},
		{name: "fast round trips, past its least", u: u, held: 3 * time.Second, pace: fast, stop: true},
		{name: "slow round trips, not yet fitted", u: u, held: 5 * time.Second, pace: slow},
		{name: "slow round trips fitted", u: u, held: 9 * time.Second, pace: slow, stop: true},
		{name: "no retry seen yet", u: u, held: 4 * time.Second, pace: check.RetryPace{ClaimWait: 20 * time.Millisecond}},
		{name: "at its most, too few fitted, the relays retrying: too slow to tell", u: u, held: 10 * time.Second, pace: check.RetryPace{RoundTrip: time.Second, ClaimWait: 50 * time.Millisecond, Retries: 5}, stop: true, closed: "round trips too slow"},
		{name: "at its most, the budget's 30 fitted of 45: opened", u: u, held: 10 * time.Second, pace: check.RetryPace{RoundTrip: 200 * time.Millisecond, ClaimWait: 100 * time.Millisecond, Retries: 40}, stop: true},
		{name: "at its most, 29 fitted of 45: too slow to tell", u: u, held: 10 * time.Second, pace: check.RetryPace{RoundTrip: 240 * time.Millisecond, ClaimWait: 100 * time.Millisecond, Retries: 40}, stop: true, closed: "29.4 of 45 fitted"},
		{name: "at its most, retries with no round trip measured", u: u, held: 10 * time.Second, pace: check.RetryPace{ClaimWait: 50 * time.Millisecond, Retries: 5}, stop: true, closed: "no round trip"},
		{name: "at its most, no claim and no retry: window not opened", u: u, held: 10 * time.Second, pace: check.RetryPace{ClaimWait: 50 * time.Millisecond}, stop: true, closed: "no relay claimed or retried"},
		{name: "at its most, rows claimed and never retried (returns ignored): opened", u: u, held: 10 * time.Second, pace: check.RetryPace{ClaimWait: 50 * time.Millisecond, Claims: 9}, stop: true},
		{name: "a row Failed inside it, past its least", u: u, held: 3100 * time.Millisecond, pace: check.RetryPace{RoundTrip: time.Second, Retries: 5, Failed: 2}, stop: true},
		{name: "a row Failed, not yet its least", u: u, held: time.Second, pace: check.RetryPace{Failed: 1}},
		{name: "most below least: not ended before the least", u: Unbind{Duration: 2 * time.Second, Rounds: 12, Max: time.Second}, held: 1500 * time.Millisecond, pace: slow},
		{name: "most below least: the least bounds it", u: Unbind{Duration: 2 * time.Second, Rounds: 12, Max: time.Second}, held: 2 * time.Second, pace: slow, stop: true},
		{name: "most below least, slower: too slow to tell", u: Unbind{Duration: 2 * time.Second, Rounds: 12, Max: time.Second}, held: 2 * time.Second,
			pace: check.RetryPace{RoundTrip: 350 * time.Millisecond, ClaimWait: 50 * time.Millisecond, Retries: 9}, stop: true, closed: "5.0 of 12 fitted in 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop, closed := tc.u.settled(tc.held, tc.pace)
			assert.Equal(t, tc.stop, stop, "stop")
			if tc.closed == "" {
				assert.Empty(t, closed, "opened")
			} else {
				assert.Contains(t, closed, tc.closed, "not opened")
			}
		})
	}
}

// An outage made for a retry budget knows the budget back from its
// rounds, for every budget a target may set.
func TestRoundsForKeepsTheBudget(t *testing.T) {
	for budget := 1; budget <= 1000; budget++ {
		rounds := RoundsFor(budget)
		assert.GreaterOrEqual(t, rounds, budget, "budget %d", budget)
		assert.Equal(t, budget, budgetOf(rounds), "budget %d: %d rounds", budget, rounds)
	}
}
