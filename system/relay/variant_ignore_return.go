package relay

// ignoreReturn is the ignore-return variant: it still publishes with
// mandatory (the returns come and are logged), but a returned message's
// positive confirm marks it Published: the event is lost.
func ignoreReturn(g *Guards) { g.HonourReturns = false }
