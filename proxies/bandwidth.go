package proxies

import (
	"fmt"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// Bandwidth limits its stream to RateKBps kilobytes per second. The rate
// must be positive: Toxiproxy stalls a stream with rate 0 (use Timeout{}
// for that).
type Bandwidth struct {
	RateKBps int
	Stream   Stream
	Toxicity float32
}

func (t Bandwidth) Type() string         { return "bandwidth" }
func (t Bandwidth) Direction() Stream    { return direction(t.Stream) }
func (t Bandwidth) Probability() float32 { return probability(t.Toxicity) }

func (t Bandwidth) Attributes() toxiproxy.Attributes {
	return toxiproxy.Attributes{"rate": int64(t.RateKBps)}
}

func (t Bandwidth) Validate() error {
	var rate error
	if t.RateKBps <= 0 {
		rate = fmt.Errorf("rate must be positive, got %d KB/s", t.RateKBps)
	}
	return invalid(t.Type(), validateCommon(t.Stream, t.Toxicity), rate)
}
