package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/harness/testctx"
)

// referenceTarget is TargetFile from this package's folder.
const referenceTarget = "../faultline.yaml"

// buildPrograms builds the reference pipeline with its target file's
// build step, as faultline bench does, into a folder of the test.
func buildPrograms(ctx context.Context, t *testing.T) Programs {
	t.Helper()
	tg, err := target.Load(referenceTarget)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, runner.Build(ctx, tg, dir))
	return ProgramsOf(tg, dir)
}

// A small run of every figure, on the real pipeline: each is measured from
// the processes' own logs, the ratios come out of the same run, and nothing
// of the run (databases, vhosts, folders) is left.
func TestRunMeasuresEveryFigure(t *testing.T) {
	ctx := testctx.BeforeDeadline(t) // each figure's run bounds its own waits
	prog := buildPrograms(ctx, t)
	dir := filepath.Join(t.TempDir(), "runs")
	opts := Options{Events: 400, NaiveEvents: 60, Reps: 1, Relays: []int{1, 2}, Clients: 8, Dir: dir}
	rep, err := Run(ctx, testInfra, prog, opts)
	require.NoError(t, err)

	require.Len(t, rep.Figures, 6, "raw, naive, relay×1, relay×2, consumer, end to end")
	for _, f := range rep.Figures {
		require.Len(t, f.Samples, 1, Label(f))
		assert.Positive(t, f.Median, Label(f))
		assert.Equal(t, f.Samples[0].Events, f.Events, Label(f))
	}
	assert.Equal(t, 60, rep.Figures[1].Events, "the naive relay moves its own, smaller count")
	assert.Contains(t, []int{1, 2}, rep.Ratios.BestRelayInstances)
	assert.Positive(t, rep.Ratios.RelayVsRaw)
	assert.Positive(t, rep.Ratios.RelayVsNaive)
	assert.Positive(t, rep.Ratios.ConsumerVsRelay)
	assert.Len(t, rep.Targets, 3)
	assert.Equal(t, Schema, rep.Schema)

	data, err := json.Marshal(rep)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(data, &back))
	for _, key := range []string{"relay_vs_raw", "relay_vs_naive", "consumer_vs_relay"} {
		assert.Contains(t, back["ratios"], key)
	}

	entries, err := os.ReadDir(dir)
	if err == nil {
		assert.Empty(t, entries, "process folders are removed after each repetition")
	}
	admin, err := pgxpool.New(ctx, testInfra.PostgresURL("postgres"))
	require.NoError(t, err)
	defer admin.Close()
	var left int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname LIKE 'fl_bench_%'`).Scan(&left))
	assert.Zero(t, left, "every repetition's databases are dropped")
}

// A cancelled run stops its processes and removes its databases.
func TestRunCancelledLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	prog := buildPrograms(ctx, t)
	time.AfterFunc(2*time.Second, cancel)
	_, err := Run(ctx, testInfra, prog, Options{Events: 200000, NaiveEvents: 200000, Reps: 1, Relays: []int{1}, Clients: 1, Only: []string{FigureNaive}})
	require.Error(t, err)

	admin, err := pgxpool.New(context.Background(), testInfra.PostgresURL("postgres"))
	require.NoError(t, err)
	defer admin.Close()
	var left int
	require.NoError(t, admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_database WHERE datname LIKE 'fl_bench_%'`).Scan(&left))
	assert.Zero(t, left)
}

// Programs that were not built are refused before anything starts.
func TestRunRefusesMissingPrograms(t *testing.T) {
	tg, err := target.Load(referenceTarget)
	require.NoError(t, err)
	opts := Options{Events: 10, NaiveEvents: 10, Reps: 1, Relays: []int{1}, Clients: 1}
	_, err = Run(t.Context(), testInfra, Programs{Workload: tg.Workload}, opts)
	assert.ErrorContains(t, err, "no build folder")
	_, err = Run(t.Context(), testInfra, ProgramsOf(tg, t.TempDir()), opts)
	assert.ErrorContains(t, err, "does the target's build step build order?")
}
