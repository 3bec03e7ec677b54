package relay

// ownBatchReturnsOnly is the own-batch-returns-only variant: settling a
// batch, the relay keeps the returns of that batch and drops every other
// return it drained. With two batches in flight on one channel (the next
// published while the last awaits its confirms), the later batch's
// returns can come back before the earlier batch is settled; dropped
// there, the later batch finds its unroutable rows confirmed (a mandatory
// publish routed nowhere is confirmed after its return) with no return,
// and marks them Published: lost.
func ownBatchReturnsOnly(g *Guards) { g.KeepLaterReturns = false }
