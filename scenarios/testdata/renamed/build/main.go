// Command build is the build step of the renamed fixture
// (scenarios/testdata/renamed/faultline.yaml): it builds the reference
// pipeline's three programs (system/cmd/order, relay, inventory) from the
// reference's own code, as it is in the checkout at build time, with only
// the SQL changed: every table and column of the renames below gets its
// new name.
//
// It asks `go list -deps` which files the three programs compile, and, of
// the packages of this module among them:
//
//   - rewrites every embedded .sql file (the schema) as a whole;
//   - rewrites, in every Go file, the string literals that are SQL (a
//     literal holding one of the old names and an upper-case SQL keyword);
//     Go identifiers, comments, JSON field names, HTTP paths, database
//     names and every other literal are left as they are;
//
// writes the changed copies under <out>/renamed-src/, a `go build -overlay`
// file mapping each original path to its copy (<out>/overlay.json), and
// runs `go build -overlay` into <out>. Nothing in system/ is touched, so
// edits to it flow into the next build. A literal left alone that holds an
// old name is listed (a warning, not an error: descriptions and messages
// may name a column); the build fails if an old name survives in anything
// it rewrote.
//
// Usage (from anywhere in the module): go run ./scenarios/testdata/renamed/build -out DIR
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/scanner"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// renames maps each old SQL identifier to its new name: tables, columns
// and indexes. An identifier is renamed only as a whole (outbox_messages,
// not a part of ix_outbox_messages_x) and never inside a quoted SQL string.
var renames = map[string]string{
	// tables
	"outbox_messages":        "integration_outbox",
	"inbox_messages":         "processed_messages",
	"inventory_reservations": "stock_holds",
	"parked_events":          "deferred_events",
	"aggregate_versions":     "stream_versions",
	// columns
	"aggregate_id":    "stream_id",
	"attempt_count":   "tries",
	"locked_by":       "claimed_by",
	"locked_until":    "claim_expires_at",
	"next_attempt_at": "retry_after",
	"event_id":        "message_id",
	"reservation_id":  "hold_id",
	"version":         "revision", // orders.version; never a call such as version()
	// indexes
	"ix_outbox_dispatch":    "ix_integration_outbox_dispatch",
	"ix_reservations_event": "ix_stock_holds_message",
}

// statuses maps each outbox status of the article, as a quoted SQL string
// ('Pending'), to this fixture's own value: faultline reads them through
// the contract (mapped back with CASE) and its triggers (observe.outbox.
// statuses), never by the article's names.
var statuses = map[string]string{
	"Pending":    "queued",
	"Processing": "in_flight",
	"Published":  "sent",
	"Failed":     "dead",
}

// programs are the packages built, relative to the module root.
var programs = []string{"./system/cmd/order", "./system/cmd/relay", "./system/cmd/inventory"}

// sqlKeyword marks a Go string literal as SQL (or a fragment of a statement,
// such as the relay's fence condition).
var sqlKeyword = regexp.MustCompile(`\b(SELECT|INSERT|UPDATE|DELETE|CREATE|WHERE|AND|OR|SET|FROM|JOIN|RETURNING|VALUES)\b`)

// identifierWord is an SQL identifier or a word of a comment.
var identifierWord = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

func main() {
	out := flag.String("out", "", "folder to write the programs into (the target's {{build_dir}})")
	noBuild := flag.Bool("no-build", false, "write the renamed copies and the overlay, but do not build")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "build: -out is required")
		os.Exit(2)
	}
	if err := run(*out, *noBuild, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
}

func run(out string, noBuild bool, log io.Writer) error {
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	files, err := sources(root)
	if err != nil {
		return err
	}
	srcDir := filepath.Join(out, "renamed-src")
	overlay := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, f.path)
		var renamed []byte
		if f.sql {
			renamed = []byte(renameSQL(string(data)))
		} else if renamed, err = renameGo(rel, data, log); err != nil {
			return err
		}
		if bytes.Equal(renamed, data) {
			continue
		}
		if left := oldNames(string(renamed), f.sql, rel); len(left) > 0 {
			return fmt.Errorf("%s: old names left after renaming: %s", rel, strings.Join(left, ", "))
		}
		dst := filepath.Join(srcDir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, renamed, 0o644); err != nil {
			return err
		}
		overlay[f.path] = dst
		fmt.Fprintf(log, "renamed %s\n", rel)
	}
	if len(overlay) == 0 {
		return errors.New("no SQL found to rename: the reference's layout changed?")
	}
	overlayFile := filepath.Join(out, "overlay.json")
	data, err := json.MarshalIndent(struct{ Replace map[string]string }{overlay}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(overlayFile, data, 0o644); err != nil {
		return err
	}
	if noBuild {
		return nil
	}
	args := append([]string{"build", "-overlay", overlayFile, "-o", out + string(filepath.Separator)}, programs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = log, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// moduleRoot is the folder of the go.mod governing the current folder.
func moduleRoot() (string, error) {
	b, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(b))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a Go module")
	}
	return filepath.Dir(mod), nil
}

type source struct {
	path string
	sql  bool // an embedded .sql file; else a Go file
}

// sources are the Go files and embedded .sql files the programs compile,
// of the packages in the module root's tree.
func sources(root string) ([]source, error) {
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=Dir,ImportPath,GoFiles,EmbedFiles,Standard"}, programs...)...)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var files []source
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var p struct {
			Dir                 string
			Standard            bool
			GoFiles, EmbedFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		if p.Standard || !strings.HasPrefix(p.Dir, root+string(filepath.Separator)) {
			continue
		}
		for _, f := range p.GoFiles {
			files = append(files, source{path: filepath.Join(p.Dir, f)})
		}
		for _, f := range p.EmbedFiles {
			if strings.HasSuffix(f, ".sql") {
				files = append(files, source{path: filepath.Join(p.Dir, f), sql: true})
			}
		}
	}
	slices.SortFunc(files, func(a, b source) int { return strings.Compare(a.path, b.path) })
	return files, nil
}

// renameGo rewrites the SQL string literals of a Go file.
func renameGo(rel string, src []byte, log io.Writer) ([]byte, error) {
	fset := token.NewFileSet()
	file := fset.AddFile(rel, -1, len(src))
	var s scanner.Scanner
	var scanErr error
	s.Init(file, src, func(pos token.Position, msg string) { scanErr = fmt.Errorf("%s: %s", pos, msg) }, 0)
	var out bytes.Buffer
	last := 0
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.STRING {
			continue
		}
		value, err := strconv.Unquote(lit)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", fset.Position(pos), err)
		}
		if !hasOld(value) {
			continue
		}
		if !sqlKeyword.MatchString(value) {
			fmt.Fprintf(log, "left alone (not SQL): %s: %.80q\n", fset.Position(pos), value)
			continue
		}
		renamed := renameSQL(value)
		quoted := strconv.Quote(renamed)
		if lit[0] == '`' {
			quoted = "`" + renamed + "`"
		}
		off := file.Offset(pos)
		out.Write(src[last:off])
		out.WriteString(quoted)
		last = off + len(lit)
	}
	if scanErr != nil {
		return nil, scanErr
	}
	out.Write(src[last:])
	return out.Bytes(), nil
}

// renameSQL renames the identifiers of renames in SQL text, comments
// included, but not inside single-quoted strings; a single-quoted string
// that is an outbox status becomes this fixture's value (statuses).
func renameSQL(sql string) string {
	var b strings.Builder
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'':
			j := i + 1
			for j < len(sql) && (sql[j] != '\'' || strings.HasPrefix(sql[j:], "''")) {
				if sql[j] == '\'' {
					j++ // '' inside a string
				}
				j++
			}
			j = min(j+1, len(sql))
			if to, ok := statuses[strings.Trim(sql[i:j], "'")]; ok {
				b.WriteString("'" + to + "'")
			} else {
				b.WriteString(sql[i:j])
			}
			i = j
		case strings.HasPrefix(sql[i:], "--"):
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				j = len(sql) - i
			}
			b.WriteString(renameWords(sql[i : i+j])) // a comment: no strings in it
			i += j
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			j := i + 1
			for j < len(sql) && isIdentChar(sql[j]) {
				j++
			}
			b.WriteString(renameWord(sql[i:j], sql[j:]))
			i = j
		case '0' <= c && c <= '9' || c == '$':
			j := i + 1 // a number or $1: not an identifier
			for j < len(sql) && isIdentChar(sql[j]) {
				j++
			}
			b.WriteString(sql[i:j])
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func isIdentChar(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// renameWords renames every identifier of text.
func renameWords(text string) string {
	return identifierWord.ReplaceAllStringFunc(text, func(w string) string { return renameWord(w, "") })
}

// renameWord is the new name of the identifier w, followed by rest.
func renameWord(w, rest string) string {
	to, ok := renames[w]
	if !ok || w == "version" && strings.HasPrefix(strings.TrimLeft(rest, " \t\n"), "(") {
		return w // version(): PostgreSQL's function, not the column
	}
	return to
}

// hasOld reports whether text holds one of the old identifiers as a word.
func hasOld(text string) bool {
	for _, w := range identifierWord.FindAllString(text, -1) {
		if _, ok := renames[w]; ok {
			return true
		}
	}
	return false
}

// oldNames lists the old identifiers still in renamed text as whole words
// (quoted or not): in a .sql file anywhere, in a Go file in its SQL
// literals.
func oldNames(text string, sql bool, rel string) []string {
	texts := []string{text}
	if !sql {
		texts = nil
		var s scanner.Scanner
		src := []byte(text)
		s.Init(token.NewFileSet().AddFile(rel, -1, len(src)), src, nil, 0)
		for {
			_, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if v, err := strconv.Unquote(lit); tok == token.STRING && err == nil && sqlKeyword.MatchString(v) {
				texts = append(texts, v)
			}
		}
	}
	var left []string
	for _, t := range texts {
		for _, l := range identifierWord.FindAllStringIndex(t, -1) {
			w := t[l[0]:l[1]]
			if _, ok := renames[w]; ok && renameWord(w, t[l[1]:]) != w && !slices.Contains(left, w) {
				left = append(left, w)
			}
		}
	}
	return left
}
