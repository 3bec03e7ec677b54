package observe

import (
	"sort"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

func init() {
	for _, role := range []string{protocol.Producer, protocol.Relay, protocol.Consumer} {
		addSource(source{name: history.LogSource(role), when: AtEnd,
			offered: func(_ *target.Target, logs map[string]bool) bool { return logs[role] }})
	}
}

// ReadLogs reads and merges event logs into one timeline. A crash point
// line's point is translated from the process's own name into the
// protocol's window (windows: process → own name → window), so the
// timeline and the evidence speak of windows.
func ReadLogs(paths []string, windows map[string]map[string]string) ([]eventlog.Entry, error) {
	var all []eventlog.Entry
	for _, p := range paths {
		entries, err := eventlog.ReadFile(p)
		if err != nil {
			return nil, err
		}
		all = append(all, entries...)
	}
	for i := range all {
		e := &all[i]
		if e.Event != eventlog.CrashPoint || e.Point == "" {
			continue
		}
		if w, ok := windows[e.Process][e.Point]; ok {
			e.Point = w
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Time.Before(all[j].Time) })
	return all, nil
}
