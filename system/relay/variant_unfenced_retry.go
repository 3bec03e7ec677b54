package relay

// unfencedRetry is the unfenced-retry variant: the retry write (and the
// Failed write past the budget) no longer carries the claim id
// (store.unfencedRetry), while the Published write keeps it. A relay held
// past its lease with returns or nacks to record (relay.before-retry)
// overwrites the rows another claim now holds: it releases them to Pending,
// or fails them, under the claim that took them.
func unfencedRetry(g *Guards) { g.FenceRetries = false }
