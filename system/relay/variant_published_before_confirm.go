package relay

// publishedBeforeConfirm is the published-before-confirm variant: every row
// that was sent is marked Published right after the batch went out, without
// waiting for its confirm, so a nacked or never-delivered message is lost.
func publishedBeforeConfirm(g *Guards) { g.AwaitConfirm = false }
