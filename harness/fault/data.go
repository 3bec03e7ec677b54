package fault

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/proxies"
)

// The values kinds share in their parameters as a schedule writes them.

// Duration is a time.Duration written as Go writes one ("5s", "300ms").
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"5s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad duration %q: %w", s, err)
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", s)
	}
	*d = Duration(v)
	return nil
}

// TriggerData is a Trigger as data.
type TriggerData struct {
	AfterOrders  int64        `json:"after_orders,omitempty"`
	OverBacklog  bool         `json:"over_backlog,omitempty"`
	PastRelease  bool         `json:"past_release,omitempty"`
	AfterRelease bool         `json:"after_release,omitempty"`
	AfterLink    history.Link `json:"after_link,omitempty"`
	Delay        Duration     `json:"delay,omitempty"`
}

// Data is t as data; nil for the zero trigger.
func (t Trigger) Data() *TriggerData {
	if t == (Trigger{}) {
		return nil
	}
	return &TriggerData{AfterOrders: t.AfterOrders, OverBacklog: t.OverBacklog, PastRelease: t.PastRelease, AfterRelease: t.AfterRelease, AfterLink: t.AfterLink, Delay: Duration(t.Delay)}
}

// Trigger is the data as a Trigger.
func (t *TriggerData) Trigger() Trigger {
	if t == nil {
		return Trigger{}
	}
	return Trigger{AfterOrders: t.AfterOrders, OverBacklog: t.OverBacklog, PastRelease: t.PastRelease, AfterRelease: t.AfterRelease, AfterLink: t.AfterLink, Delay: time.Duration(t.Delay)}
}

// SyncData is a Sync as data.
type SyncData struct {
	Process history.Ref `json:"process"`
	Point   string      `json:"point"`
	// Delay is read, and ignored, in schedules written while a process
	// waited at its point for a fixed time; it now freezes there until
	// the fault has landed.
	Delay Duration `json:"delay,omitempty"`
}

// Data is s as data; nil for nil.
func (s *Sync) Data() *SyncData {
	if s == nil {
		return nil
	}
	return &SyncData{Process: s.Process, Point: s.Point}
}

// Sync is the data as a Sync, checked.
func (s *SyncData) Sync() (*Sync, error) {
	if s == nil {
		return nil, nil
	}
	if s.Process == "" || s.Point == "" {
		return nil, errors.New("at: needs process and point")
	}
	return &Sync{Process: s.Process, Point: s.Point}, nil
}

// ToxicData is a proxies.Toxic as data: its Toxiproxy type and the fields
// of that type.
type ToxicData struct {
	Type          string   `json:"type"` // latency, timeout, reset_peer, bandwidth, slicer, limit_data
	Latency       Duration `json:"latency,omitempty"`
	Jitter        Duration `json:"jitter,omitempty"`
	Timeout       Duration `json:"timeout,omitempty"`
	RateKBps      int      `json:"rate_kbps,omitempty"`
	AverageSize   int      `json:"average_size,omitempty"`
	SizeVariation int      `json:"size_variation,omitempty"`
	Delay         Duration `json:"delay,omitempty"`
	Bytes         int64    `json:"bytes,omitempty"`
	Stream        string   `json:"stream,omitempty"`
	Toxicity      float32  `json:"toxicity,omitempty"`
}

// ToxicDataOf is t as data.
func ToxicDataOf(t proxies.Toxic) (ToxicData, error) {
	switch t := t.(type) {
	case proxies.Latency:
		return ToxicData{Type: t.Type(), Latency: Duration(t.Latency), Jitter: Duration(t.Jitter), Stream: string(t.Stream), Toxicity: t.Toxicity}, nil
	case proxies.Timeout:
		return ToxicData{Type: t.Type(), Timeout: Duration(t.Timeout), Stream: string(t.Stream), Toxicity: t.Toxicity}, nil
	case proxies.ResetPeer:
		return ToxicData{Type: t.Type(), Timeout: Duration(t.Timeout), Stream: string(t.Stream), Toxicity: t.Toxicity}, nil
	case proxies.Bandwidth:
		return ToxicData{Type: t.Type(), RateKBps: t.RateKBps, Stream: string(t.Stream), Toxicity: t.Toxicity}, nil
	case proxies.Slicer:
		return ToxicData{Type: t.Type(), AverageSize: t.AverageSize, SizeVariation: t.SizeVariation, Delay: Duration(t.Delay), Stream: string(t.Stream), Toxicity: t.Toxicity}, nil
	case proxies.LimitData:
		return ToxicData{Type: t.Type(), Bytes: t.Bytes, Stream: string(t.Stream), Toxicity: t.Toxicity}, nil
	case nil:
		return ToxicData{}, errors.New("no toxic")
	default:
		return ToxicData{}, fmt.Errorf("toxic %T cannot be written as data", t)
	}
}

// Toxic is the data as a proxies.Toxic, validated.
func (ts *ToxicData) Toxic() (proxies.Toxic, error) {
	stream := proxies.Stream(ts.Stream)
	var t proxies.Toxic
	switch ts.Type {
	case "latency":
		t = proxies.Latency{Latency: time.Duration(ts.Latency), Jitter: time.Duration(ts.Jitter), Stream: stream, Toxicity: ts.Toxicity}
	case "timeout":
		t = proxies.Timeout{Timeout: time.Duration(ts.Timeout), Stream: stream, Toxicity: ts.Toxicity}
	case "reset_peer":
		t = proxies.ResetPeer{Timeout: time.Duration(ts.Timeout), Stream: stream, Toxicity: ts.Toxicity}
	case "bandwidth":
		t = proxies.Bandwidth{RateKBps: ts.RateKBps, Stream: stream, Toxicity: ts.Toxicity}
	case "slicer":
		t = proxies.Slicer{AverageSize: ts.AverageSize, SizeVariation: ts.SizeVariation, Delay: time.Duration(ts.Delay), Stream: stream, Toxicity: ts.Toxicity}
	case "limit_data":
		t = proxies.LimitData{Bytes: ts.Bytes, Stream: stream, Toxicity: ts.Toxicity}
	default:
		return nil, fmt.Errorf("unknown toxic type %q (want latency, timeout, reset_peer, bandwidth, slicer or limit_data)", ts.Type)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// Need is an error saying the kind's fault needs what, when ok is false.
func Need(kind string, ok bool, what string) error {
	if !ok {
		return fmt.Errorf("%s fault: needs %s", kind, what)
	}
	return nil
}
