package fault

import (
	"fmt"
	"slices"
	"time"
)

// MinDuration is the shortest a shrinker makes a hold, an outage or a
// toxic.
const MinDuration = 100 * time.Millisecond

// Shrink collects the smaller versions of one fault f of kind F: each
// helper copies f, changes one field of the copy through the accessor it
// is given, and adds the copy with what changed.
type Shrink[F Fault] struct {
	f   F
	out []Smaller
}

// Add adds g, f changed as change says.
func (sh *Shrink[F]) Add(change string, g F) {
	sh.out = append(sh.out, Smaller{Change: change, Fault: g})
}

// Trigger adds f armed earlier: after half the orders, with no delay.
func (sh *Shrink[F]) Trigger(field func(*F) *Trigger) {
	t := *field(&sh.f)
	if t.AfterOrders >= 2 {
		g := sh.f
		field(&g).AfterOrders = t.AfterOrders / 2
		sh.Add(fmt.Sprintf("trigger after %d → %d orders", t.AfterOrders, t.AfterOrders/2), g)
	}
	if t.Delay > 0 {
		g := sh.f
		field(&g).Delay = 0
		sh.Add(fmt.Sprintf("trigger delay %s → 0", t.Delay), g)
	}
}

// Shorter adds f with the duration what shorter (Shorter).
func (sh *Shrink[F]) Shorter(what string, field func(*F) *time.Duration) {
	d := *field(&sh.f)
	for _, e := range Shorter(d) {
		g := sh.f
		*field(&g) = e
		sh.Add(fmt.Sprintf("%s %s → %s", what, d, e), g)
	}
}

// None adds f with the duration what taken away.
func (sh *Shrink[F]) None(what string, field func(*F) *time.Duration) {
	if d := *field(&sh.f); d > 0 {
		g := sh.f
		*field(&g) = 0
		sh.Add(fmt.Sprintf("%s %s → 0", what, d), g)
	}
}

// Fewer adds f with the count what smaller (Fewer), at least lo.
func (sh *Shrink[F]) Fewer(what string, field func(*F) *int, lo int) {
	n := *field(&sh.f)
	for _, m := range Fewer(n, lo) {
		g := sh.f
		*field(&g) = m
		sh.Add(fmt.Sprintf("%s %d → %d", what, n, m), g)
	}
}

// Earlier are the hits before hit to try: 1, half, one less.
func Earlier(hit int64) []int64 {
	var out []int64
	for _, h := range []int64{1, hit / 2, hit - 1} {
		if h >= 1 && h < hit && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// Fewer are half and three quarters of n, at least lo and below n.
func Fewer(n, lo int) []int {
	var out []int
	for _, m := range []int{n / 2, n * 3 / 4} {
		if m >= lo && m < n && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// Shorter are half and three quarters of d, in whole milliseconds (the
// unit of Toxiproxy's attributes), at least MinDuration.
func Shorter(d time.Duration) []time.Duration {
	var out []time.Duration
	for _, e := range []time.Duration{d / 2, d * 3 / 4} {
		e = e.Truncate(time.Millisecond)
		if e >= MinDuration && e < d && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}
