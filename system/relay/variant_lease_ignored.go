package relay

// leaseIgnored is the lease-ignored variant: a Processing row is claimed
// whatever its lease (store.ignoreLease), so a relay takes the rows
// another relay holds while it is still publishing them. The claim id
// still fences the holder's late writes: nothing is lost, but each such
// row goes out twice, and the article's promise to relays that run side
// by side (a row is one relay's until its lease runs out) is broken.
func leaseIgnored(g *Guards) { g.LeaseHonoured = false }
