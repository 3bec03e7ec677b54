package reports

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/result"
)

func TestTimingRows(t *testing.T) {
	runs := []result.Scenario{
		{Name: "relay-pause-past-lease", Variant: "correct", Verdict: result.Fail, DurationMS: 22_000},
		{Name: "broker-restart", Variant: "correct", Verdict: result.NotRun, DurationMS: 22_000},
	}
	for _, tc := range []struct {
		name string
		run  result.Run
		want []timingRow
	}{
		{"no timing recorded", result.Run{Scenarios: runs}, nil},
		{"goals met and missed", result.Run{Scenarios: runs, Timing: &result.Timing{
			InfraStartMS: 6100, StartPartsMS: map[string]int64{"toxiproxy": 90, "zz": 5, "infra": 6000, "rabbitmq": 5900},
			RunsMS: 95_000, ExclusiveMS: 22_000, TotalMS: 101_500, ScenarioMedianMS: 14_200, ScenarioMaxMS: 22_000,
			GoalTotalMS: 120_000, GoalScenarioMedianMS: 10_000,
		}}, []timingRow{
			{Label: "infrastructure start-up", Value: "6.10 s", Note: "infra 6.00 s, rabbitmq 5.90 s, toxiproxy 90 ms, zz 5 ms"},
			{Label: "all runs", Value: "1m35s", Note: "22.00 s of it with one run alone (it restarts the shared broker)"},
			{Label: "whole run, to the verdict", Value: "1m41s", Note: "goal ≤ 2m00s: met", Class: clsGood},
			{Label: "median scenario", Value: "14.20 s", Note: "goal ≤ 10.00 s: missed", Class: clsBad},
			{Label: "slowest scenario", Value: "22.00 s", Note: "relay-pause-past-lease [correct]"},
		}},
		{"no goals, no exclusive runs", result.Run{Scenarios: runs, Timing: &result.Timing{InfraStartMS: 500, RunsMS: 800, TotalMS: 1400, ScenarioMedianMS: 800, ScenarioMaxMS: 800}},
			[]timingRow{
				{Label: "infrastructure start-up", Value: "500 ms"},
				{Label: "all runs", Value: "800 ms"},
				{Label: "whole run, to the verdict", Value: "1.40 s"},
				{Label: "median scenario", Value: "800 ms"},
				{Label: "slowest scenario", Value: "800 ms"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, timingRows(tc.run))
		})
	}
}

func TestPhasesText(t *testing.T) {
	run := fixtureRun().Scenarios[0]
	assert.Equal(t, "infra 6.5 · workload 7.5 · converging 1.8 · checking 0.2", phasesText(run))
	assert.Equal(t, "", phasesText(result.Scenario{Name: "no phases", DurationMS: 100}))
}

// The time to a verdict is in index.html and summary.md when the run
// recorded it, and absent (not empty) when it did not.
func TestTimingInReports(t *testing.T) {
	for _, tc := range []struct {
		name   string
		timing bool
	}{{"recorded", true}, {"not recorded", false}} {
		t.Run(tc.name, func(t *testing.T) {
			run := fixtureRun()
			if !tc.timing {
				run.Timing = nil
			}
			dir := reportDir(t)
			require.NoError(t, Write(dir, run))
			html := read(t, filepath.Join(dir, IndexFile))
			md := read(t, filepath.Join(dir, SummaryFile))
			// Per run, where its time went, either way.
			assert.Contains(t, html, `<td class="phases">infra 6.5 · workload 7.5 · converging 1.8 · checking 0.2</td>`)
			if !tc.timing {
				assert.NotContains(t, html, "Time to a verdict")
				assert.NotContains(t, md, "Time to a verdict")
				return
			}
			assert.Contains(t, html, "<h2>Time to a verdict</h2>")
			assert.Contains(t, html, `<tr><th>whole run, to the verdict</th><td class="num good">1m41s</td><td class="o good">goal ≤ 2m00s: met</td></tr>`)
			assert.Contains(t, html, `<tr><th>median scenario</th><td class="num bad">14.20 s</td><td class="o bad">goal ≤ 10.00 s: missed</td></tr>`)
			assert.Contains(t, md, "## Time to a verdict\n\n| figure | time | note |\n|---|--:|---|\n")
			assert.Contains(t, md, "| median scenario | 14.20 s | ❌ goal ≤ 10.00 s: missed |\n")
			assert.Contains(t, md, "| infrastructure start-up | 6.10 s | infra 6.00 s, postgres 1.40 s, rabbitmq 5.90 s, build 2.10 s, toxiproxy 90 ms |\n")
			i := strings.Index(md, "Where the slowest runs' time went")
			require.GreaterOrEqual(t, i, 0)
			slowest := md[i:]
			assert.Contains(t, md, "| slowest scenario | 25.00 s | producer-crash-after-commit [commit-then-publish] |\n")
			first := strings.Index(slowest, "- `producer-crash-after-commit` [commit-then-publish] 25.00 s\n") // no phases recorded: nothing after the time
			second := strings.Index(slowest, "- `relay-pause-past-lease` [correct] 22.00 s\n")
			require.GreaterOrEqual(t, first, 0)
			assert.Less(t, first, second, "slowest first")
		})
	}
}
