package proxies

import (
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// Timeout drops all data on its stream and closes the connection once no
// data has arrived for Timeout (each chunk restarts the wait). A Timeout of
// 0 stalls the connection forever. Removing the toxic closes the
// connections it held. Whole milliseconds.
type Timeout struct {
	Timeout  time.Duration
	Stream   Stream
	Toxicity float32
}

func (t Timeout) Type() string         { return "timeout" }
func (t Timeout) Direction() Stream    { return direction(t.Stream) }
func (t Timeout) Probability() float32 { return probability(t.Toxicity) }

func (t Timeout) Attributes() toxiproxy.Attributes {
	return toxiproxy.Attributes{"timeout": t.Timeout.Milliseconds()}
}

func (t Timeout) Validate() error {
	return invalid(t.Type(),
		validateCommon(t.Stream, t.Toxicity),
		validateDuration("timeout", t.Timeout, time.Millisecond),
	)
}
