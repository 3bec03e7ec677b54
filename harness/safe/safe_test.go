package safe

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDoTurnsAPanicIntoAnError(t *testing.T) {
	err := Do("a step", func() error { panic("boom") })
	perr, ok := As(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "a step", perr.Where)
	assert.Equal(t, "boom", perr.Value)
	assert.Contains(t, string(perr.Stack), "safe_test.go", "the stack reaches the panic")
	assert.EqualError(t, err, "harness panic in a step: boom")

	plain := errors.New("plain")
	assert.Equal(t, plain, Do("x", func() error { return plain }))
	assert.NoError(t, Do("x", func() error { return nil }))
}

func TestRecoverKeepsTheErrorThere(t *testing.T) {
	f := func() (err error) {
		defer Recover("f", &err)
		err = errors.New("first")
		panic(42)
	}
	err := f()
	assert.ErrorContains(t, err, "first")
	_, ok := As(err)
	assert.True(t, ok)
}

func TestGoHandsThePanicOver(t *testing.T) {
	got := make(chan *PanicError, 1)
	Go("worker", func() { panic("in a goroutine") }, func(p *PanicError) { got <- p })
	p := <-got
	assert.Equal(t, "worker", p.Where)
	assert.Equal(t, "in a goroutine", p.Value)

	done := make(chan struct{})
	Go("quiet", func() { close(done) }, func(*PanicError) { t.Error("no panic here") })
	<-done
}
