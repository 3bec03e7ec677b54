package reports

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// needChromium fails (not skips) without the browser: CI installs it.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := FindChromium(os.Getenv, exec.LookPath); err != nil {
		t.Fatalf("%v", err)
	}
}

// The browser is $FAULTLINE_CHROMIUM where set, else the first Chromium
// on PATH; none found is ErrNoChromium, and a FAULTLINE_CHROMIUM that is
// not there is never replaced by another browser.
func TestFindChromium(t *testing.T) {
	errMissing := errors.New("executable file not found in $PATH")
	tests := []struct {
		name    string
		env     string
		onPath  []string // what lookPath finds: a name as /bin/name, a path as it is
		want    string
		wantErr string
	}{
		{name: "debian's chromium", onPath: []string{"chromium", "google-chrome"}, want: "/bin/chromium"},
		{name: "ubuntu's chromium-browser", onPath: []string{"chromium-browser"}, want: "/bin/chromium-browser"},
		{name: "google chrome", onPath: []string{"google-chrome"}, want: "/bin/google-chrome"},
		{name: "chromium before chrome", onPath: []string{"google-chrome", "chromium-browser"}, want: "/bin/chromium-browser"},
		{name: "FAULTLINE_CHROMIUM first", env: "/opt/chrome/chrome", onPath: []string{"chromium", "/opt/chrome/chrome"}, want: "/opt/chrome/chrome"},
		{name: "FAULTLINE_CHROMIUM missing", env: "/nope/chrome", onPath: []string{"chromium"}, wantErr: "$FAULTLINE_CHROMIUM=/nope/chrome"},
		{name: "none", wantErr: "no Chromium found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == ChromiumEnv {
					return tc.env
				}
				return ""
			}
			lookPath := func(name string) (string, error) {
				switch {
				case !slices.Contains(tc.onPath, name):
				case strings.Contains(name, "/"):
					return name, nil
				default:
					return "/bin/" + name, nil
				}
				return "", errMissing
			}
			got, err := FindChromium(getenv, lookPath)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, ErrNoChromium)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// Without a browser a screenshot is skipped with ErrNoChromium, and the
// report folder keeps everything else.
func TestScreenshotWithoutChromium(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(ChromiumEnv, "")
	dir := t.TempDir()
	require.NoError(t, Write(dir, fixtureRun()))
	err := WriteScreenshot(context.Background(), dir)
	require.ErrorIs(t, err, ErrNoChromium)
	assert.NoFileExists(t, filepath.Join(dir, ScreenshotFile))
	assert.FileExists(t, filepath.Join(dir, IndexFile))
}

// privateTemp gives the test a TMPDIR of its own: the browser profiles
// and Chromium's own folders go there, so that browsers and profiles see
// this test's and not those of another process on the machine. Its path
// is short: Chromium's sockets live in it, and a socket's path has a
// limit (108 bytes) that t.TempDir's long names can pass.
func privateTemp(t *testing.T) {
	t.Helper()
	dir, err := os.MkdirTemp("", "flr")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv("TMPDIR", dir)
}

// browsers lists the processes still running with one of our profiles.
func browsers(t *testing.T) []string {
	t.Helper()
	var out []string
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		if bytes.Contains(b, []byte("--user-data-dir="+filepath.Join(os.TempDir(), profilePrefix))) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

func profiles(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(os.TempDir(), profilePrefix+"*"))
	require.NoError(t, err)
	shm, err := filepath.Glob(filepath.Join(os.TempDir(), "org.chromium.Chromium.*")) // Chromium's own, in TMPDIR
	require.NoError(t, err)
	return append(m, shm...)
}

// The report as a real browser shows it: the table, the matrix and the
// timelines are on the page, markup from the run is text, and the folder
// keeps a screenshot.
func TestReportInBrowser(t *testing.T) {
	needChromium(t)
	privateTemp(t)
	before := profiles(t)
	dir := reportDir(t)
	require.NoError(t, Write(dir, fixtureRun()))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	start := time.Now()
	dom, err := dumpDOM(ctx, filepath.Join(dir, IndexFile))
	require.NoError(t, err)
	t.Logf("dump-dom took %s", time.Since(start).Round(time.Millisecond))

	assert.Contains(t, dom, `id="windows"`)
	rows := regexp.MustCompile(`<tr class="window[^"]*" data-window="([^"]+)"`).FindAllStringSubmatch(dom, -1)
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r[1]] = true
	}
	shown, _ := newIndex(fixtureRun()).offered(windowsOf(fixtureRun()))
	for _, w := range shown {
		assert.True(t, seen[w.Key()], "window row %s on the page", w.Key())
	}
	assert.Len(t, rows, 13, "a line per window and pipeline (the target's variants), and one for the run no window names")
	assert.Contains(t, dom, `id="matrix"`)
	assert.Contains(t, dom, `data-variant="no-inbox"`)
	svgs := regexp.MustCompile(`(?s)<svg class="timeline".*?</svg>`).FindAllString(dom, -1)
	require.Len(t, svgs, 3, "a timeline per scenario that recorded one")
	for _, lane := range []string{"order", "relay-1", "relay-2", "inventory"} {
		assert.Contains(t, svgs[0], `class="lanelabel" x="8"`)
		assert.Regexp(t, `<text class="lanelabel"[^>]*>`+lane+`</text>`, svgs[0])
	}
	assert.Contains(t, dom, "no timeline recorded")
	// Markup in the run's data is text in the browser, never an element.
	assert.NotContains(t, strings.ToLower(dom), "<script")
	assert.Contains(t, dom, "no-lost-event &lt;script&gt;alert(\"x\")&lt;/script&gt;")

	start = time.Now()
	require.NoError(t, WriteScreenshot(ctx, dir))
	t.Logf("screenshot took %s", time.Since(start).Round(time.Millisecond))
	png := filepath.Join(dir, ScreenshotFile)
	fi, err := os.Stat(png)
	require.NoError(t, err)
	assert.Greater(t, fi.Size(), int64(10*1024), "a real picture, not a blank page")
	head := make([]byte, 8)
	f, err := os.Open(png)
	require.NoError(t, err)
	_, err = f.Read(head)
	f.Close()
	require.NoError(t, err)
	assert.Equal(t, "\x89PNG\r\n\x1a\n", string(head))
	t.Logf("screenshot: %s (%d bytes)", png, fi.Size())

	// Nothing left behind: no browser process, no profile.
	assert.Empty(t, browsers(t))
	assert.ElementsMatch(t, before, profiles(t))
}

// A black-box target's report as the browser shows it: what failed first,
// with its lost events by stage, then the windows it offers; no variants
// line and no matrix, the target lists no variants.
func TestBlackBoxReportInBrowser(t *testing.T) {
	needChromium(t)
	dir := reportDir(t)
	require.NoError(t, Write(dir, fixtureBlackBox()))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dom, err := dumpDOM(ctx, filepath.Join(dir, IndexFile))
	require.NoError(t, err)

	order := []string{
		`<section id="findings" class="fail">`,
		"2 of 5 runs of the correct pipeline failed; 1 run indeterminate",
		"blackbox-relay-answers-lost</b></a> seed 7: <span class=\"what\">lost 1 (skipped 1)</span>",
		"blackbox-relay-frozen-past-lease</b></a> seed 7: <span class=\"what\">lost 43 (routed-nowhere 3, consumed-without-effect 40)</span>",
		"<h3>Indeterminate</h3>",
		"<h2>Failure windows</h2>",
		"4 windows left out",
		"The target lists no variants",
		`id="windows"`,
	}
	at := 0
	for _, want := range order {
		i := strings.Index(dom[at:], want)
		require.NotEqual(t, -1, i, "%q after the one before it", want)
		at += i
	}
	assert.NotContains(t, dom, "<span>variants", "no variants line")
	assert.NotContains(t, dom, `id="matrix"`)
	assert.NotContains(t, strings.ToLower(dom), "<script")

	require.NoError(t, WriteScreenshot(ctx, dir))
	fi, err := os.Stat(filepath.Join(dir, ScreenshotFile))
	require.NoError(t, err)
	assert.Greater(t, fi.Size(), int64(10*1024), "a real picture, not a blank page")
	t.Logf("screenshot: %s (%d bytes)", filepath.Join(dir, ScreenshotFile), fi.Size())
}

// A deadline ends the browser and everything it started.
func TestChromiumBoundedByContext(t *testing.T) {
	needChromium(t)
	privateTemp(t)
	before := profiles(t)
	dir := t.TempDir()
	require.NoError(t, Write(dir, fixtureRun()))
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := dumpDOM(ctx, filepath.Join(dir, IndexFile))
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Empty(t, browsers(t))
	assert.ElementsMatch(t, before, profiles(t), "a killed browser leaves no folder either")
}

func TestChromiumMissingPage(t *testing.T) {
	needChromium(t)
	_, err := dumpDOM(context.Background(), filepath.Join(t.TempDir(), "nope.html"))
	require.Error(t, err)
}

// A browser that crashes (ends by a signal) is started again on the same
// page, up to browserRuns in all; one that fails by itself is not.
func TestCrashedBrowserRunsAgain(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	// The fake browser counts its runs, crashes (SIGSEGV) until its
	// crashes-th run, then dumps a DOM.
	fake := filepath.Join(dir, "browser")
	require.NoError(t, os.WriteFile(fake, []byte(`#!/bin/sh
echo run >> "$FAKE_RUNS"
if [ "$(wc -l < "$FAKE_RUNS")" -le "$FAKE_CRASHES" ]; then kill -SEGV $$; fi
if [ "$FAKE_CRASHES" = fail ]; then exit 1; fi
echo '<html>drawn</html>'
`), 0o755))
	page := filepath.Join(dir, "index.html")
	require.NoError(t, os.WriteFile(page, []byte("<html></html>"), 0o644))
	t.Setenv(ChromiumEnv, fake)
	t.Setenv("FAKE_RUNS", runs)
	for _, tc := range []struct {
		crashes string
		runs    int
		ok      bool
	}{
		{"0", 1, true},
		{"2", 3, true},
		{"3", browserRuns, false},
		{"fail", 1, false},
	} {
		require.NoError(t, os.WriteFile(runs, nil, 0o644))
		t.Setenv("FAKE_CRASHES", tc.crashes)
		dom, err := dumpDOM(context.Background(), page)
		lines, rerr := os.ReadFile(runs)
		require.NoError(t, rerr)
		assert.Equal(t, tc.runs, strings.Count(string(lines), "run"), "crashes %s", tc.crashes)
		if tc.ok {
			assert.NoError(t, err, "crashes %s", tc.crashes)
			assert.Contains(t, dom, "drawn")
		} else {
			assert.Error(t, err, "crashes %s", tc.crashes)
		}
	}
}
