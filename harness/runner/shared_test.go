package runner

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
)

// A target built as the shared one is runs its programs; one whose build
// differs is built into a folder of its own (here a build that fails, so
// the attempt shows).
func TestWithTargetBuildsOnlyAnotherBuild(t *testing.T) {
	build := &target.Command{Args: []target.Template{{Raw: "true"}}, Timeout: time.Minute}
	own := &target.Target{Name: "own", Dir: t.TempDir(), Build: build}
	sh := &Shared{Target: own, BuildDir: "/programs/of/own", StartedIn: time.Second, tracker: &tracker{}}
	cleanup := supervisor.NewCleanup()
	t.Cleanup(func() { _ = cleanup.Run(context.Background()) })

	read, err := sh.WithTarget(t.Context(), own.WithoutEventLogs(), cleanup)
	require.NoError(t, err)
	assert.Equal(t, "/programs/of/own", read.BuildDir, "the same build is not built again")
	assert.NotSame(t, sh.tracker, read.tracker, "its runs are tracked apart")

	other := *own
	other.Build = &target.Command{Args: []target.Template{{Raw: "false"}}, Timeout: time.Minute}
	_, err = sh.WithTarget(t.Context(), &other, cleanup)
	assert.ErrorContains(t, err, "build target own", "another build is built")
}
