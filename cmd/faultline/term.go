package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
	"unsafe"
)

// live is the reporter for a terminal: a block of lines at the bottom of
// the screen, one per run under way, redrawn in place; finished runs' lines
// and log lines are printed above it and scroll away as usual.
//
// It assumes it is the only writer to the terminal while the block is up
// (anything else has to go through it: it is an io.Writer) and that the
// terminal understands the ANSI escapes CSI n A (cursor up), CSI 2 K (clear
// line) and CSI J (clear to the end of the screen).
type live struct {
	w        io.Writer
	size     func() (width, height int) // the terminal's, in cells; 0 if unknown
	now      func() time.Time
	interval time.Duration // between redraws, at least

	mu      sync.Mutex
	rows    []*liveRow // in the order the runs started
	drawn   int        // lines of the block on the screen now
	dirty   bool       // the rows changed since the block was drawn
	drawAt  time.Time  // when the block was last drawn
	partial []byte     // a line written through Write, not ended yet
	stopped bool

	quit chan struct{}
	done chan struct{}
}

type liveRow struct {
	run     string
	phase   string
	frac    float64 // progress in the phase, 0..1; < 0: none told yet
	started time.Time
	count   int // runs under way by this name (the gate can run one name twice)
}

const (
	liveInterval = 100 * time.Millisecond // ~10 redraws a second at most
	liveMaxName  = 52                     // columns a run's name gets, at most
	defaultWidth = 100                    // when the terminal's is unknown
)

// newLive starts a live renderer on w, whose size in cells size tells (nil
// or 0: unknown).
func newLive(w io.Writer, size func() (width, height int)) *live {
	return startLive(w, size, time.Now, liveInterval)
}

// startLive is newLive with its clock and redraw interval given.
func startLive(w io.Writer, size func() (width, height int), now func() time.Time, interval time.Duration) *live {
	if size == nil {
		size = func() (int, int) { return 0, 0 }
	}
	l := &live{w: w, size: size, now: now, interval: interval,
		quit: make(chan struct{}), done: make(chan struct{})}
	go l.loop()
	return l
}

// loop redraws the block when it changed, and every second for the clocks.
func (l *live) loop() {
	defer close(l.done)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-l.quit:
			return
		case <-t.C:
			l.mu.Lock()
			if !l.stopped && (l.dirty || len(l.rows) > 0 && l.now().Sub(l.drawAt) >= time.Second) {
				l.redraw()
			}
			l.mu.Unlock()
		}
	}
}

func (l *live) row(run string) *liveRow {
	for _, r := range l.rows {
		if r.run == run {
			return r
		}
	}
	return nil
}

// Start shows run in the block; Phase and Tick do too for a run not shown.
func (l *live) Start(run string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	if r := l.row(run); r != nil {
		r.count++
		return
	}
	l.add(run)
}

func (l *live) add(run string) *liveRow {
	r := &liveRow{run: run, frac: -1, started: l.now(), count: 1}
	l.rows = append(l.rows, r)
	l.dirty = true
	return r
}

func (l *live) Phase(run, phase string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	r := l.row(run)
	if r == nil {
		r = l.add(run)
	}
	r.phase, r.frac = phase, -1
	l.dirty = true
}

func (l *live) Tick(run, phase string, done float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	r := l.row(run)
	if r == nil {
		r = l.add(run)
	}
	r.phase, r.frac = phase, min(max(done, 0), 1)
	l.dirty = true
}

// Done takes run out of the block and prints line above it.
func (l *live) Done(run, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range l.rows {
		if r.run == run {
			if r.count--; r.count <= 0 {
				l.rows = append(l.rows[:i], l.rows[i+1:]...)
			}
			l.dirty = true
			break
		}
	}
	l.above(stamp(line))
}

func (l *live) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.above(stamp(fmt.Sprintf(format, args...)))
}

// Write prints what is written, line by line, above the block (a last line
// not ended yet waits for its end, or for Stop).
func (l *live) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	if i := strings.LastIndexByte(string(l.partial), '\n'); i >= 0 {
		text := string(l.partial[:i])
		l.partial = append(l.partial[:0], l.partial[i+1:]...)
		l.above(text)
	}
	return len(p), nil
}

// Stop clears the block and leaves the cursor where it began. Later lines
// are printed as plain lines; Stop may be called again.
func (l *live) Stop() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.stopped = true
	close(l.quit)
	var b strings.Builder
	l.erase(&b)
	if len(l.partial) > 0 {
		b.Write(l.partial)
		b.WriteByte('\n')
		l.partial = nil
	}
	l.rows = nil
	_, _ = io.WriteString(l.w, b.String())
	l.mu.Unlock()
	<-l.done
}

// above prints text (one or more lines) above the block and draws the
// block again under it, in one write.
func (l *live) above(text string) {
	var b strings.Builder
	l.erase(&b)
	b.WriteString(text)
	b.WriteByte('\n')
	if !l.stopped {
		l.draw(&b)
	}
	_, _ = io.WriteString(l.w, b.String())
}

// redraw draws the block over itself.
func (l *live) redraw() {
	var b strings.Builder
	l.up(&b)
	l.draw(&b)
	b.WriteString("\x1b[J") // the lines a shorter block leaves
	_, _ = io.WriteString(l.w, b.String())
}

// up moves the cursor to the block's first line.
func (l *live) up(b *strings.Builder) {
	if l.drawn > 0 {
		fmt.Fprintf(b, "\x1b[%dA", l.drawn)
	}
	b.WriteByte('\r')
}

// erase clears the block, leaving the cursor on its first line.
func (l *live) erase(b *strings.Builder) {
	if l.drawn == 0 {
		return
	}
	l.up(b)
	b.WriteString("\x1b[J")
	l.drawn = 0
}

// draw writes the block from the cursor on, each line cleared first and
// cut to the terminal's width so that none wraps (the cursor-up count
// would miss it).
func (l *live) draw(b *strings.Builder) {
	lines := l.lines()
	for _, line := range lines {
		b.WriteString("\x1b[2K")
		b.WriteString(line)
		b.WriteByte('\n')
	}
	l.drawn = len(lines)
	l.dirty = false
	l.drawAt = l.now()
}

// lines renders the block: one line per run under way, as many as fit.
func (l *live) lines() []string {
	width, height := l.size()
	if width <= 0 {
		width = defaultWidth
	}
	rows := l.rows
	var more int
	if height > 2 && len(rows) > height-2 {
		keep := height - 3
		rows, more = rows[:keep], len(rows)-keep
	}
	nameW := 0
	for _, r := range rows {
		nameW = max(nameW, utf8.RuneCountInString(r.run))
	}
	nameW = min(nameW, liveMaxName)
	now := l.now()
	out := make([]string, 0, len(rows)+1)
	for _, r := range rows {
		name := r.run
		if n := utf8.RuneCountInString(name); n > nameW {
			name = string([]rune(name)[:nameW-1]) + "…"
		}
		progress := ""
		if r.frac >= 0 {
			progress = bar(r.frac)
		}
		line := fmt.Sprintf("  %-*s  %-10s  %-27s  %3.0fs", nameW, name, r.phase, progress, now.Sub(r.started).Seconds())
		out = append(out, cut(line, width-1))
	}
	if more > 0 {
		out = append(out, cut(fmt.Sprintf("  … and %d more under way", more), width-1))
	}
	return out
}

// cut shortens s to at most n runes.
func cut(s string, n int) string {
	if n < 1 {
		n = 1
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// stamp puts the time of day before a log line, as progress does.
func stamp(line string) string {
	return time.Now().Format("15:04:05") + " " + line
}

// terminalSize returns the width and height in cells of the terminal f is,
// and whether f is a terminal at all (TIOCGWINSZ fails on anything else).
func terminalSize(f *os.File) (width, height int, ok bool) {
	var ws struct{ row, col, xpixel, ypixel uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	if errno != 0 {
		return 0, 0, false
	}
	return int(ws.col), int(ws.row), true
}

// liveTerminal reports whether w is a terminal to draw a live block on:
// a terminal, TERM neither empty nor dumb, and NO_COLOR not set.
func liveTerminal(w io.Writer, getenv func(string) string) (*os.File, bool) {
	f, ok := w.(*os.File)
	if !ok || getenv("NO_COLOR") != "" {
		return nil, false
	}
	if term := getenv("TERM"); term == "" || term == "dumb" {
		return nil, false
	}
	if _, _, ok := terminalSize(f); !ok {
		return nil, false
	}
	return f, true
}
