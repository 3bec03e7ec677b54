package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/result"
)

func TestSecs(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want string
	}{
		{0, "0.0s"},
		{49, "0.0s"},
		{950, "0.9s"},
		{8049, "8.0s"},
		{120000, "120.0s"},
	} {
		assert.Equal(t, tc.want, secs(tc.ms), "%d ms", tc.ms)
	}
}

func TestStartParts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts map[string]int64
		want  string
	}{
		{"none", nil, ""},
		{"local", map[string]int64{"infra": 6000, "postgres": 1400, "rabbitmq": 5900, "build": 2100, "toxiproxy": 120},
			"infra 6.0s (postgres 1.4s, rabbitmq 5.9s, side by side), build 2.1s alongside, toxiproxy 0.1s"},
		{"a provider that does not time its services", map[string]int64{"infra": 3000, "build": 500, "toxiproxy": 80},
			"infra 3.0s, build 0.5s alongside, toxiproxy 0.1s"},
		{"unknown parts last, by name", map[string]int64{"zeta": 1000, "infra": 2000, "alpha": 3000},
			"infra 2.0s, alpha 3.0s, zeta 1.0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, startParts(tc.parts))
		})
	}
}

func TestSlowestFirst(t *testing.T) {
	runs := []result.Scenario{
		{Name: "a", DurationMS: 8000, Verdict: result.Pass},
		{Name: "b", DurationMS: 3, Verdict: result.NotRun},
		{Name: "c", DurationMS: 16000, Verdict: result.Fail},
		{Name: "d", DurationMS: 8000, Verdict: result.Pass},
		{Name: "e", DurationMS: 9000, Verdict: result.Pass},
	}
	var names []string
	for _, r := range slowestFirst(runs) {
		names = append(names, r.Name)
	}
	assert.Equal(t, []string{"c", "e", "a", "d", "b"}, names, "slowest first, equals in order, not run last")
	assert.Equal(t, "a", runs[0].Name, "the input is left alone")
}

func TestPrintTiming(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	runs := []result.Scenario{
		{Name: "broker-nack", Variant: "correct", Seed: 7, Verdict: result.Pass, Started: t0, DurationMS: 8000, Phases: []result.Phase{
			{Name: "infra", Start: at(0), End: at(600)},
			{Name: "workload", Start: at(600), End: at(5600)},
			{Name: "faults", Start: at(5600), End: at(5600)},
			{Name: "converging", Start: at(5600), End: at(7700)},
			{Name: "checking", Start: at(7700), End: at(7800)},
		}},
		{Name: "relay-crash-after-claim", Variant: "no-lease", Seed: 7, Verdict: result.Fail, Started: t0, DurationMS: 14100},
		{Name: "broker-restart", Variant: "correct", Seed: 7, Verdict: result.NotRun, DurationMS: 2},
	}
	for _, tc := range []struct {
		name   string
		timing *result.Timing
		whole  string
		waits  []string
		want   []string
		absent []string
	}{
		{
			name:   "no timing prints nothing",
			timing: nil,
		},
		{
			name: "gate, goals met",
			timing: &result.Timing{InfraStartMS: 6000, StartPartsMS: map[string]int64{"infra": 6000}, RunsMS: 50000, ExclusiveMS: 20000,
				TotalMS: 57000, ScenarioMedianMS: 11050, ScenarioMaxMS: 14100, GoalTotalMS: 120000, GoalScenarioMedianMS: 12000},
			whole: "gate",
			waits: []string{"converging: quiet 1.5s"},
			want: []string{
				"time to a verdict:",
				"  infrastructure start-up     6.0s  infra 6.0s\n",
				"  runs                       50.0s  20.0s of it with one run alone",
				"  whole gate                 57.0s  goal ≤ 120.0s: met\n",
				"  median scenario            11.1s  goal ≤ 12.0s: met\n",
				"  slowest scenario           14.1s  relay-crash-after-claim [no-lease]\n",
				"runs, slowest first (seconds):\n  run                                          wall infra  load fault  conv check  down\n",
				"  relay-crash-after-claim [no-lease] seed 7    14.1     -     -     -     -     -     -\n",
				"  broker-nack [correct] seed 7                  8.0   0.6   5.0   0.0   2.1   0.1   0.2\n",
				"  broker-restart [correct] seed 7           not run\n",
				"where runs wait:\n  converging: quiet 1.5s\n",
			},
		},
		{
			name:   "run, median goal missed, no total goal",
			timing: &result.Timing{InfraStartMS: 7000, RunsMS: 30000, TotalMS: 38000, ScenarioMedianMS: 11050, ScenarioMaxMS: 14100, GoalScenarioMedianMS: 10000},
			whole:  "run",
			want: []string{
				"  whole run                  38.0s\n",
				"  median scenario            11.1s  goal ≤ 10.0s: MISSED\n",
				"  runs                       30.0s\n",
			},
			absent: []string{"where runs wait", "of it with one run alone"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printTiming(&b, tc.timing, runs, tc.whole, tc.waits)
			out := b.String()
			if tc.timing == nil {
				assert.Empty(t, out)
				return
			}
			for _, want := range tc.want {
				assert.Contains(t, out, want)
			}
			for _, no := range tc.absent {
				assert.NotContains(t, out, no)
			}
			lines := strings.Split(out, "\n")
			require.Greater(t, len(lines), 8)
			i := strings.Index(out, "relay-crash-after-claim [no-lease]\n")
			j := strings.Index(out, "broker-nack [correct] seed 7")
			assert.Less(t, i, j, "the slowest run comes first")
		})
	}
}

func TestWaits(t *testing.T) {
	for _, tc := range []struct {
		variants bool
		want     []string
		absent   []string
	}{
		{false, []string{"quiet for 1.5s", "lease 2s", "120 orders over 5s"}, []string{"variants:"}},
		{true, []string{"quiet for 1.5s", "variants: convergence ends once nothing changed for 10s"}, nil},
	} {
		all := strings.Join(waits(tc.variants, 2*time.Second), "\n")
		for _, w := range tc.want {
			assert.Contains(t, all, w)
		}
		for _, no := range tc.absent {
			assert.NotContains(t, all, no)
		}
	}
}

// The time to a verdict fits a 100-column terminal, however long the run
// names and the start-up's parts.
func TestPrintTimingFitsAHundredColumns(t *testing.T) {
	runs := []result.Scenario{
		{Name: "blackbox-consumer-db-cut-with-deliveries", Variant: "commit-error-ignored", Seed: 791624, Verdict: result.Fail, DurationMS: 20000},
		{Name: "relay-pause-past-lease", Variant: "correct", Seed: 791624, Verdict: result.Pass, DurationMS: 9000},
	}
	timing := &result.Timing{InfraStartMS: 7300, StartPartsMS: map[string]int64{"infra": 7300, "postgres": 1600, "rabbitmq": 7300, "build": 3200, "toxiproxy": 10},
		RunsMS: 118000, TotalMS: 126000, ScenarioMedianMS: 24000, ScenarioMaxMS: 20000, GoalTotalMS: 120000, GoalScenarioMedianMS: 10000}
	var b bytes.Buffer
	printTiming(&b, timing, runs, "gate", waits(true, 2*time.Second))
	for _, line := range strings.Split(b.String(), "\n") {
		assert.LessOrEqual(t, utf8.RuneCountInString(line), 100, "%q", line)
	}
	assert.Contains(t, b.String(), "blackbox-consumer-db-cut-with-deliveries [commit-error-ignored] seed 791624\n")
}
