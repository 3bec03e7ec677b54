package proxies

import (
	"fmt"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// Slicer cuts each chunk of data into pieces of about AverageSize bytes
// (± SizeVariation) and sends them Delay apart. AverageSize must be
// positive, SizeVariation below it; Delay is whole microseconds.
type Slicer struct {
	AverageSize   int
	SizeVariation int
	Delay         time.Duration
	Stream        Stream
	Toxicity      float32
}

func (t Slicer) Type() string         { return "slicer" }
func (t Slicer) Direction() Stream    { return direction(t.Stream) }
func (t Slicer) Probability() float32 { return probability(t.Toxicity) }

func (t Slicer) Attributes() toxiproxy.Attributes {
	return toxiproxy.Attributes{
		"average_size":   t.AverageSize,
		"size_variation": t.SizeVariation,
		"delay":          t.Delay.Microseconds(),
	}
}

func (t Slicer) Validate() error {
	var size, variation error
	if t.AverageSize <= 0 {
		size = fmt.Errorf("average size must be positive, got %d", t.AverageSize)
	}
	if t.SizeVariation < 0 || (t.AverageSize > 0 && t.SizeVariation >= t.AverageSize) {
		variation = fmt.Errorf("size variation must be within 0..average size-1, got %d (average size %d)",
			t.SizeVariation, t.AverageSize)
	}
	return invalid(t.Type(),
		validateCommon(t.Stream, t.Toxicity),
		size, variation,
		validateDuration("delay", t.Delay, time.Microsecond),
	)
}
