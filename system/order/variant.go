package order

import (
	"time"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/variant"
)

// emitterVariants are the order service's broken variants: no outbox, the
// service publishes each event itself (variant_*.go).
var emitterVariants = map[string]func(*directPublisher) emitter{
	variant.CommitThenPublish: func(p *directPublisher) emitter { return commitThenPublish{p} },
	variant.PublishThenCommit: func(p *directPublisher) emitter { return publishThenCommit{p} },
}

// useVariant switches the service to the named variant's commit or emitter
// when it is an order variant, publishing to the broker's nodes (dialled in turn); it
// returns what to close at the end. Any other name leaves the service
// correct.
func (s *Service) useVariant(name string, nodes []string, heartbeat time.Duration, log *eventlog.Log) (closer func()) {
	switch name {
	case variant.CommitErrorAnswered:
		s.commit = commitErrorAnswered(log)
		return func() {}
	case variant.OutboxOwnTransaction:
		s.emit = outboxOwnTransaction{db: s.db}
		return func() {}
	}
	mk, ok := emitterVariants[name]
	if !ok {
		return func() {}
	}
	pub := newDirectPublisher(nodes, heartbeat, log)
	s.emit = mk(pub)
	return pub.close
}
