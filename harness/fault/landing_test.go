package fault

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/protocol/crashpoint"
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
	t.Run("a thaw says when it was, and the first one counts", func(t *testing.T) {
		l := NewLandings()
		thawed := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
		l.landAt(ThawedKey("relay-1"), thawed, nil)
		l.land(ThawedKey("relay-1"), errors.New("was not frozen and thawed")) // a deferred second landing
		at, err := l.waitAt(context.Background(), ThawedKey("relay-1"))
		require.NoError(t, err)
		assert.Equal(t, thawed, at)
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

// A fault that waits for a landing on a link no fault of its schedule
// lands on is refused before the run, naming the fault and the link.
func TestCheckOrder(t *testing.T) {
	after := Trigger{AfterOrders: 5, AfterLink: "consumer.pg"}
	kill := Unacked{Process: "consumer", Action: ActKill, Trigger: after}
	require.NoError(t, CheckOrder(nil))
	assert.NoError(t, CheckOrder([]Fault{LinkDown{Link: "consumer.pg"}, kill}))
	assert.NoError(t, CheckOrder([]Fault{kill, Toxic{Link: "consumer.pg"}}), "the order in the list does not matter")
	err := CheckOrder([]Fault{Toxic{Link: "consumer.amqp"}, kill})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `fault 2 (unacked): after_link "consumer.pg"`)

	unbind := Unbind{Duration: time.Second, UntilThawed: "relay-1"}
	freeze := Crash{Process: "relay-1", Point: "relay.before-retry", Action: crashpoint.Pause, UntilTakeover: true}
	assert.NoError(t, CheckOrder([]Fault{unbind, freeze}))
	err = CheckOrder([]Fault{unbind, Crash{Process: "relay-1", Point: "relay.before-retry", Action: crashpoint.Pause}})
	require.Error(t, err, "a freeze of fixed length lands no thaw")
	assert.Contains(t, err.Error(), `fault 1 (unbind): until_thawed "relay-1"`)

	assert.NoError(t, CheckOrder([]Fault{Unbind{Trigger: Trigger{OverBacklog: true, PastRelease: true}, UntilSettled: 200}}))
	err = CheckOrder([]Fault{Unbind{Trigger: Trigger{AfterOrders: 5, PastRelease: true}, UntilSettled: 200}})
	require.Error(t, err, "no release to go past")
	assert.Contains(t, err.Error(), "fault 1 (unbind): past_release")
	err = CheckOrder([]Fault{BrokerRestart{Trigger: Trigger{OverBacklog: true, PastRelease: true}}})
	require.Error(t, err, "a kind that never says it acted")
	assert.Contains(t, err.Error(), "never says it has acted")
	twice := Unbind{Trigger: Trigger{OverBacklog: true, PastRelease: true}, UntilSettled: 200}
	err = CheckOrder([]Fault{twice, twice})
	require.Error(t, err, "two faults on one key")
	assert.Contains(t, err.Error(), "fault 2 (unbind): past_release: one fault per schedule")
}

// Link names: an instance's links to its database, the broker and a
// broker node besides its own, and which is which.
func TestLinkNames(t *testing.T) {
	assert.Equal(t, "relay-1.pg", DBLink("relay-1"))
	assert.Equal(t, "relay-1.amqp", BrokerLink("relay-1"))
	assert.Equal(t, "relay-1.amqp-n2", NodeLink("relay-1", 1))
	for _, tc := range []struct {
		link       string
		db, broker bool
	}{
		{"consumer.pg", true, false},
		{"consumer.amqp", false, true},
		{"consumer.amqp-n1", false, true},
		{"consumer", false, false},
	} {
		assert.Equal(t, tc.db, IsDBLink(tc.link), tc.link)
		assert.Equal(t, tc.broker, IsBrokerLink(tc.link), tc.link)
	}
}

func TestReleaseAfter(t *testing.T) {
	closed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	t.Run("a fault over the backlog: its end", func(t *testing.T) {
		done := make(chan struct{})
		l := NewLandings()
		got := ReleaseAfter(Unbind{Trigger: Trigger{OverBacklog: true}, Duration: time.Second}, done, l)
		l.land(ActedKey, nil)
		assert.False(t, closed(got), "acting is not the end")
		close(done)
		assert.True(t, closed(got))
	})
	t.Run("past the release: its acting", func(t *testing.T) {
		done := make(chan struct{})
		l := NewLandings()
		got := ReleaseAfter(Unbind{Trigger: Trigger{OverBacklog: true, PastRelease: true}, UntilSettled: 200}, done, l)
		assert.False(t, closed(got))
		l.land(ActedKey, nil)
		assert.Eventually(t, func() bool { return closed(got) }, 5*time.Second, time.Millisecond)
		assert.False(t, closed(done), "the fault goes on")
	})
	t.Run("past the release, ended without acting", func(t *testing.T) {
		done := make(chan struct{})
		got := ReleaseAfter(Unbind{Trigger: Trigger{OverBacklog: true, PastRelease: true}, UntilSettled: 200}, done, NewLandings())
		close(done)
		assert.Eventually(t, func() bool { return closed(got) }, 5*time.Second, time.Millisecond)
	})
}
