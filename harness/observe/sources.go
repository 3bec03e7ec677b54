package observe

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/registry"
	"github.com/faultline-dev/faultline/harness/target"
)

// When is when a run reads a source, which decides when a target that
// does not give it is refused.
type When int

const (
	// AtEnd: read from what the run left (its tables, its queues, its
	// event logs); a target whose file does not offer it is not run.
	AtEnd When = iota + 1
	// Live: watched from the run's start (a trigger, a queue bound to the
	// exchange, a sampler); a run that needs it and cannot install it is
	// refused at its start.
	Live
	// Derived: read as part of another source, whose when it has.
	Derived
)

// source is one thing a run observes of its target, as a value: the name
// the record and the evidence know it by, what it needs of the target
// file, when it is read, how it is installed and what it records. Each
// is declared in the file that reads it, and adds itself to the table
// from there (addSource): adding a source is adding one file here, the
// record's section, and the check that reads it.
type source struct {
	name history.Source
	when When
	// offered reports whether t, whose roles logs write event logs, gives
	// the source; nil: every target does.
	offered func(t *target.Target, logs map[string]bool) bool
	// install starts watching it, when a run needs it, and gives what
	// writes its section of the record at the run's end from what it
	// watched (nil: it keeps none); a nil install: Install's triggers and
	// tap do, for every run that watches.
	install func(w *Watch, ctx context.Context) (recorder, error)
	// record writes its section of o at the run's end from what the run
	// left; nil: it keeps none (it times faults), its install's recorder
	// does, or the contract's and the logs' reading does.
	record func(w *Watch, ctx context.Context, o *history.Record) error
}

// recorder writes what an installed source watched into the record.
type recorder func(o *history.Record)

// sources are the observation sources, by name. Written only by the inits
// of this package's files, sealed once read (registry.Table).
var sources = registry.New[source]("observation source")

// addSource adds s to the table, from its file's init.
func addSource(s source) { sources.MustAdd(string(s.name), s) }

// Offers reports whether the target t, whose roles logs write event logs,
// can give what evidence needs; a source faultline does not know is given
// by none.
func Offers(t *target.Target, logs map[string]bool, need history.Source) bool {
	s, ok := sources.Named(string(need))
	if !ok {
		return false
	}
	return s.offered == nil || s.offered(t, logs)
}

// WhenRead is when a run reads the source (0: faultline knows no such
// source).
func WhenRead(need history.Source) When {
	s, _ := sources.Named(string(need))
	return s.when
}

// installNeeded starts the sources with an install of their own that the
// run needs; what cannot be installed is recorded against its source.
func (w *Watch) installNeeded(ctx context.Context, need map[history.Source]bool) {
	for _, s := range sources.All() {
		if s.install == nil || !need[s.name] {
			continue
		}
		rec, err := s.install(w, ctx)
		if err != nil {
			w.missing("%s: %v", s.name, err)
			w.failed[s.name] = err
			continue
		}
		if rec != nil {
			w.recorders = append(w.recorders, rec)
		}
	}
}

// recordAll writes the section of every source that keeps one into o:
// from what the run left, or from what its install watched.
func (w *Watch) recordAll(ctx context.Context, o *history.Record) error {
	for _, rec := range w.recorders {
		rec(o)
	}
	for _, s := range sources.All() {
		if s.record == nil {
			continue
		}
		if err := s.record(w, ctx, o); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// uninstalled says which of the sources need names could not be
// installed, and why ("" if all were).
func (w *Watch) uninstalled(need map[history.Source]bool) string {
	var why []string
	for s, err := range w.failed {
		if need[s] {
			why = append(why, fmt.Sprintf("%s: %v", s, err))
		}
	}
	slices.Sort(why)
	return strings.Join(why, "; ")
}
