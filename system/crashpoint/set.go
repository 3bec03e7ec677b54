package crashpoint

import (
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// Set is the protocol's crash point set; the reference adds only its
// catalogue of names.
type Set = crashpoint.Set

// EnvVar arms crash points at start (the protocol's FAULTLINE_CRASHPOINTS).
const EnvVar = crashpoint.EnvVar

// NewSet makes the crash points of one of the reference's programs
// (order, relay, inventory): the catalogue's points of that process.
func NewSet(process string, log *eventlog.Log) *Set {
	var names []string
	for _, p := range Catalogue() {
		if p.Process == process {
			names = append(names, p.Name)
		}
	}
	return crashpoint.NewSet(process, log, names...)
}

// The protocol's actions.
const (
	Kill  = crashpoint.Kill
	Pause = crashpoint.Pause
	Delay = crashpoint.Delay
)
