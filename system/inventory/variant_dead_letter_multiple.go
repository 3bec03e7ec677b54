package inventory

// deadLetterMultiple is the dead-letter-multiple variant: it rejects a
// poison message with multiple set, which rejects with it every earlier
// delivery of the channel not yet acked: the valid ones of its batch ahead
// of it go to the dead-letter queue too. Their effects still commit (the
// batch goes on), and their ack then names a delivery the broker no
// longer holds and closes the channel. A replay of the dead-letter queue
// delivers those events again; had the consumer died before its commit,
// nothing would have redelivered them. (The correct deadLetter rejects the
// poison alone.)
type deadLetterMultiple struct{ correctSteps }

func (s deadLetterMultiple) deadLetter(items []*item) { s.nackPoison(items, true) }
