// Package testctx gives tests a context bounded by go test's own deadline.
package testctx

import (
	"context"
	"testing"
	"time"
)

// margin is what is left of go test's deadline (-timeout) when the context
// ends: time for the test to fail and its cleanups to stop what it started.
const margin = time.Minute

// BeforeDeadline is t's context, ended a minute before go test's own
// deadline. It is for a test whose every wait has a bound of its own (an
// infrastructure start, a run's convergence): it needs no total guessed
// from a quiet machine's pace, which a loaded one exceeds, and a hang
// still ends as the test's failure, with its cleanups run.
func BeforeDeadline(t *testing.T) context.Context {
	ctx := t.Context()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-margin))
		t.Cleanup(cancel)
	}
	return ctx
}
