package explore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
)

// Duration is a time.Duration written as Go writes one ("5s", "300ms").
type Duration = fault.Duration

// Spec is one fault as data: its kind and the fields of that kind, as a
// schedule file and explore.json write it ({"kind": "crash", "process":
// ...}). Each kind writes and reads its own fields (fault.Kind's Encode and
// Decode); Fault turns a Spec back into the harness's fault value, and
// SpecOf is the reverse.
type Spec struct {
	Kind string
	f    fault.Fault // nil only in the zero Spec
}

// SpecOf writes a fault as data. A fault of no kind in fault.Kinds is an
// error.
func SpecOf(f fault.Fault) (Spec, error) {
	k, ok := fault.KindOf(f)
	if !ok {
		return Spec{}, fmt.Errorf("fault %T cannot be written as data: it is of no kind in fault.Kinds", f)
	}
	if _, err := k.Encode(f); err != nil {
		return Spec{}, err
	}
	return Spec{Kind: k.Name(), f: f}, nil
}

// Fault is the harness's fault the data says.
func (s Spec) Fault() (fault.Fault, error) {
	if s.f == nil {
		return nil, errors.New("fault without a kind")
	}
	return s.f, nil
}

// MarshalJSON implements json.Marshaler: the kind writes its fault.
func (s Spec) MarshalJSON() ([]byte, error) {
	k, ok := s.kind()
	if !ok {
		return json.Marshal(struct {
			Kind string `json:"kind"`
		}{s.Kind})
	}
	return k.Encode(s.f)
}

// UnmarshalJSON implements json.Unmarshaler: the kind the data names reads
// it, checked; an unknown kind or field is an error.
func (s *Spec) UnmarshalJSON(b []byte) error {
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	if head.Kind == "" {
		return errors.New("fault without a kind")
	}
	k, ok := fault.KindNamed(head.Kind)
	if !ok {
		var names []string
		for _, k := range fault.Kinds() {
			names = append(names, k.Name())
		}
		return fmt.Errorf("unknown fault kind %q (want %s)", head.Kind, strings.Join(names, ", "))
	}
	f, err := k.Decode(b)
	if err != nil {
		return err
	}
	*s = Spec{Kind: head.Kind, f: f}
	return nil
}

// kind is the spec's kind; false for the zero Spec.
func (s Spec) kind() (fault.Kind, bool) {
	if s.f == nil {
		return nil, false
	}
	return fault.KindNamed(s.Kind)
}

// Window is the window the fault opens, "" if none: a crash point's, the
// point a link fault waits at, a black-box window (BlackBoxWindow), the
// unroutable queue (WindowUnroutable), the outbox's commits out of order
// (WindowCommitOrder): what its kind says.
func (s Spec) Window() string {
	k, ok := s.kind()
	if !ok {
		return ""
	}
	_, w := k.Window(s.f)
	return w
}

// Instance is the instance reference whose window the fault opens.
func (s Spec) Instance() history.Ref {
	k, ok := s.kind()
	if !ok {
		return ""
	}
	in, _ := k.Window(s.f)
	return in
}

// touches is what the fault acts on.
func (s Spec) touches() fault.Touch {
	k, ok := s.kind()
	if !ok {
		return fault.Touch{}
	}
	return k.Touches(s.f)
}

// trigger is when the fault is armed.
func (s Spec) trigger() fault.Trigger {
	k, ok := s.kind()
	if !ok {
		return fault.Trigger{}
	}
	return k.Trigger(s.f)
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
