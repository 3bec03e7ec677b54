package fault

import (
	"testing"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/stretchr/testify/assert"
)

// A queue whose overflow rejects publishes refuses them once full; one
// without a limit, or that drops its oldest message instead, never can,
// and the wait says so at once rather than wait out its bound.
func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		q        history.QueueInfo
		refusing bool
		never    string
	}{
		{"quorum filling", history.QueueInfo{Type: "quorum", Ready: 3, MaxLength: 5, Overflow: "reject-publish"}, false, ""},
		{"quorum over its limit", history.QueueInfo{Type: "quorum", Ready: 6, MaxLength: 5, Overflow: "reject-publish"}, true, ""},
		{"classic at its limit", history.QueueInfo{Type: "classic", Ready: 5, MaxLength: 5, Overflow: "reject-publish-dlx"}, true, ""},
		{"no limit", history.QueueInfo{Type: "quorum", Ready: 60, Overflow: "reject-publish"}, false, "has no length limit"},
		{"drops its head", history.QueueInfo{Type: "quorum", Ready: 60, MaxLength: 5, Overflow: "drop-head"}, false, "overflows by drop-head"},
		{"default overflow", history.QueueInfo{Type: "classic", Ready: 60, MaxLength: 5}, false, "drop-head, the default"},
	} {
		refusing, never := refusal(tc.q)
		assert.Equal(t, tc.refusing, refusing, tc.name)
		if tc.never == "" {
			assert.Empty(t, never, tc.name)
		} else {
			assert.Contains(t, never, tc.never, tc.name)
		}
	}
}
