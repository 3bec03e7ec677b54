package history

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/faultline-dev/faultline/protocol"
)

// A record holds a source only where it kept that section: an event log
// by the roles read, the audit trail's status only where it has one; the
// commits have no section and count as observed.
func TestObserved(t *testing.T) {
	blind := &Record{}
	full := &Record{LogRoles: map[string]bool{protocol.Relay: true}, Outbox: []OutboxRow{}, DeadLetter: &DeadLetterQueue{}, Audit: &AuditTrail{}, Tap: map[string]int{}}
	noStatus := &Record{Audit: &AuditTrail{NoStatus: true}}
	for _, tc := range []struct {
		source      Source
		blind, full bool
	}{
		{SourceProducerLog, false, false},
		{SourceRelayLog, false, true},
		{SourceConsumerLog, false, false},
		{SourceOutbox, false, true},
		{SourceDLQ, false, true},
		{SourceAudit, false, true},
		{SourceAuditStatus, false, true},
		{SourceTap, false, true},
		{SourceCommits, true, true},
	} {
		assert.Equal(t, tc.blind, blind.Observed(tc.source), "blind: %s", tc.source)
		assert.Equal(t, tc.full, full.Observed(tc.source), "full: %s", tc.source)
	}
	assert.True(t, noStatus.Observed(SourceAudit))
	assert.False(t, noStatus.Observed(SourceAuditStatus))
}

func TestLogSource(t *testing.T) {
	assert.Equal(t, SourceProducerLog, LogSource(protocol.Producer))
	assert.Equal(t, SourceRelayLog, LogSource(protocol.Relay))
	assert.Equal(t, SourceConsumerLog, LogSource(protocol.Consumer))
}
