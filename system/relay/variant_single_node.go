package relay

// singleNode is the single-node variant: the relay dials only the first
// address of --amqp-urls and, after losing it, keeps dialling that one
// address (broker.Pinned), never the cluster's other nodes. While that node
// is dead, cut off or frozen the relay publishes nothing: its rows wait in
// the outbox although the cluster could take them, and a node that stays
// away stalls the pipeline.
func singleNode(g *Guards) { g.Failover = false }
