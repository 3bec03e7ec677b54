package observe

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/target"
)

// RoutedQueue is the queue faultline binds to the target's exchange to
// time each routing by eventId (history.SourceRouted).
const RoutedQueue = "faultline.tap.routed"

func init() {
	addSource(source{name: history.SourceRouted, when: Live,
		offered: func(t *target.Target, _ map[string]bool) bool { return t.Topology.Exchange != "" },
		install: (*Watch).watchRouted})
}

// watchRouted times each message the exchange routes, by its eventId, as
// faultline receives it: a moment after the exchange routed it, never
// before. A message without an eventId is not kept.
func (w *Watch) watchRouted(ctx context.Context) (recorder, error) {
	var mu sync.Mutex
	routed := map[string][]time.Time{}
	err := w.consumeRouted(ctx, RoutedQueue, "routings (routed tap)", func(d amqp.Delivery) {
		at := time.Now()
		id := eventIDOf(d)
		if id == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		routed[id] = append(routed[id], at)
	})
	if err != nil {
		return nil, err
	}
	return func(o *history.Record) {
		mu.Lock()
		defer mu.Unlock()
		o.Routed = maps.Clone(routed)
		for id, times := range o.Routed {
			o.Routed[id] = slices.Clone(times)
		}
	}, nil
}
