package inventory

import (
	"strconv"

	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// poisonAcked is the poison-acked variant: a message that can never be
// processed is acked, not rejected, so the broker forgets it and the
// queue's dead-letter exchange never routes it anywhere. The handler logs
// it as dropped. (The correct deadLetter nacks it without requeue.)
type poisonAcked struct{ correctSteps }

func (s poisonAcked) deadLetter(items []*item) {
	if len(items) == 0 {
		return
	}
	entries := make([]eventlog.Entry, 0, len(items))
	for _, it := range items {
		id := it.ev.EventID
		if id == "" {
			id = it.d.MessageId // as the correct deadLetter names it
		}
		e := eventlog.Entry{Event: eventlog.ErrorOccurred, EventID: id,
			Error: "poison (" + it.poison.Error() + ") acked: dropped, messageId=" + strconv.Quote(it.d.MessageId)}
		if err := it.d.Ack(false); err != nil {
			e.Error += "; ack: " + err.Error()
		}
		entries = append(entries, e)
	}
	s.log.Batch(entries)
}
