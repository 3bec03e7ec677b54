package bench

import (
	"slices"
	"time"
)

// Sample is one repetition of one measurement.
type Sample struct {
	Events       int     `json:"events"`
	DurationMS   float64 `json:"duration_ms"`
	EventsPerSec float64 `json:"events_per_sec"`
}

// newSample is n events in d.
func newSample(n int, d time.Duration) Sample {
	s := Sample{Events: n, DurationMS: float64(d.Microseconds()) / 1000}
	if d > 0 {
		s.EventsPerSec = float64(n) / d.Seconds()
	}
	return s
}

// Figure is one measurement over its repetitions: the median, min and max
// of the events per second.
type Figure struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Instances   int      `json:"instances,omitempty"`
	Events      int      `json:"events"`
	Samples     []Sample `json:"samples"`
	Median      float64  `json:"median_events_per_sec"`
	Min         float64  `json:"min_events_per_sec"`
	Max         float64  `json:"max_events_per_sec"`
}

// summarize fills Median, Min and Max from the samples. The median of an
// even count is the mean of the middle two.
func (f *Figure) summarize() {
	if len(f.Samples) == 0 {
		return
	}
	rates := make([]float64, len(f.Samples))
	for i, s := range f.Samples {
		rates[i] = s.EventsPerSec
	}
	slices.Sort(rates)
	f.Min, f.Max = rates[0], rates[len(rates)-1]
	mid := len(rates) / 2
	if len(rates)%2 == 1 {
		f.Median = rates[mid]
	} else {
		f.Median = (rates[mid-1] + rates[mid]) / 2
	}
}

// Ratios compare the medians of one run. Relay is the relay's best instance
// count.
type Ratios struct {
	RelayVsRaw         float64 `json:"relay_vs_raw"`
	RelayVsNaive       float64 `json:"relay_vs_naive"`
	ConsumerVsRelay    float64 `json:"consumer_vs_relay"`
	EndToEndVsRelay    float64 `json:"end_to_end_vs_relay"`
	BestRelayInstances int     `json:"best_relay_instances"`
}

// Target is a ratio the reference pipeline must reach on the machine it
// runs on.
type Target struct {
	Ratio string  `json:"ratio"`
	Want  float64 `json:"at_least"`
	Got   float64 `json:"got"`
	Met   bool    `json:"met"`
}

// targetMinimums are the targets: the guards must cost little.
func targetMinimums() []struct {
	ratio string
	want  float64
} {
	return []struct {
		ratio string
		want  float64
	}{
		{"relay_vs_raw", 0.7},
		{"relay_vs_naive", 10},
		{"consumer_vs_relay", 1.0},
	}
}

// ratios computes the ratios from the figures by name; a figure that was
// not measured gives 0.
func ratios(figs []Figure) (Ratios, []Target) {
	median := func(name string) float64 {
		for _, f := range figs {
			if f.Name == name {
				return f.Median
			}
		}
		return 0
	}
	var best Figure
	for _, f := range figs {
		if f.Name == FigureRelay && f.Median > best.Median {
			best = f
		}
	}
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	r := Ratios{
		RelayVsRaw:         div(best.Median, median(FigureRaw)),
		RelayVsNaive:       div(best.Median, median(FigureNaive)),
		ConsumerVsRelay:    div(median(FigureConsumer), best.Median),
		EndToEndVsRelay:    div(median(FigureEndToEnd), best.Median),
		BestRelayInstances: best.Instances,
	}
	got := map[string]float64{"relay_vs_raw": r.RelayVsRaw, "relay_vs_naive": r.RelayVsNaive, "consumer_vs_relay": r.ConsumerVsRelay}
	var ts []Target
	for _, t := range targetMinimums() {
		ts = append(ts, Target{Ratio: t.ratio, Want: t.want, Got: got[t.ratio], Met: got[t.ratio] >= t.want})
	}
	return r, ts
}
