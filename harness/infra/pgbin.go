package infra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// EnvPGBin is the folder of the PostgreSQL server binaries (postgres,
// initdb, pg_basebackup) the local provider runs; without it the provider
// looks for them (findPostgres).
const EnvPGBin = "FAULTLINE_PG_BIN"

// minPGMajor is the oldest PostgreSQL the local provider runs: DROP
// DATABASE … WITH (FORCE), which every run's clean-up uses, came in 13.
const minPGMajor = 13

// debianPGRoot holds Debian's and Ubuntu's PostgreSQL installations, one
// folder per major version, each with its bin/.
const debianPGRoot = "/usr/lib/postgresql"

// pgInstall is the PostgreSQL installation the local provider runs.
type pgInstall struct {
	Bin     string // folder of postgres, initdb and pg_basebackup
	Version string // as postgres --version says it, e.g. "16.4"
	Major   int
	From    string // how it was found, for messages
}

// String says which PostgreSQL this is, where, and how it was found.
func (p pgInstall) String() string {
	return fmt.Sprintf("PostgreSQL %s in %s (%s)", p.Version, p.Bin, p.From)
}

// pgSearch is where findPostgres looks: the environment (EnvPGBin and
// PATH) and the folder of Debian's installations. Tests point it at fake
// folders.
type pgSearch struct {
	Getenv     func(string) string
	DebianRoot string
}

// hostPGSearch looks on this host.
func hostPGSearch() pgSearch {
	return pgSearch{Getenv: os.Getenv, DebianRoot: debianPGRoot}
}

// findPostgres finds PostgreSQL's server binaries: the folder EnvPGBin
// names, else `pg_config --bindir`, else the folder of postgres on PATH
// (links followed) when initdb is beside it, else
// the highest version under /usr/lib/postgresql/*/bin. The first place
// that has postgres and initdb decides; a version older than 13 is an
// error that says how to name another (EnvPGBin).
func findPostgres(ctx context.Context, s pgSearch) (pgInstall, error) {
	if dir := s.Getenv(EnvPGBin); dir != "" {
		if err := pgServerBinaries(dir); err != nil {
			return pgInstall{}, fmt.Errorf("%s=%s: %w", EnvPGBin, dir, err)
		}
		return pgCheckVersion(ctx, dir, EnvPGBin)
	}
	path := s.Getenv("PATH")
	if pgConfig, err := lookPathIn("pg_config", path); err == nil {
		if dir, err := pgConfigBindir(ctx, pgConfig); err == nil && pgServerBinaries(dir) == nil {
			return pgCheckVersion(ctx, dir, pgConfig+" --bindir")
		}
	}
	if pg, err := lookPathIn("postgres", path); err == nil {
		// A link on PATH (/usr/local/bin, Homebrew's bin) points into the
		// installation's own bin, which has pg_basebackup too.
		if real, err := filepath.EvalSymlinks(pg); err == nil {
			pg = real
		}
		if dir := filepath.Dir(pg); pgServerBinaries(dir) == nil {
			return pgCheckVersion(ctx, dir, "postgres on PATH")
		}
	}
	if dir, ok := highestDebianPG(s.DebianRoot); ok {
		return pgCheckVersion(ctx, dir, "the highest under "+s.DebianRoot)
	}
	return pgInstall{}, fmt.Errorf("no PostgreSQL server binaries (postgres and initdb): not in %s, pg_config --bindir, PATH, or %s/*/bin; install PostgreSQL %d or later, or set %s to its bin folder",
		EnvPGBin, s.DebianRoot, minPGMajor, EnvPGBin)
}

// pgServerBinaries checks that dir holds the executables the provider
// runs first: postgres and initdb.
func pgServerBinaries(dir string) error {
	var missing []string
	for _, name := range []string{"postgres", "initdb"} {
		if !isExecutable(filepath.Join(dir, name)) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no %s in %s", strings.Join(missing, " or "), dir)
	}
	return nil
}

// pgCheckVersion asks dir's postgres for its version and refuses one
// older than minPGMajor.
func pgCheckVersion(ctx context.Context, dir, from string) (pgInstall, error) {
	version, major, err := pgVersion(ctx, filepath.Join(dir, "postgres"))
	if err != nil {
		return pgInstall{}, fmt.Errorf("PostgreSQL in %s (%s): %w", dir, from, err)
	}
	in := pgInstall{Bin: dir, Version: version, Major: major, From: from}
	if major < minPGMajor {
		return pgInstall{}, fmt.Errorf("%s is too old: the local provider needs PostgreSQL %d or later; install one, or set %s to its bin folder",
			in, minPGMajor, EnvPGBin)
	}
	return in, nil
}

// pgVersionLine reads `postgres --version`: "postgres (PostgreSQL) 16.4
// (Debian 16.4-1)", "postgres (PostgreSQL) 9.6.24", "… 17beta1".
var pgVersionLine = regexp.MustCompile(`\(PostgreSQL\) ((\d+)[0-9A-Za-z.]*)`)

// pgVersion runs postgres --version.
func pgVersion(ctx context.Context, postgres string) (version string, major int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, postgres, "--version").Output()
	if err != nil {
		return "", 0, fmt.Errorf("%s --version: %w", postgres, err)
	}
	m := pgVersionLine.FindStringSubmatch(string(out))
	if m == nil {
		return "", 0, fmt.Errorf("%s --version: no PostgreSQL version in %q", postgres, strings.TrimSpace(string(out)))
	}
	major, err = strconv.Atoi(m[2])
	if err != nil {
		return "", 0, fmt.Errorf("%s --version: %q: %w", postgres, m[1], err)
	}
	return m[1], major, nil
}

// pgConfigBindir runs pg_config --bindir.
func pgConfigBindir(ctx context.Context, pgConfig string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, pgConfig, "--bindir").Output()
	if err != nil {
		return "", fmt.Errorf("%s --bindir: %w", pgConfig, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New(pgConfig + " --bindir: empty")
	}
	return dir, nil
}

// highestDebianPG is root/N/bin of the highest major version N that holds
// postgres and initdb ("9.6" counts as 9).
func highestDebianPG(root string) (string, bool) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return "", false
	}
	type found struct {
		major, minor int
		bin          string
	}
	var all []found
	for _, e := range entries {
		majorS, minorS, _ := strings.Cut(e.Name(), ".")
		major, err := strconv.Atoi(majorS)
		if err != nil {
			continue
		}
		minor, _ := strconv.Atoi(minorS)
		bin := filepath.Join(root, e.Name(), "bin")
		if pgServerBinaries(bin) == nil {
			all = append(all, found{major, minor, bin})
		}
	}
	if len(all) == 0 {
		return "", false
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].major != all[j].major {
			return all[i].major > all[j].major
		}
		return all[i].minor > all[j].minor
	})
	return all[0].bin, true
}

// lookPathIn is exec.LookPath over the folders of path (a PATH value).
func lookPathIn(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

// isExecutable: p is a file (or a link to one) someone may execute.
func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
