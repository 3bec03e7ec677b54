package history

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// RetryShape is what the outbox's audit trail says of the relays' retries
// while the queue is unbound (black-box: status writes alone): whether
// they back off is read from the shape of the retries, never from how
// fast the machine runs them. A row's rest is the time from its n-th
// retry write (Processing → Pending) to its next claim. A relay that backs
// off rests a row longer after each attempt; one that does not claims a
// due row in its turn, so its rests are the wait for a claim, whatever the
// attempt. Load slows every wait alike, so a rest after a second or later
// attempt is compared with the undelayed waits beside it in time — new
// rows' claim waits (insert to first claim), which no relay delays, and
// rests after a first retry (the shortest backoff, if any): their ratio
// grows with backoff and stays near 1 without it (a relay that claims the
// oldest due rows first makes a retried row wait less than a new one),
// however slow or loaded the machine. Durations are differences of the database's own
// clock.
type RetryShape struct {
	// Claims counts the claims after the mark, Retries the retry writes
	// after it (MostRetries the most of one row), Failed the rows written
	// Failed after it, PublishedInside the rows claimed after the mark and
	// written Published under that claim: publishes made into the outage
	// that their relay took for delivered.
	Claims, Retries, MostRetries, Failed, PublishedInside int
	// Levels[i] are the rests after attempt i+2; Pooled all of them.
	Levels []Level
	Pooled Level
	// Declared[i] are the backoffs the relay wrote with its retries after
	// attempt i+1 (the outbox's due column less the start of the retry
	// write's transaction),
	// where the target names that column: the relay's own account of its
	// backoff, which no load stretches. EarlyClaims counts rests ended
	// before the row was due: a relay that claims rows before the time it
	// wrote for them does not keep its account, and it is not read.
	Declared    []Declared
	EarlyClaims int
}

// Declared is the median of Count backoffs a relay wrote after one
// attempt.
type Declared struct {
	Median time.Duration
	Count  int
}

// read reports whether enough backoffs were written to judge them.
func (d Declared) read() bool { return d.Count >= restSamples }

// declaredFloor is the shortest backoff told apart from none: a relay
// that makes a row due at once writes its transaction's start, or a time
// a little after it.
const declaredFloor = 10 * time.Millisecond

// Level is the median ratio of rests to the undelayed waits beside them,
// from Rests rests ended by Claims distinct claims: rests one claim ends
// together are alike, so a level is read only from restSamples rests of
// batchSamples claims.
type Level struct {
	Ratio         float64
	Rests, Claims int
}

// Shape thresholds: a level is read from at least restSamples rests ended
// by batchSamples claims; backoff is shown by two levels at growthFactor or
// more, or by the pooled rests. The rests are flat
// when at least flatLevels levels are read and none is above flatFactor,
// or, where few rows went round many times, when at least pooledSamples
// later rests pooled are at most pooledFactor and no level read is above
// flatFactor. Between the two the shape is not told.
const (
	restSamples   = 5
	batchSamples  = 3
	growthFactor  = 2.0
	flatFactor    = 1.5
	flatLevels    = 3
	pooledSamples = 15
	pooledFactor  = 1.25
	risingFactor  = 1.2
)

// BackedOff reports whether the retries show backoff. Where the relay
// wrote its backoffs and kept them, they alone say so: rests are then
// waits for a claim, which load stretches unevenly (a retried row may wait
// behind a slow claim cycle that a new row's wait beside it missed), so
// they can read as backoff for a relay that wrote none. Otherwise rests
// after later attempts at least growthFactor times the undelayed waits
// beside them show it, at two levels or pooled (one level alone can be
// one stalled claim).
func (s RetryShape) BackedOff() bool {
	if s.declaredKept() {
		return s.declaredGrown()
	}
	grown := 0
	for _, l := range s.Levels {
		if l.read() && l.Ratio >= growthFactor {
			grown++
		}
	}
	return grown >= 2 || s.Pooled.pooledRead() && s.Pooled.Ratio >= growthFactor
}

// read reports whether a level has enough rests to be judged.
func (l Level) read() bool { return l.Rests >= restSamples && l.Claims >= batchSamples }

// pooledRead reports whether pooled rests are enough to be judged.
func (l Level) pooledRead() bool { return l.Rests >= pooledSamples && l.Claims >= restSamples }

// Flat reports whether the retries show no backoff: later rests near the
// waits beside them, level by level or pooled, and not rising from one
// level read to the next (rising).
func (s RetryShape) Flat() bool {
	if s.BackedOff() {
		return false
	}
	if s.declaredKept() {
		return s.declaredFlat()
	}
	if s.rising() {
		return false
	}
	read := 0
	for _, l := range s.Levels {
		if !l.read() {
			continue
		}
		if l.Ratio > flatFactor {
			return false
		}
		read++
	}
	return read >= flatLevels || s.Pooled.pooledRead() && s.Pooled.Ratio <= pooledFactor
}

// declaredKept reports whether the relay wrote its backoffs and claimed no
// row before it was due: then what it wrote is what it does, and the
// backoff is judged from it, not from rests a slow claim cycle can hide
// (a relay whose claims come further apart than its largest backoff rests
// each row a claim cycle, backoff or not).
func (s RetryShape) declaredKept() bool { return len(s.Declared) > 0 && s.EarlyClaims == 0 }

// declaredFirst is the first attempt's backoff, at least declaredFloor,
// which later attempts are compared with; ok is false until it is read.
func (s RetryShape) declaredFirst() (first time.Duration, ok bool) {
	if len(s.Declared) == 0 || !s.Declared[0].read() {
		return 0, false
	}
	return max(s.Declared[0].Median, declaredFloor), true
}

// declaredGrown reports whether a later attempt's backoffs are at least
// growthFactor times the first attempt's, both read.
func (s RetryShape) declaredGrown() bool {
	first, ok := s.declaredFirst()
	if !ok {
		return false
	}
	for _, d := range s.Declared[1:] {
		if d.read() && d.Median >= declaredFloor && float64(d.Median) >= growthFactor*float64(first) {
			return true
		}
	}
	return false
}

// declaredFlat reports whether the backoffs of at least flatLevels-1 later
// attempts are read and none is above flatFactor times the first
// attempt's: a relay that makes a row due at once, or after the same wait
// each time.
func (s RetryShape) declaredFlat() bool {
	first, ok := s.declaredFirst()
	if !ok {
		return false
	}
	read := 0
	for _, d := range s.Declared[1:] {
		if !d.read() {
			continue
		}
		if float64(max(d.Median, declaredFloor)) > flatFactor*float64(first) {
			return false
		}
		read++
	}
	return read >= flatLevels-1
}

// rising reports whether the levels read rise, each at least risingFactor
// times the one before, over two levels or more. Backoff whose first
// steps are still shorter than the claim waits beside them reads as
// ratios under 1, but ones that grow with the attempt; flat
// retries stay level. Such a shape is not flat, though not yet shown
// backing off either.
func (s RetryShape) rising() bool {
	var read []float64
	for _, l := range s.Levels {
		if l.read() {
			read = append(read, l.Ratio)
		}
	}
	if len(read) < 2 {
		return false
	}
	for i := 1; i < len(read); i++ {
		if read[i] < read[i-1]*risingFactor {
			return false
		}
	}
	return true
}

func (s RetryShape) String() string {
	var ls []string
	for i, l := range s.Levels {
		if l.read() {
			ls = append(ls, fmt.Sprintf("%.2f (attempt %d, %d rests of %d claims)", l.Ratio, i+2, l.Rests, l.Claims))
		}
	}
	levels := "none read yet"
	if len(ls) > 0 {
		levels = strings.Join(ls, ", ")
	}
	out := fmt.Sprintf("%d claims, %d retries (at most %d of one row), %d Failed, %d published into it; rests after a retry over the undelayed waits beside them: %s; pooled %.2f of %d",
		s.Claims, s.Retries, s.MostRetries, s.Failed, s.PublishedInside, levels, s.Pooled.Ratio, s.Pooled.Rests)
	if len(s.Declared) == 0 {
		return out
	}
	var ds []string
	for i, d := range s.Declared {
		ds = append(ds, fmt.Sprintf("%s (attempt %d, %d)", d.Median.Round(time.Millisecond), i+1, d.Count))
	}
	out += "; backoffs the relay wrote: " + strings.Join(ds, ", ")
	if s.EarlyClaims > 0 {
		out += fmt.Sprintf(" (not kept: %d rows claimed before they were due)", s.EarlyClaims)
	}
	return out
}

// rest is a span of a row's wait: after its retry (attempt n), or, for a
// new row (attempt 0), from its insert to its first claim.
type rest struct {
	from, to time.Time
	attempt  int
	endedBy  string    // the claim that ended it
	due      time.Time // when the retry made the row due (zero: not written)
}

// MeasureRetryShape reads the shape from the audit rows (in trail order),
// counting what happened after mark (the trail's last id when the queue's
// bindings went away).
func MeasureRetryShape(audit []AuditRow, mark int64) RetryShape {
	var s RetryShape
	inserted := map[string]time.Time{}   // row → its insert, until its first claim
	resting := map[string]rest{}         // row → its open rest
	claimedInside := map[string]string{} // row → its claim after the mark
	retries := map[string]int{}
	// rests of rows after a retry; waits no backoff lengthened much: new
	// rows' claim waits, and rests after a first retry (the shortest
	// backoff, if any)
	var rests, waits []rest
	declared := map[int][]time.Duration{}
	for _, a := range audit {
		switch {
		case a.Op == "INSERT":
			inserted[a.EventID] = a.At
		case a.Claims():
			if at, ok := inserted[a.EventID]; ok {
				waits = append(waits, rest{from: at, to: a.At})
				delete(inserted, a.EventID)
			}
			if a.ID <= mark {
				continue
			}
			s.Claims++
			claimedInside[a.EventID] = a.NewClaim
			if r, ok := resting[a.EventID]; ok {
				r.to, r.endedBy = a.At, a.NewClaim
				if !r.due.IsZero() && a.At.Before(r.due.Add(-time.Millisecond)) {
					s.EarlyClaims++
				}
				rests = append(rests, r)
				if r.attempt == 1 {
					waits = append(waits, r)
				}
				delete(resting, a.EventID)
			}
		case a.ID > mark && a.Op == "UPDATE" && a.OldStatus == "Processing" && a.NewStatus == "Pending":
			s.Retries++
			retries[a.EventID]++
			s.MostRetries = max(s.MostRetries, retries[a.EventID])
			resting[a.EventID] = rest{from: a.At, attempt: retries[a.EventID], due: a.Due}
			if !a.Due.IsZero() {
				declared[retries[a.EventID]] = append(declared[retries[a.EventID]], max(a.Due.Sub(cmp.Or(a.Began, a.At)), 0))
			}
		case a.ID > mark && a.Op == "UPDATE" && a.NewStatus == "Failed" && a.OldStatus != "Failed":
			s.Failed++
		case a.ID > mark && a.Op == "UPDATE" && a.NewStatus == "Published" && a.OldStatus == "Processing" &&
			claimedInside[a.EventID] != "" && claimedInside[a.EventID] == a.OldClaim:
			s.PublishedInside++
		}
	}
	ratios := map[int][]float64{}
	batches := map[int]map[string]bool{}
	for _, r := range rests {
		if r.attempt < 2 {
			continue
		}
		beside := nearest(waits, r)
		if m := median(beside); m > 0 {
			ratios[r.attempt] = append(ratios[r.attempt], float64(r.to.Sub(r.from))/float64(m))
			if batches[r.attempt] == nil {
				batches[r.attempt] = map[string]bool{}
			}
			batches[r.attempt][r.endedBy] = true
		}
	}
	var pooled []float64
	pooledBatches := map[string]bool{}
	for n := 2; len(ratios[n]) > 0; n++ {
		s.Levels = append(s.Levels, Level{Ratio: median(ratios[n]), Rests: len(ratios[n]), Claims: len(batches[n])})
		pooled = append(pooled, ratios[n]...)
		maps.Copy(pooledBatches, batches[n])
	}
	if len(pooled) > 0 {
		s.Pooled = Level{Ratio: median(pooled), Rests: len(pooled), Claims: len(pooledBatches)}
	}
	for n := 1; len(declared[n]) > 0; n++ {
		s.Declared = append(s.Declared, Declared{Median: median(declared[n]), Count: len(declared[n])})
	}
	return s
}

// besideWaits is how many undelayed waits a rest is compared with.
const besideWaits = 3

// nearest are the waits nearest r in time (by their midpoints), at most
// besideWaits of them, each overlapping r or apart from it by less than
// r's own length: near enough that the same load slowed both, at any pace.
func nearest(waits []rest, r rest) []time.Duration {
	mid := func(x rest) time.Time { return x.from.Add(x.to.Sub(x.from) / 2) }
	dist := func(w rest) time.Duration { return mid(w).Sub(mid(r)).Abs() }
	span := r.to.Sub(r.from)
	var near []rest
	for _, w := range waits {
		if w.from.Before(r.to.Add(span)) && r.from.Add(-span).Before(w.to) {
			near = append(near, w)
		}
	}
	slices.SortFunc(near, func(a, b rest) int { return cmp.Compare(dist(a), dist(b)) })
	var out []time.Duration
	for _, w := range near[:min(len(near), besideWaits)] {
		out = append(out, w.to.Sub(w.from))
	}
	return out
}

// median of xs (the upper one of an even count); zero for none.
func median[T cmp.Ordered](xs []T) T {
	var zero T
	if len(xs) == 0 {
		return zero
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
