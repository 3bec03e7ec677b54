package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// bars prints a progress bar for a run's long phase each time it has moved
// on by a fifth, so parallel runs stay readable on stderr.
type bars struct {
	w    io.Writer
	mu   sync.Mutex
	last map[string]int // run/phase → fifths printed
}

func newBars(w io.Writer) *bars { return &bars{w: w, last: map[string]int{}} }

func (b *bars) tick(run, phase string, done float64) {
	fifths := int(done * 5)
	key := run + "/" + phase
	b.mu.Lock()
	prev, seen := b.last[key]
	if seen && fifths <= prev {
		b.mu.Unlock()
		return
	}
	b.last[key] = fifths
	b.mu.Unlock()
	progress(b.w, "  %s: %-10s %s", run, phase, bar(done))
}

// bar renders done (0..1) as [#####-----] 50%.
func bar(done float64) string {
	const width = 20
	n := int(done * width)
	n = min(max(n, 0), width)
	return fmt.Sprintf("[%s%s] %3.0f%%", strings.Repeat("#", n), strings.Repeat("-", width-n), done*100)
}
