package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// findTarget over folder layouts: $FAULTLINE_TARGET, then ./faultline.yaml,
// then the nearest one up to the repository's root, then the reference
// pipeline of faultline's own tree; else an error naming every place
// looked. Every layout sits in a repository (a .git at root), so the walk
// never leaves the test's folder.
func TestFindTarget(t *testing.T) {
	const faultlineGoMod = "module github.com/faultline-dev/faultline\n\ngo 1.24\n"
	for _, tc := range []struct {
		name  string
		files map[string]string // path under the test's folder → content ("" for a folder)
		cwd   string            // under the test's folder
		env   string
		want  string // relative to cwd
		// looked are the places the error names (relative to the test's
		// folder), when nothing is found.
		looked []string
	}{
		{name: "FAULTLINE_TARGET first", files: map[string]string{"repo/.git/": "", "repo/faultline.yaml": "x"}, cwd: "repo", env: "elsewhere.yaml", want: "elsewhere.yaml"},
		{name: "the current folder's", files: map[string]string{"repo/.git/": "", "repo/faultline.yaml": "x", "repo/svc/faultline.yaml": "x"}, cwd: "repo/svc", want: "faultline.yaml"},
		{name: "the nearest above", files: map[string]string{"repo/.git/": "", "repo/faultline.yaml": "x", "repo/svc/faultline.yaml": "x", "repo/svc/cmd/api/main.go": "x"}, cwd: "repo/svc/cmd/api", want: "../../faultline.yaml"},
		{name: "at the repository's root", files: map[string]string{"repo/.git/": "", "repo/faultline.yaml": "x", "repo/a/b/": ""}, cwd: "repo/a/b", want: "../../faultline.yaml"},
		{name: "a worktree's .git file is a root too", files: map[string]string{"faultline.yaml": "x", "repo/.git": "gitdir: /elsewhere", "repo/a/": ""}, cwd: "repo/a",
			looked: []string{"repo/a/faultline.yaml", "repo/faultline.yaml"}},
		{name: "not above the repository's root", files: map[string]string{"faultline.yaml": "x", "repo/.git/": "", "repo/a/": ""}, cwd: "repo/a",
			looked: []string{"repo/a/faultline.yaml", "repo/faultline.yaml"}},
		{name: "a folder named faultline.yaml is no file", files: map[string]string{"repo/.git/": "", "repo/faultline.yaml/": ""}, cwd: "repo",
			looked: []string{"repo/faultline.yaml"}},
		{name: "the reference in faultline's tree", files: map[string]string{"fl/.git/": "", "fl/go.mod": faultlineGoMod, "fl/system/faultline.yaml": "x", "fl/cmd/faultline/": ""}, cwd: "fl/cmd/faultline", want: "../../system/faultline.yaml"},
		{name: "an example's own file in faultline's tree", files: map[string]string{"fl/.git/": "", "fl/go.mod": faultlineGoMod, "fl/system/faultline.yaml": "x", "fl/examples/node/faultline.yaml": "x"}, cwd: "fl/examples/node", want: "faultline.yaml"},
		{name: "in faultline's system folder", files: map[string]string{"fl/.git/": "", "fl/go.mod": faultlineGoMod, "fl/system/faultline.yaml": "x"}, cwd: "fl/system", want: "faultline.yaml"},
		{name: "faultline's tree without git", files: map[string]string{".git/": "", "fl/go.mod": faultlineGoMod, "fl/system/faultline.yaml": "x", "fl/x/": ""}, cwd: "fl/x", want: "../system/faultline.yaml"},
		{name: "another module with a system/faultline.yaml", files: map[string]string{"repo/.git/": "", "repo/go.mod": "module example.com/faultline\n", "repo/system/faultline.yaml": "x"}, cwd: "repo",
			looked: []string{"repo/faultline.yaml"}},
		{name: "faultline's go.mod without the reference's file", files: map[string]string{"fl/.git/": "", "fl/go.mod": faultlineGoMod}, cwd: "fl",
			looked: []string{"fl/faultline.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, content := range tc.files {
				full := filepath.Join(root, filepath.FromSlash(p))
				if p[len(p)-1] == '/' {
					require.NoError(t, os.MkdirAll(full, 0o755))
					continue
				}
				require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
				require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
			}
			cwd := filepath.Join(root, filepath.FromSlash(tc.cwd))
			require.NoError(t, os.MkdirAll(cwd, 0o755))
			got, err := findTarget(cwd, tc.env)
			if tc.looked == nil {
				require.NoError(t, err)
				assert.Equal(t, filepath.FromSlash(tc.want), got)
				return
			}
			require.Error(t, err)
			var ue usageError
			require.ErrorAs(t, err, &ue)
			for _, p := range tc.looked {
				assert.Contains(t, err.Error(), filepath.Join(root, filepath.FromSlash(p)))
			}
			assert.NotContains(t, err.Error(), filepath.Join(root, targetFileName)+",", "looked above the repository's root")
		})
	}
}

// findReference (bench) takes only the reference of faultline's tree,
// never a team's file on the way up.
func TestFindReference(t *testing.T) {
	root := t.TempDir()
	for p, content := range map[string]string{"fl/.git/x": "", "fl/go.mod": "// faultline\nmodule \"github.com/faultline-dev/faultline\" // it\n", "fl/system/faultline.yaml": "x", "fl/examples/a/faultline.yaml": "x"} {
		full := filepath.Join(root, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	got, err := findReference(filepath.Join(root, "fl", "examples", "a"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join("..", "..", "system", "faultline.yaml"), got)

	_, err = findReference(filepath.Join(root, "fl", ".git"))
	require.NoError(t, err, "from inside .git, the tree's root is still above")

	team := filepath.Join(root, "team")
	require.NoError(t, os.MkdirAll(filepath.Join(team, ".git"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(team, targetFileName), []byte("x"), 0o644))
	_, err = findReference(team)
	require.Error(t, err)
	assert.Contains(t, err.Error(), team)
}

func TestModulePath(t *testing.T) {
	for gomod, want := range map[string]string{
		"module github.com/faultline-dev/faultline\n":                  "github.com/faultline-dev/faultline",
		"// c\nmodule   \"github.com/faultline-dev/faultline\" // x\n": "github.com/faultline-dev/faultline",
		"modulex github.com/faultline-dev/faultline\n":                 "",
		"go 1.24\n": "",
	} {
		assert.Equal(t, want, modulePath([]byte(gomod)), gomod)
	}
}
