package observe

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/target"
)

// RoutedQueue is the queue faultline binds to the run's firehose to time
// each publish into the target's exchange by eventId
// (history.SourceRouted).
const RoutedQueue = "faultline.firehose"

// traceExchange is where the broker's firehose copies what is published
// in a vhost that has it on: "publish.<exchange>" for each message
// published into exchange, routed or not.
const traceExchange = "amq.rabbitmq.trace"

func init() {
	addSource(source{name: history.SourceRouted, when: Live,
		offered: func(t *target.Target, _ map[string]bool) bool { return t.Topology.Exchange != "" },
		install: (*Watch).watchRouted})
}

// watchRouted turns the run vhost's firehose on (off again at Close) and
// times each publish into the target's exchange, by its eventId, as
// faultline receives its copy: a moment after the broker took it, never
// before. The firehose copies a publish whatever it was routed to, and
// leaves its routing alone: a queue bound to the exchange itself would
// make a publish that the unbind left unroutable routable, and a
// mandatory one would not be returned. A message without an eventId is
// not kept.
func (w *Watch) watchRouted(ctx context.Context) (recorder, error) {
	r := &w.routed
	r.mu.Lock()
	r.times = map[string][]time.Time{}
	r.mu.Unlock()
	err := w.consumeRouted(ctx, RoutedQueue, "publishes (firehose)", traceExchange, []string{"publish." + w.run.Target.Topology.Exchange}, func(d amqp.Delivery) {
		at := time.Now()
		id := tracedEventID(w.run.Target.Topology.EventID, d)
		if id == "" {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.times[id] = append(r.times[id], at)
	})
	if err != nil {
		return nil, err
	}
	vhost := w.run.VHost
	if err := w.run.Infra.TraceVHost(ctx, vhost, true); err != nil {
		return nil, fmt.Errorf("firehose on: %w", err)
	}
	w.onClose(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = w.run.Infra.TraceVHost(ctx, vhost, false) // the vhost goes next; a node restarted has it off
	})
	return func(o *history.Record) { o.Routed = w.allRouted() }, nil
}

// routedTimes are the firehose copies received so far, by eventId.
type routedTimes struct {
	mu    sync.Mutex
	times map[string][]time.Time // nil until the firehose is watched
}

// Routing reports whether the run's firehose is watched.
func (w *Watch) Routing() bool {
	w.routed.mu.Lock()
	defer w.routed.mu.Unlock()
	return w.routed.times != nil
}

// Routed is when faultline received the firehose's copies of the
// publishes of each of ids so far (copies: the caller may keep them); a
// fault that waits for publishes to reach the broker reads it as the run
// goes on.
func (w *Watch) Routed(ids []string) map[string][]time.Time {
	out := make(map[string][]time.Time, len(ids))
	w.routed.mu.Lock()
	defer w.routed.mu.Unlock()
	for _, id := range ids {
		if times, ok := w.routed.times[id]; ok {
			out[id] = slices.Clone(times)
		}
	}
	return out
}

// allRouted is every eventId's copies so far (nil while the firehose is
// not watched).
func (w *Watch) allRouted() map[string][]time.Time {
	w.routed.mu.Lock()
	defer w.routed.mu.Unlock()
	if w.routed.times == nil {
		return nil
	}
	out := maps.Clone(w.routed.times)
	for id, times := range out {
		out[id] = slices.Clone(times)
	}
	return out
}
