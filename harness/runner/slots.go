package runner

import (
	"context"
	"slices"
	"sync"
)

// slots bounds the runs under way at once (SharedOptions.MaxRuns). A run
// that goes to an infrastructure of its own — a clustered broker, a
// database with a standby, a broker apart — is handed the next free place
// before every run waiting for the shared one: those runs go one or two
// at a time on their infrastructure, a chain as long as all of them, and
// queued behind a gate's runs they would start last and run alone while
// the rest of the machine sits idle.
type slots struct {
	mu   sync.Mutex
	free int
	// first and rest are the runs waiting, each a channel closed when it
	// is handed a place: those of an infrastructure of their own, then
	// the others, each in the order they came.
	first, rest []chan struct{}
}

func newSlots(n int) *slots { return &slots{free: n} }

// take waits for a place, ahead of the others when first; an error only
// when ctx ended first.
func (s *slots) take(ctx context.Context, first bool) error {
	s.mu.Lock()
	if s.free > 0 {
		s.free--
		s.mu.Unlock()
		return nil
	}
	handed := make(chan struct{})
	if first {
		s.first = append(s.first, handed)
	} else {
		s.rest = append(s.rest, handed)
	}
	s.mu.Unlock()
	select {
	case <-handed:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	waiting := slices.Contains(s.first, handed) || slices.Contains(s.rest, handed)
	s.first = slices.DeleteFunc(s.first, func(c chan struct{}) bool { return c == handed })
	s.rest = slices.DeleteFunc(s.rest, func(c chan struct{}) bool { return c == handed })
	s.mu.Unlock()
	if !waiting {
		// Handed a place as ctx ended: it goes to the next.
		s.give()
	}
	return ctx.Err()
}

// give returns a place: to the first run waiting, else to the free ones.
func (s *slots) give() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range []*[]chan struct{}{&s.first, &s.rest} {
		if len(*q) > 0 {
			close((*q)[0])
			*q = (*q)[1:]
			return
		}
	}
	s.free++
}
