package explore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/proxies"
)

// Fault kinds as a schedule file names them.
const (
	KindCrash         = "crash"
	KindToxic         = "toxic"
	KindLinkDown      = "link-down"
	KindUnbind        = "unbind"
	KindPoison        = "poison"
	KindBrokerRestart = "broker-restart"
	KindReplay        = "replay"
	KindOnCommit      = "on-commit"
)

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

// Spec is one fault as data: its kind and the fields of that kind. It is
// how a fault is written in a schedule file and in explore.json; Fault
// turns it back into the harness's fault value, and SpecOf is the reverse.
type Spec struct {
	Kind string `json:"kind"`

	// crash
	Process      string   `json:"process,omitempty"` // instance reference: "relay-1", "consumer"
	Point        string   `json:"point,omitempty"`   // protocol window
	Action       string   `json:"action,omitempty"`  // kill, pause, delay
	Hit          int64    `json:"hit,omitempty"`
	Delay        Duration `json:"delay,omitempty"`
	Hold         Duration `json:"hold,omitempty"`
	RestartAfter Duration `json:"restart_after,omitempty"`
	NoRestart    bool     `json:"no_restart,omitempty"`

	// toxic, link-down
	Link     string     `json:"link,omitempty"` // "relay-1.pg", "consumer.amqp"
	Toxic    *ToxicSpec `json:"toxic,omitempty"`
	Duration Duration   `json:"duration,omitempty"` // also unbind's
	At       *SyncSpec  `json:"at,omitempty"`

	// unbind
	RoutingKey string `json:"routing_key,omitempty"`
	// poison
	Count int `json:"count,omitempty"`
	// broker-restart
	Down Duration `json:"down,omitempty"`
	// replay
	Consumer string `json:"consumer,omitempty"`

	// on-commit (a black-box window): at the Hit-th commit by Process of a
	// write to Table (to Status), Toxic on Link for Duration, the links in
	// Cut down CutAfter later for CutFor, then Action (kill, pause or none)
	// ActAfter later.
	Table    string   `json:"table,omitempty"`
	Status   string   `json:"status,omitempty"`
	Cut      []string `json:"cut,omitempty"`
	CutAfter Duration `json:"cut_after,omitempty"`
	CutFor   Duration `json:"cut_for,omitempty"`
	ActAfter Duration `json:"act_after,omitempty"`

	// every kind but crash armed at start
	Trigger *TriggerSpec `json:"trigger,omitempty"`
}

// TriggerSpec is a fault.Trigger as data.
type TriggerSpec struct {
	AfterOrders int64    `json:"after_orders,omitempty"`
	Delay       Duration `json:"delay,omitempty"`
}

// SyncSpec is a fault.Sync as data.
type SyncSpec struct {
	Process string   `json:"process"`
	Point   string   `json:"point"`
	Delay   Duration `json:"delay,omitempty"`
}

// ToxicSpec is a proxies.Toxic as data: its Toxiproxy type and the fields
// of that type.
type ToxicSpec struct {
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

func triggerSpec(t fault.Trigger) *TriggerSpec {
	if t == (fault.Trigger{}) {
		return nil
	}
	return &TriggerSpec{AfterOrders: t.AfterOrders, Delay: Duration(t.Delay)}
}

func (t *TriggerSpec) trigger() fault.Trigger {
	if t == nil {
		return fault.Trigger{}
	}
	return fault.Trigger{AfterOrders: t.AfterOrders, Delay: time.Duration(t.Delay)}
}

func syncSpec(s *fault.Sync) *SyncSpec {
	if s == nil {
		return nil
	}
	return &SyncSpec{Process: s.Process, Point: s.Point, Delay: Duration(s.Delay)}
}

func (s *SyncSpec) sync() (*fault.Sync, error) {
	if s == nil {
		return nil, nil
	}
	if s.Process == "" || s.Point == "" {
		return nil, errors.New("at: needs process and point")
	}
	return &fault.Sync{Process: s.Process, Point: s.Point, Delay: time.Duration(s.Delay)}, nil
}

// SpecOf writes a fault as data. A fault of a kind this package does not
// know is an error.
func SpecOf(f fault.Fault) (Spec, error) {
	switch f := f.(type) {
	case fault.Crash:
		return Spec{Kind: KindCrash, Process: f.Process, Point: f.Point, Action: f.Action, Hit: f.Hit, Delay: Duration(f.Delay),
			Hold: Duration(f.Hold), RestartAfter: Duration(f.RestartAfter), NoRestart: f.NoRestart, Trigger: triggerSpec(f.Trigger)}, nil
	case fault.Toxic:
		ts, err := toxicSpec(f.Toxic)
		if err != nil {
			return Spec{}, fmt.Errorf("toxic on %s: %w", f.Link, err)
		}
		return Spec{Kind: KindToxic, Link: f.Link, Toxic: &ts, Duration: Duration(f.Duration), At: syncSpec(f.At), Trigger: triggerSpec(f.Trigger)}, nil
	case fault.LinkDown:
		return Spec{Kind: KindLinkDown, Link: f.Link, Duration: Duration(f.Duration), At: syncSpec(f.At), Trigger: triggerSpec(f.Trigger)}, nil
	case fault.Unbind:
		return Spec{Kind: KindUnbind, RoutingKey: f.RoutingKey, Duration: Duration(f.Duration), Trigger: triggerSpec(f.Trigger)}, nil
	case fault.Poison:
		return Spec{Kind: KindPoison, Count: f.Count, Trigger: triggerSpec(f.Trigger)}, nil
	case fault.BrokerRestart:
		return Spec{Kind: KindBrokerRestart, Down: Duration(f.Down), Trigger: triggerSpec(f.Trigger)}, nil
	case fault.RetentionReplay:
		return Spec{Kind: KindReplay, Consumer: f.Consumer, Trigger: triggerSpec(f.Trigger)}, nil
	case fault.OnCommit:
		s := Spec{Kind: KindOnCommit, Process: f.Process, Table: f.Table, Status: f.Status, Hit: int64(f.Nth), Trigger: triggerSpec(f.Trigger),
			Cut: f.Cut, CutAfter: Duration(f.CutAfter), CutFor: Duration(f.CutFor), Link: f.ToxicLink, Duration: Duration(f.ToxicFor),
			ActAfter: Duration(f.ActAfter), Action: f.Action, Hold: Duration(f.Hold), RestartAfter: Duration(f.RestartAfter)}
		if f.ToxicLink != "" {
			ts, err := toxicSpec(f.Toxic)
			if err != nil {
				return Spec{}, fmt.Errorf("on-commit toxic on %s: %w", f.ToxicLink, err)
			}
			s.Toxic = &ts
		}
		return s, nil
	default:
		return Spec{}, fmt.Errorf("fault %T cannot be written as data", f)
	}
}

// Fault turns the data back into the harness's fault value, checking that
// the kind's required fields are there.
func (s Spec) Fault() (fault.Fault, error) {
	need := func(ok bool, what string) error {
		if !ok {
			return fmt.Errorf("%s fault: needs %s", s.Kind, what)
		}
		return nil
	}
	switch s.Kind {
	case KindCrash:
		if err := errors.Join(need(s.Process != "", "process"), need(s.Point != "", "point")); err != nil {
			return nil, err
		}
		switch s.Action {
		case crashpoint.Kill, crashpoint.Pause:
		case crashpoint.Delay:
			if s.Delay <= 0 {
				return nil, fmt.Errorf("crash fault: action delay needs a delay")
			}
		default:
			return nil, fmt.Errorf("crash fault: action %q: want kill, pause or delay", s.Action)
		}
		if s.Hit < 0 {
			return nil, fmt.Errorf("crash fault: hit %d: want 1 or more", s.Hit)
		}
		return fault.Crash{Process: s.Process, Point: s.Point, Action: s.Action, Delay: time.Duration(s.Delay), Hit: s.Hit,
			Trigger: s.Trigger.trigger(), Hold: time.Duration(s.Hold), RestartAfter: time.Duration(s.RestartAfter), NoRestart: s.NoRestart}, nil
	case KindToxic:
		if err := errors.Join(need(s.Link != "", "link"), need(s.Toxic != nil, "toxic")); err != nil {
			return nil, err
		}
		t, err := s.Toxic.toxic()
		if err != nil {
			return nil, fmt.Errorf("toxic fault on %s: %w", s.Link, err)
		}
		at, err := s.At.sync()
		if err != nil {
			return nil, fmt.Errorf("toxic fault on %s: %w", s.Link, err)
		}
		return fault.Toxic{Link: s.Link, Toxic: t, Trigger: s.Trigger.trigger(), Duration: time.Duration(s.Duration), At: at}, nil
	case KindLinkDown:
		if err := need(s.Link != "", "link"); err != nil {
			return nil, err
		}
		at, err := s.At.sync()
		if err != nil {
			return nil, fmt.Errorf("link-down fault on %s: %w", s.Link, err)
		}
		return fault.LinkDown{Link: s.Link, Trigger: s.Trigger.trigger(), Duration: time.Duration(s.Duration), At: at}, nil
	case KindUnbind:
		return fault.Unbind{RoutingKey: s.RoutingKey, Trigger: s.Trigger.trigger(), Duration: time.Duration(s.Duration)}, nil
	case KindPoison:
		if err := need(s.Count > 0, "a count of 1 or more"); err != nil {
			return nil, err
		}
		return fault.Poison{Count: s.Count, Trigger: s.Trigger.trigger()}, nil
	case KindBrokerRestart:
		return fault.BrokerRestart{Trigger: s.Trigger.trigger(), Down: time.Duration(s.Down)}, nil
	case KindReplay:
		if err := need(s.Consumer != "", "consumer"); err != nil {
			return nil, err
		}
		return fault.RetentionReplay{Consumer: s.Consumer, Trigger: s.Trigger.trigger()}, nil
	case KindOnCommit:
		return s.onCommit()
	case "":
		return nil, errors.New("fault without a kind")
	default:
		return nil, fmt.Errorf("unknown fault kind %q (want %s)", s.Kind,
			strings.Join([]string{KindCrash, KindToxic, KindLinkDown, KindUnbind, KindPoison, KindBrokerRestart, KindReplay, KindOnCommit}, ", "))
	}
}

// onCommit is an on-commit spec as the harness's fault.
func (s Spec) onCommit() (fault.Fault, error) {
	var errs []error
	if s.Process == "" {
		errs = append(errs, errors.New("on-commit fault: needs process"))
	}
	switch s.Table {
	case fault.TableOutbox, fault.TableFacts, fault.TableEffects:
	default:
		errs = append(errs, fmt.Errorf("on-commit fault: table %q: want %s, %s or %s", s.Table, fault.TableOutbox, fault.TableFacts, fault.TableEffects))
	}
	switch s.Action {
	case fault.ActKill, fault.ActPause, fault.ActNone:
	default:
		errs = append(errs, fmt.Errorf("on-commit fault: action %q: want %s, %s or %s", s.Action, fault.ActKill, fault.ActPause, fault.ActNone))
	}
	if s.Hit < 0 {
		errs = append(errs, fmt.Errorf("on-commit fault: hit %d: want 1 or more", s.Hit))
	}
	if (s.Link == "") != (s.Toxic == nil) {
		errs = append(errs, errors.New("on-commit fault: link and toxic go together"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c := fault.OnCommit{Process: s.Process, Table: s.Table, Status: s.Status, Nth: int(s.Hit), Trigger: s.Trigger.trigger(),
		Cut: s.Cut, CutAfter: time.Duration(s.CutAfter), CutFor: time.Duration(s.CutFor), ToxicLink: s.Link, ToxicFor: time.Duration(s.Duration),
		ActAfter: time.Duration(s.ActAfter), Action: s.Action, Hold: time.Duration(s.Hold), RestartAfter: time.Duration(s.RestartAfter)}
	if s.Toxic != nil {
		t, err := s.Toxic.toxic()
		if err != nil {
			return nil, fmt.Errorf("on-commit fault on %s: %w", s.Link, err)
		}
		c.Toxic = t
	}
	return c, nil
}

// Window is the window the fault opens, "" if none: a crash point's, the
// point a link fault waits at, a black-box window (BlackBoxWindow), or the
// unroutable queue (WindowUnroutable).
func (s Spec) Window() string {
	switch s.Kind {
	case KindCrash:
		return s.Point
	case KindOnCommit:
		return BlackBoxWindow(s.Process, s.Table, s.Status)
	case KindUnbind:
		return WindowUnroutable
	}
	if s.At != nil {
		return s.At.Point
	}
	return ""
}

// Instance is the instance reference whose window the fault opens.
func (s Spec) Instance() string {
	if s.Kind == KindCrash || s.Kind == KindOnCommit {
		return s.Process
	}
	if s.At != nil {
		return s.At.Process
	}
	return ""
}

func toxicSpec(t proxies.Toxic) (ToxicSpec, error) {
	switch t := t.(type) {
	case proxies.Latency:
		return ToxicSpec{Type: t.Type(), Latency: Duration(t.Latency), Jitter: Duration(t.Jitter), Stream: string(t.Stream), Toxicity: t.Toxicity}, nil
	case proxies.Timeout:
		return ToxicSpec{Type: t.Type(), Timeout: Duration(t.Timeout), Stream: string(t.Stream), Toxicity: t.Toxicity}, nil
	case proxies.ResetPeer:
		return ToxicSpec{Type: t.Type(), Timeout: Duration(t.Timeout), Stream: string(t.Stream), Toxicity: t.Toxicity}, nil
	case proxies.Bandwidth:
		return ToxicSpec{Type: t.Type(), RateKBps: t.RateKBps, Stream: string(t.Stream), Toxicity: t.Toxicity}, nil
	case proxies.Slicer:
		return ToxicSpec{Type: t.Type(), AverageSize: t.AverageSize, SizeVariation: t.SizeVariation, Delay: Duration(t.Delay), Stream: string(t.Stream), Toxicity: t.Toxicity}, nil
	case proxies.LimitData:
		return ToxicSpec{Type: t.Type(), Bytes: t.Bytes, Stream: string(t.Stream), Toxicity: t.Toxicity}, nil
	case nil:
		return ToxicSpec{}, errors.New("no toxic")
	default:
		return ToxicSpec{}, fmt.Errorf("toxic %T cannot be written as data", t)
	}
}

func (ts *ToxicSpec) toxic() (proxies.Toxic, error) {
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

// Specs writes faults as data.
func Specs(faults []fault.Fault) ([]Spec, error) {
	out := make([]Spec, 0, len(faults))
	for i, f := range faults {
		s, err := SpecOf(f)
		if err != nil {
			return nil, fmt.Errorf("fault %d: %w", i+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// Faults turns data back into faults.
func Faults(specs []Spec) ([]fault.Fault, error) {
	out := make([]fault.Fault, 0, len(specs))
	for i, s := range specs {
		f, err := s.Fault()
		if err != nil {
			return nil, fmt.Errorf("fault %d: %w", i+1, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// Describe is a fault in one line, as the harness describes it.
func Describe(f fault.Fault) string {
	d := f.Describe()
	return d.Kind + " " + d.Target + ": " + d.Detail
}
