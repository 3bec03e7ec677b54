package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// screen is a terminal as far as the live renderer needs one: it runs the
// bytes written to it (text, \r, \n, CSI n A, CSI 2 K, CSI J) and keeps the
// lines on the screen and the cursor.
type screen struct {
	t        *testing.T
	lines    [][]rune
	row, col int
}

func (s *screen) run(out string) {
	s.t.Helper()
	rs := []rune(out)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '\n':
			s.row, s.col = s.row+1, 0
		case '\r':
			s.col = 0
		case '\x1b':
			require.Less(s.t, i+1, len(rs))
			require.Equal(s.t, '[', rs[i+1], "escape at %d", i)
			j := i + 2
			for j < len(rs) && rs[j] >= '0' && rs[j] <= '9' {
				j++
			}
			require.Less(s.t, j, len(rs), "unfinished escape")
			n := 1
			if j > i+2 {
				n, _ = strconv.Atoi(string(rs[i+2 : j]))
			}
			switch rs[j] {
			case 'A':
				s.row = max(s.row-n, 0)
			case 'K':
				require.Equal(s.t, 2, n, "only CSI 2 K")
				s.grow()
				s.lines[s.row] = nil
			case 'J':
				require.Equal(s.t, 1, n, "only CSI J")
				s.grow()
				s.lines[s.row] = s.lines[s.row][:min(s.col, len(s.lines[s.row]))]
				s.lines = s.lines[:s.row+1]
			default:
				s.t.Fatalf("unexpected escape %q", string(rs[i:j+1]))
			}
			i = j
		default:
			require.True(s.t, c >= ' ', "control character %q", c)
			s.grow()
			line := s.lines[s.row]
			for len(line) <= s.col {
				line = append(line, ' ')
			}
			line[s.col] = c
			s.lines[s.row] = line
			s.col++
		}
	}
}

func (s *screen) grow() {
	for len(s.lines) <= s.row {
		s.lines = append(s.lines, nil)
	}
}

// text is the screen's lines, trailing empty ones left out.
func (s *screen) text() []string {
	var out []string
	for _, l := range s.lines {
		out = append(out, strings.TrimRight(string(l), " "))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testLive is a live renderer on a buffer that redraws only when flushed.
type testLive struct {
	*live
	buf   *bytes.Buffer
	clock *fakeClock
	scr   *screen
	read  int // bytes of buf run on scr
}

func newTestLive(t *testing.T, width, height int, interval time.Duration) *testLive {
	buf := &bytes.Buffer{}
	clock := &fakeClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	l := startLive(buf, func() (int, int) { return width, height }, clock.now, interval)
	t.Cleanup(l.Stop)
	return &testLive{live: l, buf: buf, clock: clock, scr: &screen{t: t}}
}

// flush redraws the block now, as the loop does once an interval is over.
func (tl *testLive) flush() {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.dirty {
		tl.redraw()
	}
}

// screen runs what was written since last time and returns the screen.
func (tl *testLive) screen() []string {
	tl.mu.Lock()
	out := tl.buf.String()[tl.read:]
	tl.read = tl.buf.Len()
	tl.mu.Unlock()
	tl.scr.run(out)
	return tl.scr.text()
}

var stamped = regexp.MustCompile(`^\d\d:\d\d:\d\d `)

func unstamp(t *testing.T, line string) string {
	t.Helper()
	assert.Regexp(t, stamped, line)
	return stamped.ReplaceAllString(line, "")
}

const never = time.Hour

func TestLiveShowsOneLinePerRunUnderWay(t *testing.T) {
	tl := newTestLive(t, 100, 40, never)
	tl.Start("broker-nack[correct]")
	tl.clock.add(2 * time.Second)
	tl.Phase("broker-nack[correct]", "infra")
	tl.Tick("relay-crash-after-confirm[no-inbox]", "workload", 0.5)
	tl.flush()
	assert.Equal(t, []string{
		"  broker-nack[correct]                 infra                                      2s",
		"  relay-crash-after-confirm[no-inbox]  workload    [##########----------]  50%    0s",
	}, tl.screen())

	// Redrawn in place: still one line per run.
	tl.clock.add(time.Second)
	tl.Phase("broker-nack[correct]", "workload")
	tl.Tick("broker-nack[correct]", "workload", 0.25)
	tl.Tick("relay-crash-after-confirm[no-inbox]", "converging", 1)
	tl.flush()
	assert.Equal(t, []string{
		"  broker-nack[correct]                 workload    [#####---------------]  25%    3s",
		"  relay-crash-after-confirm[no-inbox]  converging  [####################] 100%    1s",
	}, tl.screen())
}

func TestLiveDonePrintsAboveTheBlock(t *testing.T) {
	tl := newTestLive(t, 100, 40, never)
	tl.Phase("a", "infra")
	tl.Phase("b", "faults")
	tl.flush()
	require.Len(t, tl.screen(), 2)

	tl.Done("a", "[1/3] a [correct]: pass (1.0s)")
	scr := tl.screen()
	require.Len(t, scr, 2)
	assert.Equal(t, "[1/3] a [correct]: pass (1.0s)", unstamp(t, scr[0]))
	assert.Equal(t, "  b  faults                                     0s", scr[1])

	tl.Logf("infra: %s", "up")
	_, _ = fmt.Fprintf(tl, "12:00:00.000 b [correct seed 1]: fail in 2s\n")
	tl.Phase("c", "infra")
	tl.flush()
	scr = tl.screen()
	require.Len(t, scr, 5)
	assert.Equal(t, "infra: up", unstamp(t, scr[1]))
	assert.Equal(t, "12:00:00.000 b [correct seed 1]: fail in 2s", scr[2])
	assert.Equal(t, []string{"  b  faults                                     0s", "  c  infra                                      0s"}, scr[3:])
}

func TestLiveStopClearsTheBlock(t *testing.T) {
	tl := newTestLive(t, 100, 40, never)
	tl.Phase("a", "infra")
	tl.Tick("b", "workload", 0.1)
	tl.flush()
	tl.Done("a", "a: pass")
	_, _ = tl.Write([]byte("a line without its end"))
	tl.Stop()
	scr := tl.screen()
	require.Len(t, scr, 2)
	assert.Equal(t, "a: pass", unstamp(t, scr[0]))
	assert.Equal(t, "a line without its end", scr[1])
	assert.Equal(t, 2, tl.scr.row, "the cursor is on the line after the last one printed")
	assert.Equal(t, 0, tl.scr.col)

	// After Stop: plain lines, no block.
	tl.Stop()
	tl.Phase("c", "infra")
	tl.Done("b", "b: pass")
	scr = tl.screen()
	require.Len(t, scr, 3)
	assert.Equal(t, "b: pass", unstamp(t, scr[2]))
	assert.NotContains(t, tl.buf.String()[strings.LastIndex(tl.buf.String(), "a line without its end"):], "\x1b[2K")
}

func TestLiveCutsLinesToTheTerminal(t *testing.T) {
	tl := newTestLive(t, 40, 6, never)
	for i := range 8 {
		tl.Tick(fmt.Sprintf("inventory-crash-after-receive[inbox-own-transaction-%d]", i), "converging", 0.5)
	}
	tl.flush()
	scr := tl.screen()
	require.Len(t, scr, 4, "as many lines as fit, the last says how many more")
	for _, l := range scr {
		assert.Less(t, utf8.RuneCountInString(l), 40, "a line as wide as the terminal would wrap: %q", l)
	}
	assert.Equal(t, "  … and 5 more under way", scr[3])
}

func TestLiveRedrawsByItselfAtMostEveryInterval(t *testing.T) {
	tl := newTestLive(t, 100, 40, 50*time.Millisecond)
	start := time.Now()
	for i := range 200 {
		tl.Tick("a", "workload", float64(i)/200)
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	require.Eventually(t, func() bool {
		scr := tl.screen()
		return len(scr) == 1 && strings.Contains(scr[0], "[###################-] 100%")
	}, 5*time.Second, 10*time.Millisecond)
	tl.mu.Lock()
	redraws := strings.Count(tl.buf.String(), "\x1b[J")
	tl.mu.Unlock()
	assert.LessOrEqual(t, redraws, int(took/(50*time.Millisecond))+3, "200 ticks in %s", took)
	assert.Greater(t, redraws, 0)
}

func TestLiveIsSafeForConcurrentUse(t *testing.T) {
	tl := newTestLive(t, 100, 40, time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			run := fmt.Sprintf("run-%d", g)
			tl.Start(run)
			for i := range 100 {
				tl.Phase(run, "workload")
				tl.Tick(run, "workload", float64(i)/100)
				if i%25 == 0 {
					tl.Logf("%s at %d", run, i)
					_, _ = fmt.Fprintf(tl, "%s wrote %d\n", run, i)
				}
			}
			tl.Done(run, run+": pass")
		})
	}
	wg.Wait()
	tl.Stop()
	scr := tl.screen()
	assert.Len(t, scr, 8*(1+4+4), "every line printed once, and no block left")
	for _, l := range scr {
		assert.NotContains(t, l, "[#", "a progress line was left on the screen")
	}
}

func TestPlainIsTodaysLineLog(t *testing.T) {
	var buf bytes.Buffer
	r := newReporter(&buf)
	require.IsType(t, &plain{}, r)
	r.Start("a")
	r.Phase("a", "workload")
	r.Tick("a", "workload", 0.1)
	r.Tick("a", "workload", 0.15) // same fifth: not printed
	r.Tick("a", "workload", 0.5)
	_, _ = fmt.Fprintf(r, "12:00:00.000 a [correct seed 1]: pass in 1s\n")
	r.Done("a", "[1/1] a [correct]: pass (1.0s)")
	r.Logf("report: %s", "x")
	r.Stop()
	var got []string
	for line := range strings.Lines(buf.String()) {
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, "12:00:00.000 ") {
			got = append(got, line)
			continue
		}
		got = append(got, unstamp(t, line))
	}
	assert.Equal(t, []string{
		"  a: workload",
		"  a: workload   [##------------------]  10%",
		"  a: workload   [##########----------]  50%",
		"12:00:00.000 a [correct seed 1]: pass in 1s",
		"[1/1] a [correct]: pass (1.0s)",
		"report: x",
	}, got)
	assert.NotContains(t, buf.String(), "\x1b")
}

// openPTY opens a pseudo-terminal's master side, a terminal as far as
// TIOCGWINSZ goes.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	f, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	ws := struct{ row, col, x, y uint16 }{row: 30, col: 120}
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCSWINSZ), uintptr(unsafe.Pointer(&ws)))
	require.Zero(t, errno)
	return f
}

func TestLiveTerminalDetection(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	pty := openPTY(t)
	w, h, ok := terminalSize(pty)
	require.True(t, ok)
	assert.Equal(t, [2]int{120, 30}, [2]int{w, h})

	_, ok = liveTerminal(pty, env("TERM", "xterm-256color"))
	assert.True(t, ok, "a terminal")
	_, ok = liveTerminal(pty, env("TERM", "xterm-256color", "NO_COLOR", "1"))
	assert.False(t, ok, "NO_COLOR")
	_, ok = liveTerminal(pty, env("TERM", "dumb"))
	assert.False(t, ok, "TERM=dumb")
	_, ok = liveTerminal(pty, env())
	assert.False(t, ok, "no TERM")

	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	defer pw.Close()
	_, ok = liveTerminal(pw, env("TERM", "xterm"))
	assert.False(t, ok, "a pipe")
	file, err := os.Create(t.TempDir() + "/log")
	require.NoError(t, err)
	defer file.Close()
	_, ok = liveTerminal(file, env("TERM", "xterm"))
	assert.False(t, ok, "a file")
	_, ok = liveTerminal(&bytes.Buffer{}, env("TERM", "xterm"))
	assert.False(t, ok, "not a file")
}
