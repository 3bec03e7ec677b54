package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

const (
	mainModule     = "github.com/faultline-dev/faultline"
	protocolModule = mainModule + "/protocol"
	// installVersion is the version the test publishes this checkout as.
	installVersion = "v0.1.0"
)

// TestInstallByModulePath installs faultline as a team does, with
// `go install github.com/faultline-dev/faultline/cmd/faultline@VERSION`,
// outside any module and without go.work: from a file module proxy that
// serves this checkout as the main module at installVersion and protocol/
// at the version go.mod requires, in front of the usual proxies for every
// other dependency. It fails where go install would fail for a team: a
// replace directive in go.mod, a required protocol version that is not
// the one in protocol/, a package that does not build from the module zip.
//
// The proxy is the documented GOPROXY layout ($module/@v/list, .info,
// .mod, .zip), the zips made by golang.org/x/mod/zip from the files git
// would publish (tracked, or untracked and not ignored), so nested modules
// and ignored files are left out as a tag's zip leaves them out. The two
// faultline modules are in GONOSUMDB: the checksum database knows no
// unpublished version. go install with a version reads no go.sum, so the
// main module's go.sum plays no part here (docs/release.md).
func TestInstallByModulePath(t *testing.T) {
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to install faultline")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	protocolVersion := requiredVersion(t, filepath.Join(root, "go.mod"), protocolModule)

	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	publish(t, proxy, module.Version{Path: protocolModule, Version: protocolVersion}, filepath.Join(root, "protocol"))
	publish(t, proxy, module.Version{Path: mainModule, Version: installVersion}, root)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	userProxy := goEnv(ctx, t, goTool, "GOPROXY")
	userCache := goEnv(ctx, t, goTool, "GOMODCACHE")
	// Every other module comes from this machine's module cache when it is
	// there (a cache's download folder is a file proxy), else from the
	// proxies the user has.
	proxies := []string{fileURL(proxy), fileURL(filepath.Join(userCache, "cache", "download"))}
	if userProxy != "" && userProxy != "off" {
		proxies = append(proxies, userProxy)
	}
	bin := filepath.Join(tmp, "bin")
	env := append(os.Environ(),
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOPROXY="+strings.Join(proxies, ","),
		"GONOSUMDB="+mainModule,
		"GONOPROXY=",
		"GOPRIVATE=",
		// A module cache of its own, so that no installVersion stays in the
		// user's cache to be served stale on the next run; writable, so
		// that t.TempDir can remove it; -trimpath, so that the build cache
		// serves the dependencies again on the next run, whatever tmp is.
		"GOMODCACHE="+filepath.Join(tmp, "modcache"),
		"GOFLAGS=-modcacherw -trimpath",
		"GOBIN="+bin,
	)

	install := exec.CommandContext(ctx, goTool, "install", mainModule+"/cmd/faultline@"+installVersion)
	install.Dir = tmp // outside any module
	install.Env = env
	out, err := install.CombinedOutput()
	require.NoError(t, err, "go install by module path:\n%s", out)

	exe := filepath.Join(bin, "faultline")
	if runtime.GOOS == "windows" {
		exe += ".exe"
	}
	info := exec.CommandContext(ctx, goTool, "version", "-m", exe)
	info.Env = env
	out, err = info.CombinedOutput()
	require.NoError(t, err, "go version -m:\n%s", out)
	assert.Contains(t, string(out), "\tmod\t"+mainModule+"\t"+installVersion+"\t", "the main module's version in the build info")
	assert.Contains(t, string(out), "\tdep\t"+protocolModule+"\t"+protocolVersion+"\t", "the protocol module at the version go.mod requires")
	assert.NotContains(t, string(out), "=>", "no dependency is replaced")

	help := exec.CommandContext(ctx, exe, "help")
	help.Dir = tmp
	out, err = help.CombinedOutput()
	require.NoError(t, err, "the installed faultline runs:\n%s", out)
	assert.Contains(t, string(out), "usage:")

	version := exec.CommandContext(ctx, exe, "version")
	version.Dir = tmp
	out, err = version.CombinedOutput()
	require.NoError(t, err, "faultline version:\n%s", out)
	assert.Equal(t, "faultline "+installVersion+"\n", string(out), "the version it was installed at")
}

// requiredVersion is the version of mod that the go.mod at path requires,
// and the go.mod must replace nothing (go install refuses it).
func requiredVersion(t *testing.T, path, mod string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := modfile.Parse(path, data, nil)
	require.NoError(t, err)
	for _, r := range f.Replace {
		assert.Failf(t, "replace directive", "%s replaces %s: go install by module path refuses a module with replace directives", path, r.Old.Path)
	}
	for _, r := range f.Require {
		if r.Mod.Path == mod {
			return r.Mod.Version
		}
	}
	require.Failf(t, "no requirement", "%s does not require %s", path, mod)
	return ""
}

// publish writes module m, made of the files under dir, into the file
// module proxy at proxy.
func publish(t *testing.T, proxy string, m module.Version, dir string) {
	t.Helper()
	esc, err := module.EscapePath(m.Path)
	require.NoError(t, err)
	at := filepath.Join(proxy, filepath.FromSlash(esc), "@v")
	require.NoError(t, os.MkdirAll(at, 0o755))

	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(at, m.Version+".mod"), gomod, 0o644))
	meta, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, time.Now().UTC().Truncate(time.Second)})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(at, m.Version+".info"), meta, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(at, "list"), []byte(m.Version+"\n"), 0o644))

	z, err := os.Create(filepath.Join(at, m.Version+".zip"))
	require.NoError(t, err)
	files, err := publishedFiles(dir)
	switch {
	case errors.Is(err, errNoGit):
		err = modzip.CreateFromDir(z, m, dir) // every file but nested modules and VCS folders
	case err == nil:
		err = modzip.Create(z, m, files)
	}
	require.NoError(t, errors.Join(err, z.Close()), "zip %s from %s", m, dir)
}

var errNoGit = errors.New("not a git checkout")

// publishedFiles are the files under dir that a tag would publish: those
// git tracks, and those it would track (untracked, not ignored), as they
// are in the work tree. x/mod/zip leaves out the nested modules' files.
func publishedFiles(dir string) ([]modzip.File, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, errNoGit
	}
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = dir
	out, err := ls.Output()
	if err != nil {
		return nil, errNoGit
	}
	var files []modzip.File
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if rel == "" {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(rel))
		st, err := os.Lstat(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // tracked, deleted in the work tree
		}
		if err != nil {
			return nil, err
		}
		files = append(files, workFile{rel: rel, path: path, info: st})
	}
	return files, nil
}

// workFile is a file of the work tree as x/mod/zip reads it.
type workFile struct {
	rel, path string
	info      os.FileInfo
}

func (f workFile) Path() string                 { return f.rel }
func (f workFile) Lstat() (os.FileInfo, error)  { return f.info, nil }
func (f workFile) Open() (io.ReadCloser, error) { return os.Open(f.path) }

// goEnv is one variable as the go command sees it.
func goEnv(ctx context.Context, t *testing.T, goTool, name string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, goTool, "env", name).Output()
	require.NoError(t, err, "go env %s", name)
	return strings.TrimSpace(string(out))
}

// fileURL is a file:// URL of a local folder, as GOPROXY takes it.
func fileURL(dir string) string {
	p := filepath.ToSlash(dir)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}
