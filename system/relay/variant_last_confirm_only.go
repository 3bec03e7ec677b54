package relay

// lastConfirmOnly is the last-confirm-only variant: the relay waits for
// the confirm of a batch's last publish and takes its answer for every row
// of the batch, as if the broker's confirms were cumulative. RabbitMQ
// acks with multiple set, but it nacks a refused publish on its own (a
// quorum queue full with reject-publish refuses some publishes of a batch
// and takes later ones once the consumer made room), so a nacked row
// ahead of a confirmed last is marked Published: lost.
func lastConfirmOnly(g *Guards) { g.EachConfirm = false }

// lastAnswers gives every row of the batch the answer to its last publish.
func lastAnswers(flights []inFlight, acked map[string]bool) map[string]bool {
	last, ok := acked[flights[len(flights)-1].row.EventID]
	out := make(map[string]bool, len(flights))
	if !ok {
		return out
	}
	for _, f := range flights {
		out[f.row.EventID] = last
	}
	return out
}
