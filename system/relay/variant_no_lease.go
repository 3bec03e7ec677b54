package relay

// noLease is the no-lease variant: a Processing row is never claimed again
// (store.noExpiry), so the rows of a relay that died holding them stay
// Processing for ever and their events are lost.
func noLease(g *Guards) { g.LeaseExpiry = false }
