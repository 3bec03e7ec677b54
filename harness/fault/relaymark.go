package fault

import (
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
)

// relayMark is the write whose commit opens a relay's black-box window.
type relayMark struct {
	table, status string
	ok            bool
}

// relayMarkOf is that write on t's relay model: a claim (the outbox row
// set to Processing) where the relay claims by a status, a write to the
// position table of an offset relay, and none that faultline sees for a
// log relay or one with no status and no model said.
func relayMarkOf(t *target.Target) relayMark {
	switch {
	case t.StatusOutbox():
		return relayMark{history.TableOutbox, "Processing", true}
	case t.Relay.Model == history.ModelOffset && t.Relay.Position != nil:
		return relayMark{history.TablePosition, "", true}
	}
	return relayMark{}
}

// BlackBoxTable is BlackBoxTable on this surface's target: a relay's
// window opens at the write its relay model shows from outside.
func (s *Surface) BlackBoxTable(role string) (table, status string, ok bool) {
	if role == protocol.Relay {
		return s.relayMark.table, s.relayMark.status, s.relayMark.ok
	}
	return BlackBoxTable(role)
}
