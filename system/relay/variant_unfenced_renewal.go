package relay

// unfencedRenewal is the unfenced-renewal variant: the --renew heartbeat
// extends locked_until without the claim id (store.unfencedRenewal), so a
// relay whose claim was taken over never sees the claim lost: it keeps
// renewing, and "holding", the rows another claim now holds.
func unfencedRenewal(g *Guards) { g.FenceRenewal = false }
