package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Target discovery: where a command finds its target file when --target
// is not given (docs/cli.md, "Target discovery").
const (
	// targetFileName is the name a team's target file goes by.
	targetFileName = "faultline.yaml"
	// faultlineModule is the module of faultline's own source tree: a
	// folder whose go.mod declares it is that tree's root, and holds the
	// reference pipeline at referenceTarget.
	faultlineModule = "github.com/faultline-dev/faultline"
)

// findTarget is the target file to use without --target, from the folder
// cwd (absolute) and $FAULTLINE_TARGET (env): env when set; else
// faultline.yaml in cwd; else the nearest faultline.yaml in a folder above,
// up to the repository's root (the first folder holding .git) or the
// filesystem's; else, inside faultline's own source tree, its reference
// pipeline. A path found is relative to cwd when it can be. Where there is
// none, the usage error names every place looked.
func findTarget(cwd, env string) (string, error) {
	if env != "" {
		return env, nil
	}
	var looked []string
	found := walkUp(cwd, func(dir string) string {
		p := filepath.Join(dir, targetFileName)
		if isFile(p) {
			return p
		}
		looked = append(looked, p)
		return referenceIn(dir)
	})
	if found != "" {
		return relTo(cwd, found), nil
	}
	return "", targetErrorf("no target file: --target not given, FAULTLINE_TARGET not set, no %s (looked in %s), and not inside faultline's source tree (whose reference pipeline is %s): run 'faultline init' to write one, or pass --target PATH",
		targetFileName, strings.Join(looked, ", "), referenceTarget)
}

// findReference is the reference pipeline's target file for bench, which
// runs only the reference's programs: referenceTarget at the root of
// faultline's source tree, looked for from cwd up to the repository's root.
func findReference(cwd string) (string, error) {
	var looked []string
	found := walkUp(cwd, func(dir string) string {
		looked = append(looked, dir)
		return referenceIn(dir)
	})
	if found != "" {
		return relTo(cwd, found), nil
	}
	return "", targetErrorf("no --target given, and not inside faultline's source tree (no go.mod of module %s with %s in %s): pass --target PATH to the reference pipeline's target file",
		faultlineModule, referenceTarget, strings.Join(looked, ", "))
}

// walkUp calls visit on dir, then on each folder above it, and returns the
// first path visit finds. It stops after the repository's root (a folder
// holding .git, a folder or a worktree's file) or the filesystem's.
func walkUp(dir string, visit func(dir string) string) string {
	for {
		if found := visit(dir); found != "" {
			return found
		}
		if exists(filepath.Join(dir, ".git")) {
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// referenceIn is the reference pipeline's target file if dir is the root
// of faultline's source tree (its go.mod declares faultlineModule and the
// file is there), else "".
func referenceIn(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || modulePath(data) != faultlineModule {
		return ""
	}
	p := filepath.Join(dir, filepath.FromSlash(referenceTarget))
	if !isFile(p) {
		return ""
	}
	return p
}

// modulePath is the module path a go.mod declares, "" if none.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		rest, ok := strings.CutPrefix(line, "module")
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t' && rest[0] != '"') {
			continue
		}
		return strings.Trim(strings.TrimSpace(rest), `"`+"`")
	}
	return ""
}

// relTo is path relative to dir where it can be, else path.
func relTo(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil {
		return rel
	}
	return path
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}

// cwd is the current folder, for discovery.
func cwd() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("current folder: %w", err)
	}
	return dir, nil
}
