package observe

import (
	"context"
	"fmt"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// Ends is what reading a run's end state needs from the run besides its
// target: its processes' event logs and names, and the faults' record.
type Ends struct {
	// LogPaths are the event logs of the processes that write one.
	LogPaths []string
	// LogRoles are the roles whose processes write an event log.
	LogRoles map[string]bool
	// Windows translate each process's own crash point names into the
	// protocol's windows: instance → its point name → window.
	Windows map[string]map[string]string
	// Instances maps the role references scenarios use ("relay-1",
	// "consumer") to the run's instance names, which its logs carry.
	Instances map[history.Ref]string
	// Unbound are the spans of the run in which faultline had removed the
	// target queue's bindings, from the faults' own record.
	Unbound []history.Interval
	// OutageUnopened says why an outage judged by the relays' retries
	// ended without showing their shape ("" if none did).
	OutageUnopened string
	// Queued reads, without taking them, the messages still in the
	// target's queue. Only once the processes have stopped: what a consumer
	// held unacked is ready again then.
	Queued bool
}

// End reads the run's end state: the target's tables through its contract,
// the target queue's counters, the messages left in the queue (when
// asked), a log relay's slot, the section of every source that keeps one
// (the dead-letter queue, the audit trail, the tap...: recordAll), and the
// event logs, merged in time order.
func (w *Watch) End(ctx context.Context, e Ends) (*history.Record, error) {
	o := &history.Record{ByEvent: map[string][]eventlog.Entry{}, LogRoles: e.LogRoles, Instances: e.Instances, Unbound: e.Unbound, OutageUnopened: e.OutageUnopened}
	if err := ReadContract(ctx, w.run.DB, w.run.Target.Contract, w.run.Target.Relay.Model, o); err != nil {
		return nil, err
	}
	w.readRelay(o)
	var err error
	if o.Queue, err = w.Queue(ctx, w.run.Target.Topology.Queue); err != nil {
		return nil, err
	}
	if e.Queued {
		if o.Queued, err = w.readQueued(ctx); err != nil {
			return nil, err
		}
		if o.Queued == nil {
			o.Queued = map[string]int{}
		}
	}
	if w.run.Target.Relay.Model == history.ModelLog {
		confirmed, ok, err := w.readSlot(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			o.Slot = &history.LogSlot{Confirmed: confirmed}
		}
	}
	if err := w.recordAll(ctx, o); err != nil {
		return nil, err
	}
	o.Log, err = ReadLogs(e.LogPaths, e.Windows)
	if err != nil {
		return nil, err
	}
	for _, entry := range o.Log {
		if entry.EventID != "" {
			o.ByEvent[entry.EventID] = append(o.ByEvent[entry.EventID], entry)
		}
	}
	return o, nil
}

// readSlot reads a log relay's slot's confirmed position, as bytes from
// 0/0 (infra.LogSlots): ok is false where there is none or several, or it
// has confirmed nothing yet.
func (w *Watch) readSlot(ctx context.Context) (confirmed int64, ok bool, err error) {
	pool, found := w.run.DB[w.run.Target.Observe.Outbox.Database]
	if !found {
		return 0, false, nil
	}
	slot, ok, err := infra.RelaySlot(ctx, pool)
	if err != nil {
		return 0, false, fmt.Errorf("the relay's slot: %w", err)
	}
	return slot.ConfirmedBytes, ok, nil
}
