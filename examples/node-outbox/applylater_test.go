// Package nodeoutbox_test runs the Node.js example's consumer that stores
// first and applies later (faultline.apply-later.yaml) through one scenario
// of the catalogue, on real infrastructure.
package nodeoutbox_test

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/scenarios"
)

// retries is how many times an indeterminate run is run again with the
// next seed, as the gate does: an indeterminate run is never a pass.
const retries = 2

// TestApplyLaterPasses: the consumer acks once it has stored an event and
// applies it later, every 3 s, so the queue drains and the effects stand
// still while its inbox holds events not applied yet. The target file
// names them (contract.inbox_pending): the run waits for them and passes,
// every committed event taking effect once. Without the query the same
// scenario was judged "consumed-without-effect" in most runs.
func TestApplyLaterPasses(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real infrastructure; not in -short")
	}
	ctx := context.Background()
	tg, err := target.Load("faultline.apply-later.yaml")
	require.NoError(t, err)
	require.NotNil(t, tg.Contract.InboxPending, "the file names what the consumer still has to apply")
	sc, err := scenarios.Lookup("consumer-crash-after-commit")
	require.NoError(t, err)

	cleanup := supervisor.NewCleanup()
	t.Cleanup(func() { _ = cleanup.Run(context.Background()) })
	sh, err := runner.StartShared(ctx, runner.SharedOptions{Log: io.Discard, Target: tg, MaxRuns: 1}, cleanup)
	require.NoError(t, err)

	res := sh.Run(ctx, sc, runner.Options{Seed: 1})
	for n := 1; res.Verdict == result.Indeterminate && n <= retries; n++ {
		t.Logf("seed %d indeterminate (%s): running it again with seed %d", res.Seed, res.Reason, n+1)
		res = sh.Run(ctx, sc, runner.Options{Seed: int64(n + 1)})
	}
	require.Equal(t, result.Pass, res.Verdict, "%s (logs: %s)", res.Reason, res.Dir)
	assert.Zero(t, res.Counts.Lost)
	assert.Equal(t, res.Counts.Events, res.Counts.Reservations, "every committed event applied once")
}
