package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// list --target on an offset relay names its model, shows the re-timed
// relay windows with what they are timed by, and says why the ones the
// model lacks are not offered.
func TestListSaysHowRelayWindowsOpenOnTheModel(t *testing.T) {
	ref, err := os.ReadFile(filepath.Join("..", "..", "system", "faultline.yaml"))
	require.NoError(t, err)
	data := strings.Replace(string(ref), "relay:\n  model: claim\n", "relay:\n  model: offset\n  position: {database: orders, table: relay_offsets}\n", 1)
	data = strings.Replace(data, "contract:\n", "contract:\n  pending: {database: orders, sql: \"SELECT event_id FROM outbox_messages WHERE false\"}\n", 1)
	require.NotEqual(t, string(ref), data)
	path := filepath.Join(t.TempDir(), "faultline.yaml")
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"list", "--target", path}, &out, &errOut), errOut.String())
	assert.Contains(t, out.String(), "ON THIS RELAY (offset)")
	lines := linesByFirstWord(out.String())
	for _, tc := range []struct{ scenario, want string }{
		{"blackbox-relay-killed-at-claim", "blackbox.relay.position"},
		{"blackbox-relay-confirmed-not-marked", "blackbox.relay.publish"},
		{"blackbox-relay-frozen-past-lease", "re-timed for an offset relay: position marked, then frozen past a lease"},
		{"blackbox-relay-frozen-past-lease", "blackbox.relay.position"},
		{"relay-pause-past-lease", "as written"}, // the reference's relay maps its crash point
	} {
		assert.Contains(t, lines[tc.scenario], tc.want, tc.scenario)
	}
}

// linesByFirstWord maps each line of list's output to its first word (a
// scenario's name, on a scenario's line).
func linesByFirstWord(out string) map[string]string {
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if name, _, ok := strings.Cut(l, " "); ok {
			lines[name] = l
		}
	}
	return lines
}
