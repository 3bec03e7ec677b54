package fault

import (
	"errors"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/result"
)

// waits collects the causes a fault waited for, for its result
// (result.Fault.Waits): what a reader reads to see that a window opened by
// its cause, and how long that took against its bound. Recording a wait
// changes nothing of what the fault waits for.
type waits []result.Wait

// add records a wait for cause, begun at from, of at most bound: seen
// when err is nil, not seen otherwise (err says why). detail says what
// was seen, or what was seen instead.
func (w *waits) add(cause string, from time.Time, bound time.Duration, detail string, err error) {
	*w = append(*w, waitOf(cause, time.Since(from), bound, detail, err))
}

// wait runs fn, a wait for cause of at most bound, records it, and
// returns fn's error. fn returns what it saw (or "") and why it did not
// see its cause.
func (w *waits) wait(cause string, bound time.Duration, fn func() (string, error)) error {
	from := time.Now()
	detail, err := fn()
	w.add(cause, from, bound, detail, err)
	return err
}

// waitOf is one wait that took took.
func waitOf(cause string, took, bound time.Duration, detail string, err error) result.Wait {
	r := result.Wait{Cause: cause, Seen: err == nil, TookMS: took.Milliseconds(), BoundMS: bound.Milliseconds(), Detail: detail}
	if err != nil {
		r.Detail = strings.TrimSuffix(err.Error()+"; "+detail, "; ")
	}
	return r
}

// unseen is the error of a wait that ended without its cause (ok false,
// why saying so), or err when the wait itself failed.
func unseen(ok bool, why string, err error) error {
	if err != nil || ok {
		return err
	}
	return errors.New(why)
}

// withWaits runs inject with a waits accumulator and puts what it
// collected on the fault's result, whichever way inject returned.
func withWaits(inject func(w *waits) result.Fault) result.Fault {
	var w waits
	r := inject(&w)
	r.Waits = append(r.Waits, w...)
	return r
}
