package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"faultline/harness/runner"
	"faultline/harness/workload"
)

func TestSchedule(t *testing.T) {
	sc := func(name string, pace time.Duration, exclusive bool) runner.Scenario {
		return runner.Scenario{Name: name, Workload: workload.Spec{Pace: pace}, Exclusive: exclusive}
	}
	steady := sc("steady", 5*time.Second, false)
	slow := sc("slow", 8*time.Second, false)
	restart := sc("restart", 5*time.Second, true)
	chaos := sc("chaos", 10*time.Second, true)
	name := func(j job) string {
		v := j.variant
		if v == "" {
			v = "correct"
		}
		return j.sc.Name + "/" + v
	}
	for _, tc := range []struct {
		name            string
		jobs            []job
		exclusive, rest []string
	}{
		{"nothing", nil, nil, nil},
		{"exclusive runs in plan order, alone", []job{{sc: steady}, {sc: chaos}, {sc: restart}},
			[]string{"chaos/correct", "restart/correct"}, []string{"steady/correct"}},
		{"the others longest first, plan order among equals", []job{
			{sc: steady}, {sc: slow}, {sc: steady, variant: "no-inbox"}, {sc: slow, variant: "no-fencing"},
		}, nil, []string{"slow/correct", "slow/no-fencing", "steady/correct", "steady/no-inbox"}},
		{"a variant that never settles waits its whole bound: it starts first", []job{
			{sc: slow}, {sc: steady, variant: "no-inbox"}, {sc: steady, variant: "no-lease", stuck: true}, {sc: restart},
		}, []string{"restart/correct"}, []string{"steady/no-lease", "slow/correct", "steady/no-inbox"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exclusive, rest := schedule(tc.jobs)
			var gotEx, gotRest []string
			for _, i := range exclusive {
				gotEx = append(gotEx, name(tc.jobs[i]))
			}
			for _, i := range rest {
				gotRest = append(gotRest, name(tc.jobs[i]))
			}
			assert.Equal(t, tc.exclusive, gotEx)
			assert.Equal(t, tc.rest, gotRest)
		})
	}
}

func TestExpected(t *testing.T) {
	steady := runner.Scenario{Workload: workload.Spec{Pace: 5 * time.Second}}
	for _, tc := range []struct {
		name string
		job  job
		want time.Duration
	}{
		{"paced workload", job{sc: steady}, 5 * time.Second},
		{"unpaced workload", job{sc: runner.Scenario{}}, 0},
		{"a variant that settles", job{sc: steady, variant: "no-inbox"}, 5 * time.Second},
		{"a variant that never settles", job{sc: steady, variant: "no-lease", stuck: true}, 5*time.Second + VariantConverge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.job.expected())
		})
	}
}
