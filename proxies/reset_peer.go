package proxies

import (
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// ResetPeer waits for the first data on its stream, waits Timeout (0: none),
// then closes the connection. Connections opened after the toxic was added
// are reset (TCP RST); older ones are closed with a FIN. Whole milliseconds.
type ResetPeer struct {
	Timeout  time.Duration
	Stream   Stream
	Toxicity float32
}

func (t ResetPeer) Type() string         { return "reset_peer" }
func (t ResetPeer) Direction() Stream    { return direction(t.Stream) }
func (t ResetPeer) Probability() float32 { return probability(t.Toxicity) }

func (t ResetPeer) Attributes() toxiproxy.Attributes {
	return toxiproxy.Attributes{"timeout": t.Timeout.Milliseconds()}
}

func (t ResetPeer) Validate() error {
	return invalid(t.Type(),
		validateCommon(t.Stream, t.Toxicity),
		validateDuration("timeout", t.Timeout, time.Millisecond),
	)
}
