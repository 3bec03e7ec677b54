package inventory_test

import (
	"errors"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/topology"
	"github.com/faultline-dev/faultline/system/variant"
)

// With --amqp-urls the consumer connects to the first node; when that node
// is lost it goes on through the next one without waiting for the first to
// come back, and what was published meanwhile takes effect.
func TestBrokerFailsOverToTheNextNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := newForwarder(t, testInfra.AMQPAddr())
	second := newForwarder(t, testInfra.AMQPAddr())
	cfg := e.config()
	cfg.AMQPURL = "amqp://unused.invalid/" // replaced by --amqp-urls
	cfg.AMQPURLs = e.amqpURLVia(first.addr) + "," + e.amqpURLVia(second.addr)
	e.start(cfg)
	e.publish(event("evt-1", "order-1", 1))
	e.waitCount(eventlog.Acked, "evt-1", 1)

	first.cut() // and it stays cut
	e.publish(event("evt-2", "order-2", 1))
	e.waitCount(eventlog.Acked, "evt-2", 1)
	e.waitDrained()
	assert.Equal(t, []string{"evt-1", "evt-2"}, e.reservations())
	var nodes []string
	for _, x := range e.events() {
		if x.Event == eventlog.Connected && strings.HasPrefix(x.Detail, "amqp ") {
			nodes = append(nodes, x.Detail[strings.LastIndex(x.Detail, " ")+1:])
		}
	}
	assert.Equal(t, []string{"node=1/2", "node=2/2"}, nodes)
}

// classic-queue declares the consumer's queue classic: a redeclaration as
// a classic queue agrees with it, one as a quorum queue fails with
// PRECONDITION_FAILED; the correct consumer's queue is the other way round.
func TestClassicQueueDeclaresAClassicQueue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		variant string
		want    string // the queue type the consumer declared
	}{
		{variant.ClassicQueue, "classic"},
		{"", "quorum"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			// newEnv declared the correct queue; the consumer must be the
			// first to declare it.
			conn, err := amqp.Dial(e.amqpURL())
			require.NoError(t, err)
			ch, err := conn.Channel()
			require.NoError(t, err)
			_, err = ch.QueueDelete(topology.Queue, false, false, false)
			require.NoError(t, err)
			conn.Close()
			cfg := e.config()
			cfg.Variant = tc.variant
			e.start(cfg)
			e.publish(event("evt-1", "order-1", 1))
			e.waitCount(eventlog.Acked, "evt-1", 1)
			for _, typ := range []string{"classic", "quorum"} {
				conn, err := amqp.Dial(e.amqpURL())
				require.NoError(t, err)
				ch, err := conn.Channel()
				require.NoError(t, err)
				_, err = ch.QueueDeclare(topology.Queue, true, false, false, false,
					amqp.Table{"x-queue-type": typ, "x-dead-letter-exchange": topology.DeadLetterExchange})
				conn.Close()
				if typ == tc.want {
					assert.NoError(t, err, "redeclared as %s", typ)
					continue
				}
				var amqpErr *amqp.Error
				if assert.True(t, errors.As(err, &amqpErr), "redeclared as %s: want a channel error, got %v", typ, err) {
					assert.Equal(t, amqp.PreconditionFailed, amqpErr.Code, amqpErr.Reason)
				}
			}
		})
	}
}
