package runner

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSideBySide(t *testing.T) {
	errA, errB := errors.New("a failed"), errors.New("b failed")
	for _, tc := range []struct {
		name  string
		n     int
		errs  map[int]error
		wants []error
	}{
		{"none", 0, nil, nil},
		{"all succeed", 3, nil, nil},
		{"one fails", 3, map[int]error{1: errA}, []error{errA}},
		{"two fail: both reported", 3, map[int]error{0: errA, 2: errB}, []error{errA, errB}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			err := sideBySide(tc.n, func(i int) error {
				calls.Add(1)
				return tc.errs[i]
			})
			assert.Equal(t, int32(tc.n), calls.Load(), "every one runs, also after a failure")
			if len(tc.wants) == 0 {
				assert.NoError(t, err)
			}
			for _, want := range tc.wants {
				assert.ErrorIs(t, err, want)
			}
		})
	}
}

// The calls run at once: three that each wait for all three to have
// started finish.
func TestSideBySideAtOnce(t *testing.T) {
	var started sync.WaitGroup
	started.Add(3)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	err := sideBySide(3, func(int) error {
		started.Done()
		select {
		case <-all:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("the others never started")
		}
	})
	assert.NoError(t, err)
}

func TestDefaultArgsUseTheNamedWaits(t *testing.T) {
	args := defaultArgs("relay")
	assert.Subset(t, args, []string{"--lease", RelayLease.String(), "--poll-interval", RelayPoll.String()})
	assert.Equal(t, "2s", RelayLease.String())
	assert.Equal(t, "50ms", RelayPoll.String())
}
