package relay

// noMandatory is the no-mandatory variant: it publishes without mandatory,
// so the broker drops an unroutable message, confirms it anyway, and the
// row is marked Published: the event is lost.
func noMandatory(g *Guards) { g.Mandatory = false }
