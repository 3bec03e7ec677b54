package history

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// trail builds an audit trail in commit order, ids counting up.
type trail struct {
	rows []AuditRow
}

func (tr *trail) add(ms int, a AuditRow) {
	a.ID, a.At = int64(len(tr.rows)+1), at(ms)
	tr.rows = append(tr.rows, a)
}

func (tr *trail) insert(ms int, row string) {
	tr.add(ms, AuditRow{Op: "INSERT", EventID: row, NewStatus: "Pending"})
}

func (tr *trail) claim(ms int, row, old, claim string) {
	tr.add(ms, AuditRow{Op: "UPDATE", EventID: row, OldStatus: "Pending", NewStatus: "Processing", OldClaim: old, NewClaim: claim})
}

func (tr *trail) write(ms int, row, claim, status string) {
	tr.add(ms, AuditRow{Op: "UPDATE", EventID: row, OldStatus: "Processing", NewStatus: status, OldClaim: claim, NewClaim: claim})
}

// relayInOutage is a trail of rows rows inserted 40 ms apart into an
// outage, each retried attempts times with rest(n, ms) after its n-th retry
// written at ms,
// fresh rows claimed wait ms after their insert; it returns the trail and
// its mark (nothing before it).
func relayInOutage(rows, attempts int, wait func(ms int) int, rest func(n, ms int) int) []AuditRow {
	type ev struct {
		ms  int
		add func(tr *trail, ms int)
	}
	var evs []ev
	for r := range rows {
		row := fmt.Sprintf("r%02d", r)
		t := r * 40
		evs = append(evs, ev{t, func(tr *trail, ms int) { tr.insert(ms, row) }})
		t += wait(t)
		for n := 1; n <= attempts; n++ {
			claim := fmt.Sprintf("%s-c%d", row, n)
			old := ""
			if n > 1 {
				old = fmt.Sprintf("%s-c%d", row, n-1)
			}
			evs = append(evs, ev{t, func(tr *trail, ms int) { tr.claim(ms, row, old, claim) }})
			t += 20 // publish, return, write
			evs = append(evs, ev{t, func(tr *trail, ms int) { tr.write(ms, row, claim, "Pending") }})
			t += rest(n, t)
		}
	}
	// commit order: by time, stable
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].ms < evs[j-1].ms; j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
	var tr trail
	for _, e := range evs {
		e.add(&tr, e.ms)
	}
	return tr.rows
}

// Whether a relay backs off is read from the shape of its retries alone:
// later rests against the first-attempt rests beside them. How slow each
// wait is does not decide it, nor does load that slows every wait alike.
func TestRetryShapeBackedOff(t *testing.T) {
	fixed := func(ms int) func(int) int { return func(int) int { return ms } }
	slowing := func(ms int) int { return 30 + ms/4 }
	for _, tc := range []struct {
		name         string
		audit        []AuditRow
		backed, flat bool
	}{
		{name: "nothing yet"},
		{name: "exponential backoff from 100 ms", audit: relayInOutage(12, 5, fixed(30), func(n, _ int) int { return 50 << n }), backed: true},
		{name: "exponential backoff behind 400 ms claim waits", audit: relayInOutage(40, 6, fixed(400), func(n, _ int) int { return 400 + 50<<n }), backed: true},
		{name: "no backoff: flat rests", audit: relayInOutage(12, 6, fixed(30), func(_, _ int) int { return 30 }), flat: true},
		{name: "no backoff, slow: flat rests", audit: relayInOutage(40, 6, fixed(600), func(_, _ int) int { return 600 }), flat: true},
		{name: "no backoff, every wait slowing as rows pile up", audit: relayInOutage(40, 6, slowing, func(_, ms int) int { return slowing(ms) }), flat: true},
		{name: "backoff, every wait slowing as rows pile up", audit: relayInOutage(40, 6, slowing, func(n, ms int) int { return 50<<n + slowing(ms) }), backed: true},
		{name: "no backoff, few rows going round many times", audit: relayInOutage(6, 8, fixed(10), func(_, _ int) int { return 10 }), flat: true},
		{name: "backoff behind 1 s claim waits, few rows", audit: relayInOutage(6, 4, fixed(1000), func(n, _ int) int { return 1000 + 50<<n })},
		{name: "backoff, too few rows to read a level", audit: relayInOutage(4, 5, fixed(30), func(n, _ int) int { return 50 << n })},
		{name: "two attempts only: no level read", audit: relayInOutage(12, 2, fixed(30), func(n, _ int) int { return 50 << n })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := MeasureRetryShape(tc.audit, 0)
			assert.Equal(t, tc.backed, s.BackedOff(), "backed off: %s", s)
			assert.Equal(t, tc.flat, s.Flat(), "flat: %s", s)
		})
	}
}

// A relay that backs off from 100 ms, read on a loaded machine where new
// rows wait longer for a claim than its first backoffs last: the two
// levels read are under 1 but rise with the attempt, so its retries are
// not flat (holding the outage until a row is given up on would make a
// correct relay spend its budget). Recorded in a hogged CI run: 0.39 at
// attempt 2, 0.50 at attempt 3, pooled 0.50 of 165 rests.
func TestRetryShapeRisingIsNotFlat(t *testing.T) {
	loaded := RetryShape{MostRetries: 29,
		Levels: []Level{{Ratio: 0.39, Rests: 110, Claims: 5}, {Ratio: 0.50, Rests: 55, Claims: 3}},
		Pooled: Level{Ratio: 0.50, Rests: 165, Claims: 8}}
	require.True(t, loaded.Pooled.pooledRead() && loaded.Pooled.Ratio <= pooledFactor, "pooled alone reads flat")
	assert.False(t, loaded.Flat(), "%s", loaded)
	assert.False(t, loaded.BackedOff(), "%s", loaded)

	level := loaded
	level.Levels = []Level{{Ratio: 0.9, Rests: 110, Claims: 5}, {Ratio: 0.95, Rests: 55, Claims: 3}}
	level.Pooled.Ratio = 0.92
	assert.True(t, level.Flat(), "level rests pooled: %s", level)

}

// What else an outage shows: a row given up on, and a publish made into
// it that its relay wrote Published (a return not heeded); claims and
// writes before the mark count for neither.
func TestMeasureRetryShapeCounts(t *testing.T) {
	var tr trail
	tr.insert(0, "a")
	tr.insert(0, "b")
	tr.claim(10, "a", "", "c1")
	tr.write(20, "a", "c1", "Published") // before the mark
	mark := int64(len(tr.rows))
	tr.insert(30, "c")
	tr.claim(40, "b", "", "c2")
	tr.claim(40, "c", "", "c2")
	tr.write(60, "b", "c2", "Pending")
	tr.write(60, "c", "c2", "Published") // returned, taken for delivered
	tr.claim(70, "b", "c2", "c3")
	tr.write(90, "b", "c3", "Failed")
	s := MeasureRetryShape(tr.rows, mark)
	assert.Equal(t, RetryShape{Claims: 3, Retries: 1, MostRetries: 1, Failed: 1, PublishedInside: 1}, s)
}

// Rests one claim ends together are one sample: a relay that does not
// back off, whose claim after the fourth retry stalled, shows one long
// level, and that is not backoff.
func TestRetryShapeOneStalledClaimIsNotBackoff(t *testing.T) {
	var tr trail
	rows := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	ms := 0
	claims := map[string]string{}
	for round := 1; round <= 7; round++ {
		fresh := fmt.Sprintf("new%d", round)
		tr.insert(ms, fresh)
		rest := 20
		if round == 5 {
			rest = 400 // the claim after the fourth retry stalls
		}
		ms += rest
		c := fmt.Sprintf("c%d", round)
		tr.claim(ms, fresh, "", c)
		for _, row := range rows {
			tr.claim(ms, row, claims[row], c)
			claims[row] = c
		}
		ms += 10
		tr.write(ms, fresh, c, "Published")
		for _, row := range rows {
			tr.write(ms, row, c, "Pending")
		}
	}
	s := MeasureRetryShape(tr.rows, 0)
	assert.False(t, s.BackedOff(), "%s", s)
}

// declaring writes, on each retry write of the trail, the due time the
// relay gave the row: backoff(n, began) ms after the write's transaction
// began (5 ms before the write) after its n-th retry.
func declaring(audit []AuditRow, backoff func(n int) int) []AuditRow {
	out := make([]AuditRow, len(audit))
	retries := map[string]int{}
	for i, a := range audit {
		if a.Op == "UPDATE" && a.OldStatus == "Processing" && a.NewStatus == "Pending" {
			retries[a.EventID]++
			a.Began = a.At.Add(-5 * time.Millisecond)
			a.Due = a.Began.Add(time.Duration(backoff(retries[a.EventID])) * time.Millisecond)
		}
		out[i] = a
	}
	return out
}

// Where the outbox has a due column, the backoff is read from what the
// relay wrote in it, as long as it claimed no row before the time it
// wrote: a claim cycle longer than the largest backoff rests every row
// one cycle, backoff or not, and reads flat from the rests alone.
func TestRetryShapeFromDeclaredBackoff(t *testing.T) {
	slowCycle := func(n, _ int) int { return 1500 } // every rest a claim cycle
	capped := func(n int) int { return min(100<<(n-1), 1000) }
	for _, tc := range []struct {
		name         string
		audit        []AuditRow
		backed, flat bool
	}{
		{name: "no due column, slow claim cycle: flat rests", audit: relayInOutage(12, 5, func(int) int { return 1500 }, slowCycle), flat: true},
		{name: "backoff written, slow claim cycle", audit: declaring(relayInOutage(12, 5, func(int) int { return 1500 }, slowCycle), capped), backed: true},
		{name: "backoff shown by the third attempt", audit: declaring(relayInOutage(12, 3, func(int) int { return 1500 }, slowCycle), capped), backed: true},
		{name: "due at once, slow claim cycle", audit: declaring(relayInOutage(12, 5, func(int) int { return 1500 }, slowCycle), func(int) int { return 0 }), flat: true},
		{name: "due at once, fast claims", audit: declaring(relayInOutage(12, 5, func(int) int { return 30 }, func(_, _ int) int { return 30 }), func(int) int { return 0 }), flat: true},
		{name: "the same wait every time", audit: declaring(relayInOutage(12, 5, func(int) int { return 1500 }, slowCycle), func(int) int { return 1000 }), flat: true},
		{name: "backoff written, not kept: rows claimed before due", audit: declaring(relayInOutage(12, 5, func(int) int { return 30 }, func(_, _ int) int { return 30 }), capped), flat: true},
		{name: "backoff written and kept, fast claims", audit: declaring(relayInOutage(12, 5, func(int) int { return 30 }, func(n, _ int) int { return 5 + capped(n) }), capped), backed: true},
		{name: "due at once, later rests stretched by load", audit: declaring(relayInOutage(12, 5, func(int) int { return 30 }, func(n, _ int) int { return 30 * min(n, 3) * min(n, 3) }), func(int) int { return 0 }), flat: true},
		{name: "one attempt written: nothing read", audit: declaring(relayInOutage(12, 1, func(int) int { return 1500 }, slowCycle), capped)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := MeasureRetryShape(tc.audit, 0)
			assert.Equal(t, tc.backed, s.BackedOff(), "backed off: %s", s)
			assert.Equal(t, tc.flat, s.Flat(), "flat: %s", s)
		})
	}
}
