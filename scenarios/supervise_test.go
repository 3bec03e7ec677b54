package scenarios

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// consumerLoss is how long the supervised fixture's consumer goes without
// its broker before it exits (its --exit-on-broker-loss), and outage how
// long the scenario keeps its broker link down: long enough for it to
// exit by itself, and to be restarted into the outage at least once.
const (
	consumerLoss = time.Second
	outage       = 4 * time.Second
)

// TestSupervisedRestart is issue 23's supervision end to end, on the
// reference's real programs: the supervised fixture's consumer gives up on
// a broker gone for a second and exits non-zero by itself, as consumers
// built on frameworks do; faultline, as its production supervisor, must
// restart it under restart: always, for as long as the run lasts.
//
//   - always: every exit by itself is followed by a restart (the first
//     exit inside the outage, a second after it began), each on the
//     consumer's lane of the timeline; the run converges and passes with
//     every committed event's effect exactly once;
//   - never: the consumer stays down after its exit, and the run is
//     indeterminate with its name, why it is down and its last output —
//     the events it never handled are no loss of the pipeline's.
func TestSupervisedRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real infrastructure; not in -short")
	}
	t.Parallel()
	fixture, err := target.Load(filepath.Join("testdata", "supervised", "faultline.yaml"))
	require.NoError(t, err)
	consumer := fixture.ByRole("consumer")
	require.Len(t, consumer, 1)
	name := consumer[0].Name
	require.Equal(t, target.Restart{Always: true, Backoff: 300 * time.Millisecond}, consumer[0].Restart, "the fixture supervises its consumer")

	cleanup := supervisor.NewCleanup()
	t.Cleanup(func() { _ = cleanup.Run(context.Background()) })
	sh, err := shared.WithTarget(context.Background(), fixture, cleanup)
	require.NoError(t, err)

	sc := runner.Scenario{
		Name: "consumer-exits-on-broker-loss", Window: "consumer exits by itself during a broker outage",
		Description: fmt.Sprintf("The consumer's broker link is down for %s; the consumer exits by itself after %s without it and is restarted by its policy.", outage, consumerLoss),
		Workload:    steady(),
		Faults: func(rng *rand.Rand) []fault.Fault {
			return []fault.Fault{fault.LinkDown{Link: "consumer.amqp", Trigger: fault.Trigger{AfterOrders: int64(between(rng, 15, 40))}, Duration: outage}}
		},
		Evidence: []check.Evidence{check.Custom("the consumer started again", func(o *history.Record) (bool, string) {
			n := 0
			for _, e := range o.Log {
				if e.Event == eventlog.Started && e.Process == name {
					n++
				}
			}
			return n >= 2, fmt.Sprintf("%s started %d times", name, n)
		}, history.SourceConsumerLog)},
	}

	t.Run("always: restarted, converges, exactly once", func(t *testing.T) {
		t.Parallel()
		res := runRetryingOn(t, sh, sc, runner.Options{Seed: seed})
		require.Equal(t, result.Pass, res.Verdict, res.Reason)
		c := res.Counts
		assert.Positive(t, c.Events)
		assert.Equal(t, c.Events, c.Reservations, "every committed event took effect exactly once")
		assert.Zero(t, c.Lost)
		assert.Zero(t, c.DuplicateEffects)

		require.NotNil(t, res.Timeline)
		i := slices.IndexFunc(res.Timeline.Faults, func(s result.Span) bool { return s.Kind == "link-down" })
		require.GreaterOrEqual(t, i, 0, "the outage is on the timeline")
		down := res.Timeline.Faults[i]
		l := slices.IndexFunc(res.Timeline.Lanes, func(l result.Lane) bool { return l.Process == name })
		require.GreaterOrEqual(t, l, 0, "%s has a lane", name)
		var exits, restarts []result.Mark
		for _, m := range res.Timeline.Lanes[l].Marks {
			t.Logf("  %s %6dms %s: %s", name, m.AtMS, m.Kind, m.Label)
			switch m.Kind {
			case supervisor.EventExited:
				exits = append(exits, m)
			case "restarted": // the restarted incarnation's started line
				restarts = append(restarts, m)
			case supervisor.EventGaveUp, supervisor.EventRestartFailed:
				assert.Fail(t, "the restart policy did not restart it", "%s: %s", m.Kind, m.Label)
			}
		}
		require.NotEmpty(t, exits, "no exit by itself on %s's lane", name)
		first := exits[0]
		assert.Contains(t, first.Label, "exit status 1", "it exited by itself, non-zero")
		assert.GreaterOrEqual(t, first.AtMS, down.StartMS+consumerLoss.Milliseconds()-50, "it exited before the broker was gone %s", consumerLoss)
		assert.LessOrEqual(t, first.AtMS, down.EndMS, "it exited during the outage")
		require.Len(t, restarts, len(exits), "every exit by itself was restarted")
		for k, e := range exits {
			assert.Greater(t, restarts[k].AtMS, e.AtMS, "restart %d follows exit %d", k+1, k+1)
		}
		t.Logf("outage %d..%dms: %d exits by itself, %d restarts", down.StartMS, down.EndMS, len(exits), len(restarts))
	})

	t.Run("never: down, indeterminate, never lost", func(t *testing.T) {
		t.Parallel()
		never := readAs(t, sh, withRestart(fixture, name, target.Restart{}))
		res := never.Run(context.Background(), sc, runner.Options{Seed: seed})
		report(t, res)
		if res.Dir != "" {
			// Kept as an indeterminate run's are: this one is built to be.
			t.Cleanup(func() {
				if !t.Failed() {
					_ = os.RemoveAll(res.Dir)
				}
			})
		}
		require.Equal(t, result.Indeterminate, res.Verdict, res.Reason)
		t.Logf("  reason: %s", res.Reason)
		for _, want := range []string{"process " + name + " is down", "exited by itself (exit status 1)", "restart policy is never", "--exit-on-broker-loss"} {
			assert.Contains(t, res.Reason, want)
		}
		assert.False(t, res.HasViolation("lost"), "a process kept down is never lost")
		for _, inv := range res.Invariants {
			assert.True(t, inv.OK || inv.Unconverged || inv.NotChecked, "invariant %s broken: %s", inv.Name, inv.Detail)
		}
	})
}

// withRestart is t with the restart policy of its process name replaced.
func withRestart(t *target.Target, name string, r target.Restart) *target.Target {
	c := *t
	c.Processes = slices.Clone(t.Processes)
	for i := range c.Processes {
		if c.Processes[i].Name == name {
			c.Processes[i].Restart = r
		}
	}
	return &c
}
