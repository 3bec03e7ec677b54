package relay

// readsByID is the reads-by-id variant: the relay reads the outbox past the
// last bigserial id it saw (store.byID) instead of claiming rows by their
// status, and publishes without a claim (so its status writes carry none).
// A row whose transaction commits after a later row's is behind the
// position when it becomes visible, and is never published.
func readsByID(g *Guards) { g.ClaimByStatus = false }
