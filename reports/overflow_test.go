package reports

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/result"
)

// measureScript opens every <details> (a closed one hides what a reader
// opens), then lists each element whose box ends right of the viewport
// (the outermost of them) and each box whose content is wider than itself (text spilling out of
// a cell, a table scrolling in its box): both are cut off for a reader.
// It writes its findings into the page as JSON, for --dump-dom.
const measureScript = `<script>
(function () {
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  var vw = document.documentElement.clientWidth, out = [];
  function name(e) {
    var c = typeof e.className === "string" && e.className ? "." + e.className.trim().split(/\s+/).join(".") : "";
    return e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + c + " \"" + (e.textContent || "").trim().replace(/\s+/g, " ").slice(0, 50) + "\"";
  }
  document.querySelectorAll("body *").forEach(function (e) {
    if (e.closest("svg") && e.tagName.toLowerCase() !== "svg") return;
    var r = e.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) return;
    var p = e.parentElement, pr = p ? p.getBoundingClientRect() : null;
    if (r.right > vw + 0.5 && !(pr && pr.right > vw + 0.5)) out.push("past the viewport by " + Math.round(r.right - vw) + "px: " + name(e));
    if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1) out.push("content " + (e.scrollWidth - e.clientWidth) + "px wider than its box: " + name(e));
  });
  var pre = document.createElement("pre");
  pre.id = "overflow-report";
  pre.textContent = JSON.stringify({viewport: vw, page: document.documentElement.scrollWidth, over: out});
  document.body.appendChild(pre);
})();
</script>`

type overflowReport struct {
	Viewport int      `json:"viewport"`
	Page     int      `json:"page"`
	Over     []string `json:"over"`
}

// overflowOf renders run, draws it in Chromium at ViewportWidth and
// returns what does not fit.
func overflowOf(t *testing.T, run result.Run) overflowReport {
	t.Helper()
	dir := reportDir(t)
	require.NoError(t, Write(dir, run))
	page := read(t, filepath.Join(dir, IndexFile))
	require.Contains(t, page, "</body>")
	measured := filepath.Join(dir, "measured.html")
	require.NoError(t, os.WriteFile(measured, []byte(strings.Replace(page, "</body>", measureScript+"</body>", 1)), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dom, err := dumpDOM(ctx, measured)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)<pre id="overflow-report">(.*?)</pre>`).FindStringSubmatch(dom)
	require.NotNil(t, m, "the measuring script ran")
	var rep overflowReport
	require.NoError(t, json.Unmarshal([]byte(htmlUnescape(m[1])), &rep))
	return rep
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&quot;", `"`, "&lt;", "<", "&gt;", ">", "&#39;", "'", "&amp;", "&").Replace(s)
}

// Nothing of a report is cut off at 1280 px, every <details> open: no
// element's right edge past the viewport, no box whose content is wider
// than it (a table scrolling in its box, text spilling out of a cell).
func TestReportFitsViewport(t *testing.T) {
	needChromium(t)
	for _, tc := range []struct {
		name string
		run  result.Run
	}{
		{"failing gate with a variant missed", fixtureRun()},
		{"black-box target", fixtureBlackBox()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := overflowOf(t, tc.run)
			assert.Equal(t, ViewportWidth, rep.Viewport)
			assert.LessOrEqual(t, rep.Page, rep.Viewport, "the page is no wider than the viewport")
			assert.Empty(t, rep.Over)
		})
	}
}
