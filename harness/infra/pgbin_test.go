package infra

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakePG writes a bin folder whose postgres answers --version with
// version ("" for no postgres), and an initdb unless noInitdb.
func fakePG(t *testing.T, bin, version string, noInitdb bool) {
	t.Helper()
	require.NoError(t, os.MkdirAll(bin, 0o755))
	if version != "" {
		script := "#!/bin/sh\necho 'postgres (PostgreSQL) " + version + "'\n"
		require.NoError(t, os.WriteFile(filepath.Join(bin, "postgres"), []byte(script), 0o755))
	}
	if !noInitdb {
		require.NoError(t, os.WriteFile(filepath.Join(bin, "initdb"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	}
}

// fakePGConfig writes a pg_config into dir that answers --bindir with bin.
func fakePGConfig(t *testing.T, dir, bin string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	script := "#!/bin/sh\n[ \"$1\" = --bindir ] && echo '" + bin + "'\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pg_config"), []byte(script), 0o755))
}

func TestFindPostgres(t *testing.T) {
	type layout func(t *testing.T, root string) // root: the test's folder
	debian := func(versions ...string) layout { // root/debian/N/bin with postgres N.1
		return func(t *testing.T, root string) {
			for _, v := range versions {
				fakePG(t, filepath.Join(root, "debian", v, "bin"), v+".1", false)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		layout  layout
		env     map[string]string // values may use ROOT for the test's folder
		wantBin string            // relative to root
		wantVer string
		wantErr []string
		from    string
	}{
		{
			name:    "Debian: the highest major, numerically",
			layout:  debian("9.6", "13", "15", "16"),
			wantBin: "debian/16/bin", wantVer: "16.1", from: "the highest under ROOT/debian",
		},
		{
			name: "Debian: a folder without initdb does not count",
			layout: func(t *testing.T, root string) {
				debian("15")(t, root)
				fakePG(t, filepath.Join(root, "debian", "17", "bin"), "17.0", true)
			},
			wantBin: "debian/15/bin", wantVer: "15.1",
		},
		{
			name:    "Debian: only a version below 13",
			layout:  debian("12"),
			wantErr: []string{"PostgreSQL 12.1 in ROOT/debian/12/bin", "is too old", "13 or later", EnvPGBin},
		},
		{
			name: "FAULTLINE_PG_BIN wins over everything",
			layout: func(t *testing.T, root string) {
				debian("16")(t, root)
				fakePG(t, filepath.Join(root, "custom"), "14.9", false)
				fakePG(t, filepath.Join(root, "path"), "17.2", false)
			},
			env:     map[string]string{EnvPGBin: "ROOT/custom", "PATH": "ROOT/path"},
			wantBin: "custom", wantVer: "14.9", from: EnvPGBin,
		},
		{
			name:    "FAULTLINE_PG_BIN without initdb",
			layout:  func(t *testing.T, root string) { fakePG(t, filepath.Join(root, "custom"), "16.0", true) },
			env:     map[string]string{EnvPGBin: "ROOT/custom"},
			wantErr: []string{EnvPGBin + "=ROOT/custom: no initdb in ROOT/custom"},
		},
		{
			name: "FAULTLINE_PG_BIN too old, though Debian has a newer one",
			layout: func(t *testing.T, root string) {
				debian("16")(t, root)
				fakePG(t, filepath.Join(root, "old"), "12.3", false)
			},
			env:     map[string]string{EnvPGBin: "ROOT/old"},
			wantErr: []string{"PostgreSQL 12.3 in ROOT/old (" + EnvPGBin + ") is too old"},
		},
		{
			name: "pg_config --bindir before PATH and Debian",
			layout: func(t *testing.T, root string) {
				debian("17")(t, root)
				fakePG(t, filepath.Join(root, "pg", "bin"), "15.8", false)
				fakePGConfig(t, filepath.Join(root, "tools"), filepath.Join(root, "pg", "bin"))
				fakePG(t, filepath.Join(root, "path"), "16.3", false)
			},
			env:     map[string]string{"PATH": "ROOT/tools:ROOT/path"},
			wantBin: "pg/bin", wantVer: "15.8", from: "ROOT/tools/pg_config --bindir",
		},
		{
			name: "pg_config naming a folder without a server: PATH next",
			layout: func(t *testing.T, root string) {
				fakePGConfig(t, filepath.Join(root, "tools"), filepath.Join(root, "client-only"))
				fakePG(t, filepath.Join(root, "path"), "16.3", false)
			},
			env:     map[string]string{"PATH": "ROOT/tools:ROOT/path"},
			wantBin: "path", wantVer: "16.3", from: "postgres on PATH",
		},
		{
			name: "postgres on PATH without initdb beside it: Debian next",
			layout: func(t *testing.T, root string) {
				debian("14")(t, root)
				fakePG(t, filepath.Join(root, "path"), "16.3", true)
			},
			env:     map[string]string{"PATH": "ROOT/path"},
			wantBin: "debian/14/bin", wantVer: "14.1",
		},
		{
			name: "postgres on PATH as a link: the folder it points into",
			layout: func(t *testing.T, root string) {
				fakePG(t, filepath.Join(root, "cellar", "16", "bin"), "16.2", false)
				require.NoError(t, os.MkdirAll(filepath.Join(root, "links"), 0o755))
				require.NoError(t, os.Symlink(filepath.Join(root, "cellar", "16", "bin", "postgres"), filepath.Join(root, "links", "postgres")))
			},
			env:     map[string]string{"PATH": "ROOT/links"},
			wantBin: "cellar/16/bin", wantVer: "16.2", from: "postgres on PATH",
		},
		{
			name:    "a development version",
			layout:  func(t *testing.T, root string) { fakePG(t, filepath.Join(root, "path"), "18beta2", false) },
			env:     map[string]string{"PATH": "ROOT/path"},
			wantBin: "path", wantVer: "18beta2",
		},
		{
			name: "a postgres that says no version",
			layout: func(t *testing.T, root string) {
				fakePG(t, filepath.Join(root, "path"), "", false)
				writeScript(t, filepath.Join(root, "path", "postgres"), "echo hello")
			},
			env:     map[string]string{"PATH": "ROOT/path"},
			wantErr: []string{"no PostgreSQL version in \"hello\""},
		},
		{
			name:    "nothing anywhere",
			layout:  func(t *testing.T, root string) {},
			env:     map[string]string{"PATH": "ROOT/empty"},
			wantErr: []string{"no PostgreSQL server binaries", EnvPGBin, "13 or later"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.layout(t, root)
			expand := func(s string) string { return strings.ReplaceAll(s, "ROOT", root) }
			s := pgSearch{
				Getenv:     func(k string) string { return expand(tc.env[k]) },
				DebianRoot: filepath.Join(root, "debian"),
			}
			got, err := findPostgres(t.Context(), s)
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, want := range tc.wantErr {
					assert.Contains(t, err.Error(), expand(want))
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(root, tc.wantBin), got.Bin)
			assert.Equal(t, tc.wantVer, got.Version)
			if tc.from != "" {
				assert.Equal(t, expand(tc.from), got.From)
			}
			assert.GreaterOrEqual(t, got.Major, minPGMajor)
			assert.Contains(t, got.String(), "PostgreSQL "+tc.wantVer+" in "+got.Bin)
		})
	}
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
}
