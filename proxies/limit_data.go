package proxies

import (
	"fmt"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// LimitData closes the connection once Bytes bytes have passed on its stream
// since the toxic was added (0: at the first data).
type LimitData struct {
	Bytes    int64
	Stream   Stream
	Toxicity float32
}

func (t LimitData) Type() string         { return "limit_data" }
func (t LimitData) Direction() Stream    { return direction(t.Stream) }
func (t LimitData) Probability() float32 { return probability(t.Toxicity) }

func (t LimitData) Attributes() toxiproxy.Attributes {
	return toxiproxy.Attributes{"bytes": t.Bytes}
}

func (t LimitData) Validate() error {
	var bytes error
	if t.Bytes < 0 {
		bytes = fmt.Errorf("bytes must not be negative, got %d", t.Bytes)
	}
	return invalid(t.Type(), validateCommon(t.Stream, t.Toxicity), bytes)
}
