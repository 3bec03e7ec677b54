package relay

// noBackoff is the no-backoff variant: a returned, nacked or unsent row is
// due again at once (next_attempt_at = now, Relay.retryAfter), so a short
// outage burns the whole retry budget in milliseconds and the events end
// Failed.
func noBackoff(g *Guards) { g.Backoff = false }
