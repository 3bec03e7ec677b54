package runner

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
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

func TestRolesResolveReferences(t *testing.T) {
	roles := fault.NewRoles([]fault.Instance{
		{Name: "inventory", Role: "consumer", Points: map[string]string{"consumer.after-commit": "inventory.after-commit"}, EventLog: true},
		{Name: "relay-1", Role: "relay"}, {Name: "relay-2", Role: "relay"},
		{Name: "order", Role: "producer"},
	})
	for ref, want := range map[history.Ref]string{"consumer": "inventory", "consumer-1": "inventory", "relay": "relay-1", "relay-2": "relay-2", "producer": "order"} {
		in, err := roles.Instance(ref)
		if assert.NoError(t, err, ref) {
			assert.Equal(t, want, in.Name, ref)
		}
	}
	_, err := roles.Instance("relay-3")
	assert.ErrorContains(t, err, "runs 2 relay instance(s), not 3")
	link, err := roles.Link("consumer.pg")
	assert.NoError(t, err)
	assert.Equal(t, "inventory.pg", link)
	_, err = roles.Link("consumer.redis")
	assert.Error(t, err)
	own, err := roles.Point("consumer", "consumer.after-commit")
	assert.NoError(t, err)
	assert.Equal(t, "inventory.after-commit", own)
	_, err = roles.Point("relay-1", "relay.after-confirm")
	assert.ErrorContains(t, err, "offers no crash point at relay.after-confirm")
}
