package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/target"
)

// A team's afternoon, on the reference's programs: in an empty folder
// outside the repository, `faultline init`, then only the processes'
// commands edited (pointed at the reference's binaries), then
// check-target, list and a one-scenario gate, none given --target, all
// find ./faultline.yaml and hold. Starts PostgreSQL and RabbitMQ.
func TestInitThenCheckListGateFindTheFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and RabbitMQ; not in -short")
	}
	t.Setenv("FAULTLINE_TARGET", "")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	dir := t.TempDir()
	bin := filepath.Join(dir, "reference-bin")
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./system/cmd/...")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Chdir(dir)

	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"init"}, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "wrote faultline.yaml")

	// The only edit: each process's program, the reference's binary.
	data, err := os.ReadFile(targetFileName)
	require.NoError(t, err)
	edited := string(data)
	for _, prog := range []string{"order", "relay", "inventory"} {
		line := "      - ./bin/" + prog + "\n"
		require.Equal(t, 1, strings.Count(edited, line), "the template's command of %s", prog)
		edited = strings.Replace(edited, line, "      - "+filepath.Join(bin, prog)+"\n", 1)
	}
	require.NoError(t, os.WriteFile(targetFileName, []byte(edited), 0o644))
	name := target.Slug(filepath.Base(dir))

	stdout.Reset()
	stderr.Reset()
	code := run(context.Background(), []string{"check-target"}, &stdout, &stderr)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	assert.Contains(t, stdout.String(), filepath.Join(dir, targetFileName)+": target "+name+" checked: every part of the file holds")

	stdout.Reset()
	require.Equal(t, exitOK, run(context.Background(), []string{"list"}, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "target "+name+" ("+filepath.Join(dir, targetFileName)+")")

	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"gate", "--scenarios", "blackbox-consumer-acks-dropped", "--out", filepath.Join(dir, "report")}, &stdout, &stderr)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	assert.Contains(t, stderr.String(), "gate: targets ["+name+"]")
	assert.Contains(t, stdout.String(), "1/1 correct-pipeline runs passed")
	assert.FileExists(t, filepath.Join(dir, "report", "results.json"))
	assert.Empty(t, children(t), "the gate left processes behind")
}
