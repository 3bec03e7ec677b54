package proxies

import (
	"math"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/stretchr/testify/assert"
)

func TestToxicRendering(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		toxic       Toxic
		typ         string
		stream      Stream
		probability float32
		attrs       toxiproxy.Attributes
	}{
		{
			name:        "latency defaults",
			toxic:       Latency{Latency: 250 * time.Millisecond},
			typ:         "latency",
			stream:      Downstream,
			probability: 1,
			attrs:       toxiproxy.Attributes{"latency": int64(250), "jitter": int64(0)},
		},
		{
			name:        "latency with jitter upstream",
			toxic:       Latency{Latency: 2 * time.Second, Jitter: 30 * time.Millisecond, Stream: Upstream, Toxicity: 0.5},
			typ:         "latency",
			stream:      Upstream,
			probability: 0.5,
			attrs:       toxiproxy.Attributes{"latency": int64(2000), "jitter": int64(30)},
		},
		{
			name:        "timeout forever",
			toxic:       Timeout{},
			typ:         "timeout",
			stream:      Downstream,
			probability: 1,
			attrs:       toxiproxy.Attributes{"timeout": int64(0)},
		},
		{
			name:        "timeout",
			toxic:       Timeout{Timeout: 1500 * time.Millisecond, Stream: Upstream},
			typ:         "timeout",
			stream:      Upstream,
			probability: 1,
			attrs:       toxiproxy.Attributes{"timeout": int64(1500)},
		},
		{
			name:        "reset peer",
			toxic:       ResetPeer{Timeout: 40 * time.Millisecond, Toxicity: 0.25},
			typ:         "reset_peer",
			stream:      Downstream,
			probability: 0.25,
			attrs:       toxiproxy.Attributes{"timeout": int64(40)},
		},
		{
			name:        "bandwidth",
			toxic:       Bandwidth{RateKBps: 64},
			typ:         "bandwidth",
			stream:      Downstream,
			probability: 1,
			attrs:       toxiproxy.Attributes{"rate": int64(64)},
		},
		{
			name:        "slicer delay in microseconds",
			toxic:       Slicer{AverageSize: 100, SizeVariation: 10, Delay: 2 * time.Millisecond, Stream: Upstream},
			typ:         "slicer",
			stream:      Upstream,
			probability: 1,
			attrs:       toxiproxy.Attributes{"average_size": 100, "size_variation": 10, "delay": int64(2000)},
		},
		{
			name:        "limit data",
			toxic:       LimitData{Bytes: 1 << 20, Toxicity: 1},
			typ:         "limit_data",
			stream:      Downstream,
			probability: 1,
			attrs:       toxiproxy.Attributes{"bytes": int64(1 << 20)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.NoError(t, tt.toxic.Validate())
			assert.Equal(t, tt.typ, tt.toxic.Type())
			assert.Equal(t, tt.stream, tt.toxic.Direction())
			assert.Equal(t, tt.probability, tt.toxic.Probability())
			assert.Equal(t, tt.attrs, tt.toxic.Attributes())
		})
	}
}

func TestToxicValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		toxic Toxic
		want  string // "" means valid
	}{
		{"zero latency is valid", Latency{}, ""},
		{"negative latency", Latency{Latency: -time.Millisecond}, "invalid latency toxic: latency must not be negative, got -1ms"},
		{"negative jitter", Latency{Jitter: -time.Second}, "jitter must not be negative"},
		{"sub-millisecond latency", Latency{Latency: 1500 * time.Microsecond}, "latency must be a whole number of milliseconds (Toxiproxy's unit), got 1.5ms"},
		{"bad stream", Latency{Stream: "sideways"}, `stream must be "upstream" or "downstream", got "sideways"`},
		{"toxicity above 1", Latency{Toxicity: 1.5}, "toxicity must be within 0..1, got 1.5"},
		{"negative toxicity", Timeout{Toxicity: -0.1}, "toxicity must be within 0..1"},
		{"NaN toxicity", LimitData{Toxicity: float32(math.NaN())}, "toxicity must be within 0..1"},
		{"negative timeout", Timeout{Timeout: -time.Second}, "invalid timeout toxic: timeout must not be negative"},
		{"sub-millisecond timeout", Timeout{Timeout: time.Microsecond}, "whole number of milliseconds"},
		{"reset peer at once is valid", ResetPeer{}, ""},
		{"negative reset peer", ResetPeer{Timeout: -time.Millisecond}, "invalid reset_peer toxic: timeout must not be negative"},
		{"zero bandwidth", Bandwidth{}, "invalid bandwidth toxic: rate must be positive, got 0 KB/s"},
		{"negative bandwidth", Bandwidth{RateKBps: -1}, "rate must be positive"},
		{"zero slicer size", Slicer{}, "invalid slicer toxic: average size must be positive, got 0"},
		{"slicer variation too large", Slicer{AverageSize: 10, SizeVariation: 10}, "size variation must be within 0..average size-1, got 10 (average size 10)"},
		{"negative slicer variation", Slicer{AverageSize: 10, SizeVariation: -1}, "size variation must be within"},
		{"negative slicer delay", Slicer{AverageSize: 10, Delay: -time.Microsecond}, "delay must not be negative"},
		{"sub-microsecond slicer delay", Slicer{AverageSize: 10, Delay: 1500 * time.Nanosecond}, "delay must be a whole number of microseconds"},
		{"limit data zero is valid", LimitData{}, ""},
		{"negative limit data", LimitData{Bytes: -1}, "invalid limit_data toxic: bytes must not be negative, got -1"},
		{"all errors reported", Latency{Latency: -1, Stream: "x"}, "latency must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.toxic.Validate()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
