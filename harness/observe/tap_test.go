package observe

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
)

// retryInternalError makes the call again only while the broker answers
// INTERNAL_ERROR, and at most tapAttempts times.
func TestRetryInternalError(t *testing.T) {
	internal := fmt.Errorf("declare %s: %w", TapQueue, &amqp.Error{Code: amqp.InternalError, Reason: "INTERNAL_ERROR", Server: true})
	denied := fmt.Errorf("declare %s: %w", TapQueue, &amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED", Server: true})
	for _, tc := range []struct {
		name  string
		errs  []error // what each call returns; the last repeats
		calls int
		want  error
	}{
		{name: "bound at once", errs: []error{nil}, calls: 1},
		{name: "internal error once", errs: []error{internal, nil}, calls: 2},
		{name: "internal error every time", errs: []error{internal}, calls: tapAttempts, want: internal},
		{name: "another error is not retried", errs: []error{denied}, calls: 1, want: denied},
		{name: "a plain error is not retried", errs: []error{errors.New("dial: refused")}, calls: 1, want: errors.New("dial: refused")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := retryInternalError(context.Background(), func() error {
				calls++
				return tc.errs[min(calls, len(tc.errs))-1]
			}, time.Millisecond)
			assert.Equal(t, tc.calls, calls)
			if tc.want == nil {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tc.want.Error())
			}
		})
	}
	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		calls := 0
		err := retryInternalError(ctx, func() error { calls++; return internal }, time.Hour)
		assert.Equal(t, 1, calls, "no wait and no second call once the context is done")
		assert.ErrorIs(t, err, internal)
	})
}
