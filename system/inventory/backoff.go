package inventory

import (
	"math/rand/v2"
	"time"
)

// backoff is capped exponential backoff with full jitter on the upper half:
// each wait is uniform in [d/2, d], d doubling from min up to max.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(min, max time.Duration) *backoff {
	if min > max {
		min = max
	}
	return &backoff{min: min, max: max, cur: min}
}

func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(b.cur*2, b.max)
	half := d / 2
	return half + rand.N(d-half+1)
}

func (b *backoff) reset() { b.cur = b.min }
