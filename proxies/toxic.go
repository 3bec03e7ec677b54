package proxies

import (
	"errors"
	"fmt"
	"math"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// Toxic is one kind of network fault, added to a link with Link.Add. Each
// concrete type (Latency, Timeout, ResetPeer, Bandwidth, Slicer, LimitData)
// lives in its own file and has two common fields:
//
//   - Stream: the direction it acts on, Downstream (the default, data from
//     the dependency to the process) or Upstream;
//   - Toxicity: the probability, 0..1, that it acts on a given connection;
//     0 means the default, 1.
type Toxic interface {
	// Type is the toxic's Toxiproxy type, e.g. "latency".
	Type() string
	// Direction is the stream it acts on, with the default applied.
	Direction() Stream
	// Probability is its toxicity, with the default applied.
	Probability() float32
	// Attributes are its Toxiproxy attributes, in Toxiproxy's units.
	Attributes() toxiproxy.Attributes
	// Validate says why the toxic cannot be sent, or nil.
	Validate() error
}

// Stream is the direction of the data a toxic acts on.
type Stream string

const (
	// Downstream is data from the dependency (upstream server) to the
	// process that dialled the link.
	Downstream Stream = "downstream"
	// Upstream is data from the process to the dependency.
	Upstream Stream = "upstream"
)

func direction(s Stream) Stream {
	if s == "" {
		return Downstream
	}
	return s
}

func probability(toxicity float32) float32 {
	if toxicity == 0 {
		return 1
	}
	return toxicity
}

// validateCommon checks the fields every toxic has.
func validateCommon(stream Stream, toxicity float32) error {
	var errs []error
	switch stream {
	case "", Downstream, Upstream:
	default:
		errs = append(errs, fmt.Errorf("stream must be %q or %q, got %q", Upstream, Downstream, stream))
	}
	if math.IsNaN(float64(toxicity)) || toxicity < 0 || toxicity > 1 {
		errs = append(errs, fmt.Errorf("toxicity must be within 0..1, got %v", toxicity))
	}
	return errors.Join(errs...)
}

// validateDuration checks that d is not negative and a whole multiple of
// unit, the unit Toxiproxy reads the attribute in.
func validateDuration(field string, d, unit time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%s must not be negative, got %v", field, d)
	}
	if d%unit != 0 {
		return fmt.Errorf("%s must be a whole number of %s (Toxiproxy's unit), got %v", field, unitName(unit), d)
	}
	return nil
}

func unitName(unit time.Duration) string {
	switch unit {
	case time.Millisecond:
		return "milliseconds"
	case time.Microsecond:
		return "microseconds"
	default:
		return unit.String()
	}
}

// invalid prefixes a toxic's validation errors with its type.
func invalid(toxicType string, errs ...error) error {
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid %s toxic: %w", toxicType, err)
	}
	return nil
}
