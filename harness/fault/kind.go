package fault

import (
	"fmt"
	"reflect"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/registry"
)

// Kind is one fault kind as the rest of faultline sees it, beyond its
// Inject: its name and parameters as a schedule file writes them, the
// window a fault of it opens, what it touches, how explore enumerates it
// on a target and how the shrinker makes it smaller, and what `faultline
// list` says of it. Each kind declares its Kind in its own file, next to
// its Fault type, as a Desc, and registers it there; Kinds is the table
// that explore's spec, plan, coverage and shrink and `faultline list` read.
type Kind interface {
	// Name is the kind as a schedule file names it: "crash", "toxic".
	Name() string
	// Doc says what a fault of the kind does, in one line.
	Doc() string
	// Opens names the window(s) a fault of the kind opens, for people.
	Opens() string
	// Owns reports whether f is a fault of this kind.
	Owns(f Fault) bool
	// Encode is f as data: a JSON object whose first field is "kind".
	Encode(f Fault) ([]byte, error)
	// Decode is the fault an object of this kind's (with its "kind"
	// field) says, checked: an unknown field or a missing or unsound
	// parameter is an error.
	Decode(data []byte) (Fault, error)
	// Window is the window f opens ("" if none) and the instance whose it
	// is ("" if none).
	Window(f Fault) (instance history.Ref, window string)
	// Touches is what f acts on.
	Touches(f Fault) Touch
	// Trigger is when f is armed (zero: at start, or no trigger).
	Trigger(f Fault) Trigger
	// Enumerate is every single fault of the kind the surface offers to
	// explore, with what its window needs around it (none: explore does
	// not try the kind on its own).
	Enumerate(s *Surface, hits int) []Candidate
	// Offered are the windows the kind opens from outside (no crash point)
	// that the surface offers, for the coverage table.
	Offered(s *Surface) []Offer
	// Shrink is f made smaller in one way each, the biggest first.
	Shrink(f Fault) []Smaller
	// Example is one fault of the kind, with its parameters set: what the
	// table's tests write and read back for every kind.
	Example() Fault
}

// Touch is what a fault acts on: instances and links by reference, the
// shared parts by name ("queue", "broker"), and whether it leaves the
// queue unroutable.
type Touch struct {
	Instances  []history.Ref
	Links      []history.Link
	Shared     []string
	Unroutable bool
}

// Candidate is one single fault explore may run — with the faults and
// settings its window needs around it to open at all — and what makes two
// of them collide.
type Candidate struct {
	Faults   []Fault
	Settings map[string]string
	// RidesOut: the candidate's outage is one the target rides out, so no
	// row may end Failed (explore judges the run by none-gave-up too).
	RidesOut bool
	// Depth orders the singles: higher is a later hit, a later instance, a
	// link fault at a window.
	Depth int
	// Keys are what the candidate takes, one per run: a crash point of an
	// instance, a link, the bindings.
	Keys []string
}

// Offer is one window a target offers, and who offers it.
type Offer struct {
	Name string
	Role string
	By   []string
}

// Smaller is a fault made smaller in one way, and what changed.
type Smaller struct {
	Change string
	Fault  Fault
}

// Desc is a Kind whose faults are F: a struct that is its own wire form
// (wire.go: each field with a `json` tag is a parameter, written under
// its name). Name, Doc and Example are required; Check, when set, refuses
// a fault read from a schedule that is not sound (a missing or
// contradictory parameter). A nil func means the kind has none of that
// (opens no window of its own, touches nothing, is not enumerated, is not
// shrunk but by dropping it).
type Desc[F Fault] struct {
	Name  string
	Doc   string
	Opens string
	// Example is one fault of the kind with its parameters set.
	Example F
	Check   func(f F) error

	Window    func(f F) (instance history.Ref, window string)
	Touches   func(f F) Touch
	Trigger   func(f F) Trigger
	Enumerate func(s *Surface, hits int) []Candidate
	Offered   func(s *Surface) []Offer
	// Shrink adds f's smaller versions to sh.
	Shrink func(f F, sh *Shrink[F])
}

// kind is a Desc as a Kind.
type kind[F Fault] struct{ d Desc[F] }

func (k kind[F]) Name() string  { return k.d.Name }
func (k kind[F]) Doc() string   { return k.d.Doc }
func (k kind[F]) Opens() string { return k.d.Opens }

func (k kind[F]) Example() Fault { return k.d.Example }

func (k kind[F]) Owns(f Fault) bool {
	_, ok := f.(F)
	return ok
}

func (k kind[F]) Encode(f Fault) ([]byte, error) { return encodeWire(k.d.Name, f.(F)) }

func (k kind[F]) Decode(data []byte) (Fault, error) {
	var f F
	if err := decodeWire(k.d.Name, data, &f); err != nil {
		return nil, err
	}
	if k.d.Check != nil {
		if err := k.d.Check(f); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (k kind[F]) Window(f Fault) (history.Ref, string) {
	if k.d.Window == nil {
		return "", ""
	}
	return k.d.Window(f.(F))
}

func (k kind[F]) Touches(f Fault) Touch {
	if k.d.Touches == nil {
		return Touch{}
	}
	return k.d.Touches(f.(F))
}

func (k kind[F]) Trigger(f Fault) Trigger {
	if k.d.Trigger == nil {
		return Trigger{}
	}
	return k.d.Trigger(f.(F))
}

func (k kind[F]) Enumerate(s *Surface, hits int) []Candidate {
	if k.d.Enumerate == nil {
		return nil
	}
	return k.d.Enumerate(s, hits)
}

func (k kind[F]) Offered(s *Surface) []Offer {
	if k.d.Offered == nil {
		return nil
	}
	return k.d.Offered(s)
}

func (k kind[F]) Shrink(f Fault) []Smaller {
	if k.d.Shrink == nil {
		return nil
	}
	sh := &Shrink[F]{f: f.(F)}
	k.d.Shrink(sh.f, sh)
	return sh.out
}

// kinds is the table of kinds. Each kind's file adds its own from an
// init (register), so that adding a kind is adding one file: no list
// elsewhere to extend. It is the package's one piece of state, written
// once: register is unexported, called only from the kinds' inits (which
// run before any other package can read the table), and the table refuses
// a write once read.
var kinds = registry.New[Kind]("fault kind")

// register adds the kind d describes to the table; a kind without a name
// or a Doc, whose faults are not a struct, or a second kind of one name,
// is a programming error found when the package loads.
func register[F Fault](d Desc[F]) {
	if d.Name == "" || d.Doc == "" || reflect.TypeFor[F]().Kind() != reflect.Struct {
		panic(fmt.Sprintf("fault kind %q: needs a name, a Doc, and a struct for its faults", d.Name))
	}
	kinds.MustAdd(d.Name, kind[F]{d})
}

// Kinds is every fault kind, by name.
func Kinds() []Kind { return kinds.All() }

// KindNamed is the kind a schedule names.
func KindNamed(name string) (Kind, bool) { return kinds.Named(name) }

// KindOf is the kind of f.
func KindOf(f Fault) (Kind, bool) {
	for _, k := range Kinds() {
		if k.Owns(f) {
			return k, true
		}
	}
	return nil, false
}
