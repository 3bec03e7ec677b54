package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
)

// TestTimelineDrawsInfrastructureState: what the faults read of the
// cluster and the database goes on lanes of their own, after the
// processes', each reading a mark at its time.
func TestTimelineDrawsInfrastructureState(t *testing.T) {
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	faults := []result.Fault{{Kind: "node-kill", Start: start.Add(time.Second), End: start.Add(3 * time.Second), Hit: true,
		States: []result.State{
			{At: start.Add(time.Second), Lane: "broker cluster", Kind: "down", Label: "n1 killed (SIGKILL)"},
			{At: start.Add(1500 * time.Millisecond), Lane: "broker cluster", Kind: "leader", Label: "n2 leads q"},
			{At: start.Add(2 * time.Second), Lane: "database", Kind: "promoted", Label: "standby promoted: 8192 bytes of WAL lost"},
		}}}
	tl := BuildTimeline(&history.Record{}, start, start.Add(5*time.Second), faults, nil)
	lanes := map[string]result.Lane{}
	for _, l := range tl.Lanes {
		lanes[l.Process] = l
	}
	require.Contains(t, lanes, "broker cluster")
	require.Contains(t, lanes, "database")
	assert.Equal(t, []result.Mark{{AtMS: 1000, Kind: "down", Label: "n1 killed (SIGKILL)"}, {AtMS: 1500, Kind: "leader", Label: "n2 leads q"}}, lanes["broker cluster"].Marks)
	assert.Equal(t, int64(2000), lanes["database"].Marks[0].AtMS)
}
