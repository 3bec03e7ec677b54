package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// reporter tells how the runs of a command are getting on, on stderr. On a
// terminal it is live: a block of lines at the bottom, one per run under
// way, redrawn in place, with finished runs' lines printed above it;
// elsewhere (CI, a pipe, a file) it is plain: a line per event, each with
// the time of day. It is safe for concurrent use.
type reporter interface {
	// Start says a run has begun (Phase and Tick imply it).
	Start(run string)
	// Phase says a run has entered a phase.
	Phase(run, phase string)
	// Tick says how far (0..1) a run is in a long phase.
	Tick(run, phase string, done float64)
	// Done says a run has finished, with its one-line result.
	Done(run, line string)
	// Logf prints a line.
	Logf(format string, args ...any)
	// Write prints what is written, line by line: other loggers (the
	// shared infrastructure's) write to stderr through it.
	io.Writer
	// Stop clears the live block, if any; call it before writing to the
	// terminal otherwise. Lines told after Stop are printed plain.
	Stop()
}

// newReporter returns a live reporter if w is a terminal that takes one
// (TERM set and not dumb, NO_COLOR not set), else a plain one.
func newReporter(w io.Writer) reporter {
	if f, ok := liveTerminal(w, os.Getenv); ok {
		return newLive(w, func() (int, int) {
			width, height, _ := terminalSize(f)
			return width, height
		})
	}
	return newPlain(w)
}

// plain is the reporter for anything but a terminal: today's line log.
type plain struct {
	w    io.Writer
	mu   sync.Mutex
	bars *bars
}

func newPlain(w io.Writer) *plain {
	p := &plain{w: w}
	p.bars = &bars{last: map[string]int{}, printf: p.printf}
	return p
}

// printf prints one line with the time of day before it.
func (p *plain) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, time.Now().Format("15:04:05")+" "+format+"\n", args...)
}

func (p *plain) Start(string) {}

func (p *plain) Phase(run, phase string) { p.printf("  %s: %s", run, phase) }

func (p *plain) Tick(run, phase string, done float64) { p.bars.tick(run, phase, done) }

func (p *plain) Done(_, line string) { p.printf("%s", line) }

func (p *plain) Logf(format string, args ...any) { p.printf(format, args...) }

func (p *plain) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Write(b)
}

func (p *plain) Stop() {}

// bars prints a progress bar for a run's long phase each time it has moved
// on by a fifth, so parallel runs stay readable on stderr.
type bars struct {
	printf func(format string, args ...any)
	mu     sync.Mutex
	last   map[string]int // run/phase → fifths printed
}

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
	b.printf("  %s: %-10s %s", run, phase, bar(done))
}

// bar renders done (0..1) as [#####-----] 50%.
func bar(done float64) string {
	const width = 20
	n := int(done * width)
	n = min(max(n, 0), width)
	return fmt.Sprintf("[%s%s] %3.0f%%", strings.Repeat("#", n), strings.Repeat("-", width-n), done*100)
}
