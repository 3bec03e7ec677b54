// Package docs holds only tests: the README and the pages under docs/
// point at files that exist in this repository, and at nothing outside it.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeMaxLines bounds the README: it says what faultline is, how to
// install it and attack a pipeline, and links to docs/ for the rest.
const readmeMaxLines = 250

// root is the repository's root, seen from this package's folder.
const root = ".."

// inlineLink matches a Markdown inline link or image, [text](dest) or
// ![alt](dest "title"), capturing dest.
var inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// refLink matches a reference definition, [label]: dest.
var refLink = regexp.MustCompile(`(?m)^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)

// codeSpan matches an inline code span.
var codeSpan = regexp.MustCompile("`[^`\n]+`")

// pages lists the Markdown files whose links are checked, relative to the
// repository's root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	out := []string{"README.md"}
	if _, err := os.Stat(filepath.Join(root, "CHANGELOG.md")); err == nil {
		out = append(out, "CHANGELOG.md")
	}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		require.NoError(t, err)
		out = append(out, rel)
	}
	require.Contains(t, out, filepath.Join("docs", "design.md"), "the glob found docs/")
	return out
}

// prose is a page without its fenced code blocks and code spans: a path
// inside code is an example, not a link.
func prose(text string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.Lines(text) {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
			b.WriteString("\n")
			continue
		}
		if fenced {
			b.WriteString("\n")
			continue
		}
		b.WriteString(codeSpan.ReplaceAllString(line, "``"))
	}
	return b.String()
}

// links returns every link destination in a page's prose.
func links(text string) []string {
	p := prose(text)
	var out []string
	for _, re := range []*regexp.Regexp{inlineLink, refLink} {
		for _, m := range re.FindAllStringSubmatch(p, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// external says whether a destination leaves the repository on purpose: a
// URL with a scheme, or an e-mail address.
func external(dest string) bool {
	if strings.HasPrefix(dest, "//") {
		return true
	}
	scheme, _, ok := strings.Cut(dest, ":")
	return ok && scheme != "" && !strings.ContainsAny(scheme, "/.#")
}

// slug is the anchor GitHub gives a heading: lower case, punctuation
// dropped (hyphens and underscores kept), spaces made hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the heading anchors of a Markdown page, outside code blocks.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for line := range strings.Lines(prose(text)) {
		t := strings.TrimSpace(line)
		if !strings.HasPrefix(t, "#") {
			continue
		}
		h := strings.TrimLeft(t, "#")
		if !strings.HasPrefix(h, " ") {
			continue // "#word" is no heading
		}
		s := slug(strings.ReplaceAll(h, "``", ""))
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// inside says whether path, relative to the repository's root, stays in it.
func inside(path string) bool {
	clean := filepath.Clean(path)
	return clean != ".." && !strings.HasPrefix(clean, ".."+string(filepath.Separator)) && !filepath.IsAbs(clean)
}

func TestLinksResolveInTheRepository(t *testing.T) {
	for _, page := range pages(t) {
		t.Run(page, func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join(root, page))
			require.NoError(t, err)
			for _, dest := range links(string(text)) {
				if external(dest) {
					continue
				}
				path, anchor, _ := strings.Cut(dest, "#")
				target := page // a bare #anchor is on the page itself
				if path != "" {
					if strings.HasPrefix(path, "/") {
						target = filepath.Clean(strings.TrimPrefix(path, "/"))
					} else {
						target = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
					}
				}
				if !assert.Truef(t, inside(target), "%s links to %q, outside the repository", page, dest) {
					continue
				}
				info, err := os.Stat(filepath.Join(root, target))
				if !assert.NoErrorf(t, err, "%s links to %q: no such file in the repository", page, dest) {
					continue
				}
				if anchor == "" || info.IsDir() || !strings.HasSuffix(target, ".md") {
					continue
				}
				body, err := os.ReadFile(filepath.Join(root, target))
				require.NoError(t, err)
				assert.Truef(t, anchors(string(body))[anchor], "%s links to %q: %s has no heading with that anchor", page, dest, target)
			}
		})
	}
}

// TestNoPathOutsideTheRepository: a path that climbs out of the repository
// names a file no reader has. In prose a path is relative to the page's
// folder, as a link is; in code, where commands run from the root, it must
// stay inside from both.
func TestNoPathOutsideTheRepository(t *testing.T) {
	climbs := regexp.MustCompile(`(?:^|[\s"'(=\x60])((?:\.\./)+[\w.-]+(?:/[\w.-]+)*)`)
	for _, page := range pages(t) {
		text, err := os.ReadFile(filepath.Join(root, page))
		require.NoError(t, err)
		fromPage := func(path string) bool { return inside(filepath.Join(filepath.Dir(page), path)) }
		fenced := false
		for i, line := range strings.Split(string(text), "\n") {
			if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
				fenced = !fenced
				continue
			}
			code, rest := line, ""
			if !fenced {
				code = strings.Join(codeSpan.FindAllString(line, -1), " ")
				rest = codeSpan.ReplaceAllString(line, "``")
			}
			for _, m := range climbs.FindAllStringSubmatch(code, -1) {
				assert.Truef(t, fromPage(m[1]) && inside(m[1]), "%s:%d names %q, outside the repository", page, i+1, m[1])
			}
			for _, m := range climbs.FindAllStringSubmatch(rest, -1) {
				assert.Truef(t, fromPage(m[1]), "%s:%d names %q, outside the repository", page, i+1, m[1])
			}
		}
	}
}

func TestReadmeIsShort(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	lines := strings.Count(string(text), "\n")
	assert.LessOrEqualf(t, lines, readmeMaxLines, "README.md has %d lines; move the detail to a page under docs/", lines)
}

func TestHelpers(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"inline and image", "see [a](docs/a.md) and ![b](docs/b.png \"t\")", []string{"docs/a.md", "docs/b.png"}},
		{"reference", "[x]: docs/x.md\n", []string{"docs/x.md"}},
		{"code is not a link", "`[a](nowhere.md)`\n```\n[b](nowhere.md)\n```\n", nil},
		{"anchor kept", "[c](ci.md#the-action)", []string{"ci.md#the-action"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, links(tt.text))
		})
	}

	assert.True(t, external("https://example.com/x"))
	assert.True(t, external("mailto:a@b.c"))
	assert.False(t, external("docs/ci.md"))
	assert.False(t, external("#anchor"))

	assert.Equal(t, "the-docker-provider-and-this-repositorys-ci", slug("The docker provider and this repository's CI"))
	assert.Equal(t, "exit-statuses", slug("Exit statuses"))
	got := anchors("# faultline\n## Measured\n## Measured\n```\n# not a heading\n```\n#hashtag\n")
	assert.Equal(t, map[string]bool{"faultline": true, "measured": true, "measured-1": true}, got)

	assert.True(t, inside("docs/ci.md"))
	assert.False(t, inside("../elsewhere/x.txt"))
	assert.False(t, inside("docs/../../x"))
}
