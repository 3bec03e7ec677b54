package proxies

import (
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// Latency delays every chunk of data by Latency ± Jitter (a delay below zero
// counts as zero). Both are whole milliseconds.
type Latency struct {
	Latency  time.Duration
	Jitter   time.Duration
	Stream   Stream
	Toxicity float32
}

func (t Latency) Type() string         { return "latency" }
func (t Latency) Direction() Stream    { return direction(t.Stream) }
func (t Latency) Probability() float32 { return probability(t.Toxicity) }

func (t Latency) Attributes() toxiproxy.Attributes {
	return toxiproxy.Attributes{
		"latency": t.Latency.Milliseconds(),
		"jitter":  t.Jitter.Milliseconds(),
	}
}

func (t Latency) Validate() error {
	return invalid(t.Type(),
		validateCommon(t.Stream, t.Toxicity),
		validateDuration("latency", t.Latency, time.Millisecond),
		validateDuration("jitter", t.Jitter, time.Millisecond),
	)
}
