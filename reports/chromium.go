package reports

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ChromiumEnv names a Chromium (or Chrome) binary to use instead of the
// one on PATH.
const ChromiumEnv = "FAULTLINE_CHROMIUM"

// chromiumNames are the names a Chromium goes by on PATH, in the order
// they are tried: Debian's, Ubuntu's and others', Google's.
func chromiumNames() []string { return []string{"chromium", "chromium-browser", "google-chrome"} }

// ErrNoChromium says no browser was found and how to get one; the report
// is written all the same, only its screenshot is missing.
var ErrNoChromium = errors.New("reports: no Chromium found (looked for $" + ChromiumEnv + ", then chromium, chromium-browser and google-chrome on PATH): no screenshot; install Chromium (Debian: apt-get install -y --no-install-recommends chromium) or set " + ChromiumEnv)

// FindChromium is the browser to draw the report with: $FAULTLINE_CHROMIUM
// where set (a name on PATH or a path; a missing one is an error, never
// replaced by another browser), else the first of chromiumNames on PATH.
// getenv and lookPath are os.Getenv and exec.LookPath but in tests.
func FindChromium(getenv func(string) string, lookPath func(string) (string, error)) (string, error) {
	if name := getenv(ChromiumEnv); name != "" {
		p, err := lookPath(name)
		if err != nil {
			return "", fmt.Errorf("%w: $%s=%s: %v", ErrNoChromium, ChromiumEnv, name, err)
		}
		return p, nil
	}
	for _, name := range chromiumNames() {
		if p, err := lookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// ViewportWidth is the width, in CSS pixels, the report is drawn at: the
// page must fit it with nothing cut off.
const ViewportWidth = 1280

// chromiumFlags keep headless Chromium to itself: no sandbox (root in CI),
// no GPU, nothing fetched from the network, no first-run or sync work.
func chromiumFlags() []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
		"--disable-quic", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		fmt.Sprintf("--window-size=%d,2400", ViewportWidth),
	}
}

// profilePrefix names the fresh profile folder of each browser run.
const profilePrefix = "faultline-chromium-"

// WriteScreenshot draws a report folder's index.html into its screenshot.png.
func WriteScreenshot(ctx context.Context, dir string) error {
	return Screenshot(ctx, filepath.Join(dir, IndexFile), filepath.Join(dir, ScreenshotFile))
}

// Screenshot renders htmlPath in headless Chromium and writes a PNG of the
// first ViewportWidth×2400 pixels to pngPath. Without a browser it returns
// an error wrapping ErrNoChromium.
func Screenshot(ctx context.Context, htmlPath, pngPath string) error {
	png, err := filepath.Abs(pngPath)
	if err != nil {
		return err
	}
	_ = os.Remove(png)
	if _, err := runChromium(ctx, htmlPath, "--screenshot="+png); err != nil {
		return err
	}
	fi, err := os.Stat(png)
	if err != nil {
		return fmt.Errorf("reports: chromium wrote no screenshot: %w", err)
	}
	if fi.Size() == 0 {
		return fmt.Errorf("reports: chromium wrote an empty screenshot %s", png)
	}
	return nil
}

// dumpDOM renders htmlPath in headless Chromium and returns the DOM as the
// browser built it.
func dumpDOM(ctx context.Context, htmlPath string) (string, error) {
	out, err := runChromium(ctx, htmlPath, "--dump-dom")
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// browserRuns is how many times a browser that crashed (ended by a signal
// faultline did not send) is started again on the same page: a crash of
// the browser says nothing of the report.
const browserRuns = 3

// runChromium runs a headless browser on htmlPath; one that crashed is
// started again, up to browserRuns in all.
func runChromium(ctx context.Context, htmlPath string, mode string) ([]byte, error) {
	for run := 1; ; run++ {
		out, err := runChromiumOnce(ctx, htmlPath, mode)
		if !crashed(err) || ctx.Err() != nil || run == browserRuns {
			return out, err
		}
	}
}

// runChromiumOnce runs one headless browser in its own process group with
// a fresh profile, bounded by ctx; whatever it started is killed before it
// returns, and the profile is removed.
func runChromiumOnce(ctx context.Context, htmlPath string, mode string) ([]byte, error) {
	browser, err := FindChromium(os.Getenv, exec.LookPath)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(htmlPath)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("reports: %w", err)
	}
	profile, err := os.MkdirTemp("", profilePrefix)
	if err != nil {
		return nil, fmt.Errorf("reports: browser profile: %w", err)
	}
	defer os.RemoveAll(profile)

	args := append(chromiumFlags(), "--user-data-dir="+profile, mode, (&url.URL{Scheme: "file", Path: abs}).String())
	cmd := exec.CommandContext(ctx, browser, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 3 * time.Second
	// Chromium keeps its shared-memory folders (org.chromium.Chromium.*) in
	// TMPDIR: inside the profile they go with it.
	cmd.Env = append(os.Environ(), "HOME="+profile, "TMPDIR="+profile)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if cmd.Process != nil {
		// Renderer, zygote and GPU helpers share the group: none outlives us.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("reports: chromium %s on %s: %w", mode, abs, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("reports: chromium %s on %s: %w\n%s", mode, abs, err, tail(stderr.String(), 12))
	}
	return stdout.Bytes(), nil
}

// crashed reports whether err is a process's end by a signal.
func crashed(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
