// Package registry is a table of named values written while a package
// initialises and only read after: the first read seals it, and a write
// after that is refused, so nothing can appear or change while a run reads
// it. Each entry adds itself from its own file's init, so adding one is
// adding one file, with no list elsewhere to extend. The fault kinds and
// the observation sources are such tables.
package registry

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
)

// Table holds values of T by name. The zero Table is empty and ready.
type Table[T any] struct {
	what string // what an entry is, for errors: "fault kind"

	mu      sync.Mutex
	entries []entry[T]
	sealed  bool
}

type entry[T any] struct {
	name  string
	value T
}

// New is an empty table of what ("fault kind", "observation source").
func New[T any](what string) *Table[T] { return &Table[T]{what: what} }

// Add adds v under name; an empty name, a second entry of one name, or one
// added after the table was read, is refused.
func (t *Table[T]) Add(name string, v T) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if name == "" {
		return fmt.Errorf("%s without a name", t.what)
	}
	if t.sealed {
		return fmt.Errorf("%s %q added after the table was read", t.what, name)
	}
	if slices.ContainsFunc(t.entries, func(e entry[T]) bool { return e.name == name }) {
		return fmt.Errorf("%s %q added twice", t.what, name)
	}
	t.entries = append(t.entries, entry[T]{name, v})
	return nil
}

// MustAdd is Add from an init: a refusal is a programming error, found
// when the package loads.
func (t *Table[T]) MustAdd(name string, v T) {
	if err := t.Add(name, v); err != nil {
		panic(err)
	}
}

// All is every value, by name; it seals the table.
func (t *Table[T]) All() []T {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sealed = true
	sorted := slices.Clone(t.entries)
	slices.SortFunc(sorted, func(a, b entry[T]) int { return cmp.Compare(a.name, b.name) })
	out := make([]T, len(sorted))
	for i, e := range sorted {
		out[i] = e.value
	}
	return out
}

// Named is the value of name; it seals the table.
func (t *Table[T]) Named(name string) (T, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sealed = true
	for _, e := range t.entries {
		if e.name == name {
			return e.value, true
		}
	}
	var zero T
	return zero, false
}
