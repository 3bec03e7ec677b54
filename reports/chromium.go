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

// ChromiumPath is Debian's chromium, installed by `make deps`.
const ChromiumPath = "/usr/bin/chromium"

// ErrNoChromium says the browser is missing and how to get it.
var ErrNoChromium = errors.New("reports: " + ChromiumPath + " not found: `make deps` installs Debian's chromium package (apt-get install -y --no-install-recommends chromium)")

// chromiumFlags keep headless Chromium to itself: no sandbox (root in CI),
// no GPU, nothing fetched from the network, no first-run or sync work.
var chromiumFlags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
	"--disable-quic", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
	"--window-size=1400,2400",
}

// profilePrefix names the fresh profile folder of each browser run.
const profilePrefix = "faultline-chromium-"

// WriteScreenshot draws a report folder's index.html into its screenshot.png.
func WriteScreenshot(ctx context.Context, dir string) error {
	return Screenshot(ctx, filepath.Join(dir, IndexFile), filepath.Join(dir, ScreenshotFile))
}

// Screenshot renders htmlPath in headless Chromium and writes a PNG of the
// first 1400×2400 pixels to pngPath.
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

// DumpDOM renders htmlPath in headless Chromium and returns the DOM as the
// browser built it.
func DumpDOM(ctx context.Context, htmlPath string) (string, error) {
	out, err := runChromium(ctx, htmlPath, "--dump-dom")
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// runChromium runs one headless browser in its own process group with a
// fresh profile, bounded by ctx; whatever it started is killed before it
// returns, and the profile is removed.
func runChromium(ctx context.Context, htmlPath string, mode string) ([]byte, error) {
	if _, err := os.Stat(ChromiumPath); err != nil {
		return nil, ErrNoChromium
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

	args := append(append([]string(nil), chromiumFlags...), "--user-data-dir="+profile, mode, (&url.URL{Scheme: "file", Path: abs}).String())
	cmd := exec.CommandContext(ctx, ChromiumPath, args...)
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

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
