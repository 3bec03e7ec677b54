package inventory

import "context"

// ackBeforeCommit is the ack-before-commit variant: every valid delivery is
// acked as soon as it is received, before the after-receive crash point and
// the transaction; the ack after the commit does nothing. A crash or a
// failed transaction in between loses the effect: the broker has forgotten
// the message. (Poison is not acked: it is still dead-lettered by a nack.)
type ackBeforeCommit struct{ correctSteps }

func (s ackBeforeCommit) receive(ctx context.Context, b []*item) {
	s.correctSteps.receive(ctx, b)
	valid := make([]*item, 0, len(b))
	for _, it := range b {
		if it.poison == nil {
			valid = append(valid, it)
		}
	}
	s.correctSteps.ack(ctx, valid)
}

func (ackBeforeCommit) ack(context.Context, []*item) {}
