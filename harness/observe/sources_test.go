package observe

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
)

// What a target offers follows from its file alone: a bare file offers
// the sources it needs nothing for, one with an outbox table watched, a
// status column, an exchange, a dead-letter queue and an outbox query
// offers those, and an event log only from the roles that write one.
func TestOffers(t *testing.T) {
	bare := &target.Target{}
	full := &target.Target{
		Contract: target.Contract{Outbox: &target.Query{SQL: "SELECT 1"}},
		Topology: target.Topology{Exchange: "events", DeadLetterQueue: "dlq"},
		Observe:  target.Observe{Outbox: target.Table{Name: "outbox", Status: "status"}},
	}
	logs := map[string]bool{protocol.Relay: true}
	for _, tc := range []struct {
		source     history.Source
		bare, full bool
	}{
		{history.SourceProducerLog, false, false},
		{history.SourceRelayLog, false, true},
		{history.SourceOutbox, false, true},
		{history.SourceDLQ, false, true},
		{history.SourceAudit, false, true},
		{history.SourceAuditStatus, false, true},
		{history.SourceTap, false, true},
		{history.SourceCommits, false, true},
		{history.SourceCommitsSeen, true, true},
		{history.SourcePublishes, false, true},
		{"a crystal ball", false, false},
	} {
		assert.Equal(t, tc.bare, Offers(bare, nil, tc.source), "bare: %s", tc.source)
		assert.Equal(t, tc.full, Offers(full, logs, tc.source), "full: %s", tc.source)
	}
}

// Every source of the record is in the table, read when its kind of
// source can be: the event logs, the contract's query and the dead-letter
// queue from what the run left, the triggers and the taps live, the audit
// status and the commits seen as part of another.
func TestWhenRead(t *testing.T) {
	for source, when := range map[history.Source]When{
		history.SourceProducerLog: AtEnd, history.SourceRelayLog: AtEnd, history.SourceConsumerLog: AtEnd,
		history.SourceOutbox: AtEnd, history.SourceDLQ: AtEnd,
		history.SourceAudit: Live, history.SourceTap: Live, history.SourceCommits: Live, history.SourcePublishes: Live, history.SourceRouted: Live,
		history.SourceAuditStatus: Derived, history.SourceCommitsSeen: Derived,
		"a crystal ball": 0,
	} {
		assert.Equal(t, when, WhenRead(source), "%s", source)
	}
}
