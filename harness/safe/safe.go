// Package safe turns a panic in a goroutine faultline starts into an error
// that whoever waits for the goroutine receives, so that one bug of the
// harness ends one run indeterminate (with the stack in its folder) instead
// of killing a whole gate and leaving its processes and folders behind.
//
// Every goroutine the harness starts recovers: `defer safe.Recover(where,
// &err)` where it returns an error, safe.Go where it reports through a
// callback, safe.Do for a step run in line (a teardown step).
package safe

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// PanicError is a recovered panic: where it happened, the value, and the
// goroutine's stack at the panic.
type PanicError struct {
	Where string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("harness panic in %s: %v", e.Where, e.Value)
}

// Recover, deferred, turns a panic of the calling goroutine into *errp (a
// *PanicError joined to whatever error was there). It must be called
// directly by the deferred statement.
func Recover(where string, errp *error) {
	if p := recover(); p != nil {
		perr := &PanicError{Where: where, Value: p, Stack: debug.Stack()}
		if errp != nil {
			*errp = errors.Join(*errp, perr)
		}
	}
}

// Do runs fn and returns its error, or its panic as a *PanicError.
func Do(where string, fn func() error) (err error) {
	defer Recover(where, &err)
	return fn()
}

// Go runs fn in a goroutine; a panic there is handed to onPanic (which may
// be nil: the panic is then dropped, the goroutine ended) instead of
// ending the process.
func Go(where string, fn func(), onPanic func(*PanicError)) {
	go func() {
		err := Do(where, func() error { fn(); return nil })
		var perr *PanicError
		if errors.As(err, &perr) && onPanic != nil {
			onPanic(perr)
		}
	}()
}

// As returns the panic err holds, if any.
func As(err error) (*PanicError, bool) {
	var perr *PanicError
	ok := errors.As(err, &perr)
	return perr, ok
}
