package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name           string
		rates          []float64
		med, min, max_ float64
	}{
		{"one", []float64{5}, 5, 5, 5},
		{"odd count takes the middle", []float64{30, 10, 20}, 20, 10, 30},
		{"even count takes the mean of the middle two", []float64{40, 10, 20, 30}, 25, 10, 40},
		{"an outlier moves min or max, not the median", []float64{1000, 100, 101}, 101, 100, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Figure{}
			for _, r := range tc.rates {
				f.Samples = append(f.Samples, Sample{EventsPerSec: r})
			}
			f.summarize()
			assert.Equal(t, tc.med, f.Median)
			assert.Equal(t, tc.min, f.Min)
			assert.Equal(t, tc.max_, f.Max)
		})
	}
}

func TestNewSample(t *testing.T) {
	s := newSample(10000, 500*time.Millisecond)
	assert.InDelta(t, 20000, s.EventsPerSec, 1e-9)
	assert.InDelta(t, 500, s.DurationMS, 1e-9)
	assert.Zero(t, newSample(10, 0).EventsPerSec, "no duration, no rate (not +Inf)")
}

func TestRatiosUseTheBestRelay(t *testing.T) {
	figs := []Figure{
		{Name: FigureRaw, Median: 20000},
		{Name: FigureNaive, Median: 400},
		{Name: FigureRelay, Instances: 1, Median: 8000},
		{Name: FigureRelay, Instances: 2, Median: 15000},
		{Name: FigureRelay, Instances: 4, Median: 14000},
		{Name: FigureConsumer, Median: 12000},
		{Name: FigureEndToEnd, Median: 3000},
	}
	r, targets := ratios(figs)
	assert.Equal(t, 2, r.BestRelayInstances)
	assert.InDelta(t, 0.75, r.RelayVsRaw, 1e-9)
	assert.InDelta(t, 37.5, r.RelayVsNaive, 1e-9)
	assert.InDelta(t, 0.8, r.ConsumerVsRelay, 1e-9)
	assert.InDelta(t, 0.2, r.EndToEndVsRelay, 1e-9)
	require.Len(t, targets, 3)
	met := map[string]bool{}
	for _, tg := range targets {
		met[tg.Ratio] = tg.Met
	}
	assert.Equal(t, map[string]bool{"relay_vs_raw": true, "relay_vs_naive": true, "consumer_vs_relay": false}, met)
}

func TestRatiosOfFiguresNotMeasuredAreZero(t *testing.T) {
	r, targets := ratios([]Figure{{Name: FigureRelay, Instances: 4, Median: 100}})
	assert.Zero(t, r.RelayVsRaw)
	assert.Zero(t, r.ConsumerVsRelay)
	for _, tg := range targets {
		assert.False(t, tg.Met, tg.Ratio)
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Defaults()
	require.NoError(t, ok.Validate())
	for _, tc := range []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"no events", func(o *Options) { o.Events = 0 }, "events must be at least 1"},
		{"no repetitions", func(o *Options) { o.Reps = 0 }, "repetitions must be at least 1"},
		{"no relay count", func(o *Options) { o.Relays = nil }, "no relay instance count"},
		{"too many relays", func(o *Options) { o.Relays = []int{1, 17} }, "relay instances must be 1..16"},
		{"unknown figure", func(o *Options) { o.Only = []string{"relay", "warp"} }, `unknown figure "warp"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Defaults()
			tc.change(&o)
			assert.ErrorContains(t, o.Validate(), tc.want)
		})
	}
}
