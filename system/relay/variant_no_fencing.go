package relay

// noFencing is the no-fencing variant: status writes no longer carry the
// claim id (store.unfenced), so a relay whose lease ran out overwrites rows
// another claim now holds.
func noFencing(g *Guards) { g.FenceByClaimID = false }
