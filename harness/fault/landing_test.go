package fault

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTriggerAfterLink: a trigger with AfterLink fires once a fault on the
// link has landed, carries the error of one that ended without landing,
// and gives up at the fault deadline when none comes.
func TestTriggerAfterLink(t *testing.T) {
	acked := func() int64 { return 10 }
	t.Run("fires on the landing, not before", func(t *testing.T) {
		env := &Env{Acknowledged: acked, Landings: NewLandings(), Deadline: time.Minute}
		fired := make(chan error, 1)
		go func() { fired <- env.Wait(context.Background(), Trigger{AfterOrders: 5, AfterLink: "producer.amqp"}) }()
		select {
		case err := <-fired:
			t.Fatalf("fired before any landing: %v", err)
		default:
		}
		env.Landings.land("consumer.amqp", nil) // another link
		env.Landings.land("producer.amqp", nil)
		require.NoError(t, <-fired)
	})
	t.Run("a landing before the wait counts", func(t *testing.T) {
		env := &Env{Acknowledged: acked, Landings: NewLandings(), Deadline: time.Minute}
		env.Landings.land("producer.amqp", nil)
		assert.NoError(t, env.Wait(context.Background(), Trigger{AfterLink: "producer.amqp"}))
	})
	t.Run("the first landing counts", func(t *testing.T) {
		env := &Env{Acknowledged: acked, Landings: NewLandings(), Deadline: time.Minute}
		env.Landings.land("producer.amqp", nil)
		env.Landings.land("producer.amqp", notLanded("producer.amqp"))
		assert.NoError(t, env.Wait(context.Background(), Trigger{AfterLink: "producer.amqp"}))
	})
	t.Run("a fault that never landed fails its followers", func(t *testing.T) {
		env := &Env{Acknowledged: acked, Landings: NewLandings(), Deadline: time.Minute}
		env.Landings.land("producer.amqp", notLanded("producer.amqp"))
		err := env.Wait(context.Background(), Trigger{AfterLink: "producer.amqp"})
		assert.ErrorContains(t, err, "the fault on producer.amqp ended before it landed")
	})
	t.Run("none comes within the deadline", func(t *testing.T) {
		env := &Env{Acknowledged: acked, Landings: NewLandings(), Deadline: time.Millisecond}
		err := env.Wait(context.Background(), Trigger{AfterLink: "producer.amqp"})
		assert.ErrorContains(t, err, "no fault landed on producer.amqp")
	})
	t.Run("a run that records no landings", func(t *testing.T) {
		env := &Env{Acknowledged: acked}
		err := env.Wait(context.Background(), Trigger{AfterLink: "producer.amqp"})
		assert.ErrorContains(t, err, "records no landings")
	})
	assert.Equal(t, "after 5 orders, once producer.amqp is faulted", Trigger{AfterOrders: 5, AfterLink: "producer.amqp"}.String())
}
