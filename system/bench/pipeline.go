package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/eventlog"

	"github.com/faultline-dev/faultline/harness/ports"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/workload"
)

// The pipeline's own programs, run as real processes straight against
// PostgreSQL and RabbitMQ (no Toxiproxy: nothing is attacked here). They
// are the executables the reference target's build step puts in its build
// folder; the bench starts them with its own flags (the programs' production
// defaults), not the target file's commands, which are tuned for runs of
// seconds.

// The programs in the build folder (system/faultline.yaml's build step).
const (
	progOrder     = "order"
	progRelay     = "relay"
	progInventory = "inventory"
)

// relayArgs start a relay with its production defaults, except the poll
// interval: an idle relay looks for work every 20 ms instead of 200 ms, so
// every instance starts within 20 ms of the rows' commit and the figure is
// the relay's throughput, not its idle wait.
func relayArgs(st *stage, name string, extra []string) []string {
	return append([]string{"--db-url", st.ordersURL, "--amqp-url", st.amqpURL, "--instance", name, "--poll-interval", "20ms"}, extra...)
}

// inventoryArgs start the consumer with its production defaults (prefetch
// 64, 32 deliveries per transaction); the inbox cleanup is off.
func inventoryArgs(st *stage, extra []string) []string {
	return append([]string{"--db-url", st.inventoryURL, "--amqp-url", st.amqpURL, "--cleanup-interval", "0s"}, extra...)
}

// orderArgs start the order service with its production defaults.
func orderArgs(st *stage) []string {
	return []string{"--db-url", st.ordersURL, "--instance", "order"}
}

// Flags are the programs to run and the flags added to their defaults.
type Flags struct {
	Programs  Programs
	Relay     []string // e.g. --batch-size 500
	Inventory []string // e.g. --workers 1
}

// processes starts the pipeline's programs of one repetition in dir.
type processes struct {
	sup   *supervisor.Supervisor
	prog  Programs
	ports *ports.Allocator // the processes' addresses, freed with them
}

func newProcesses(dir string, prog Programs) (*processes, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("process folder: %w", err)
	}
	return &processes{sup: supervisor.New(dir, nil), prog: prog, ports: ports.New()}, nil
}

// start runs program (order, relay or inventory) as name with args, its
// event log in the repetition's folder and its control server (the order
// service's one server: API, health and control) on a fixed free loopback
// address, and waits until its /healthz answers 200.
func (p *processes) start(ctx context.Context, name, program string, args []string) (*supervisor.Process, error) {
	addr, err := p.ports.Addr()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	role, addrFlag := protocol.Relay, "--control-addr"
	switch program {
	case progOrder:
		role, addrFlag = protocol.Producer, "--listen"
	case progInventory:
		role = protocol.Consumer
	}
	events := p.sup.EventLogPath(name)
	cmd := append([]string{filepath.Join(p.prog.Dir, program), "--event-log", events, addrFlag, addr}, args...)
	proc, err := p.sup.Start(ctx, supervisor.Spec{
		Name: name, Role: role, Command: cmd, EventLog: events, Control: addr,
		Ready: supervisor.Ready{HTTP: "http://" + addr + "/healthz"},
	})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return proc, nil
}

func (p *processes) stop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	_ = p.sup.StopAll(ctx)
	p.ports.Close()
}

// span reads the event logs of the named processes and returns the time
// of the first line of event first and of the last line of event last, and
// how many lines of event last there were.
func (p *processes) span(first, last string, names ...string) (from, to time.Time, n int, err error) {
	paths := p.sup.EventLogPaths()
	for _, name := range names {
		entries, err := eventlog.ReadFile(paths[name])
		if err != nil {
			return from, to, n, fmt.Errorf("read %s's event log: %w", name, err)
		}
		for _, e := range entries {
			if e.Event == first && (from.IsZero() || e.Time.Before(from)) {
				from = e.Time
			}
			if e.Event == last {
				n++
				if e.Time.After(to) {
					to = e.Time
				}
			}
		}
	}
	return from, to, n, nil
}

// spanOf is span once the logs hold at least want last events, or as they
// are after a few seconds.
func (p *processes) spanOf(ctx context.Context, first, last string, want int, names ...string) (from, to time.Time, n int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		from, to, n, err = p.span(first, last, names...)
		if err != nil || n >= want {
			return from, to, n, err
		}
		select {
		case <-ctx.Done():
			return from, to, n, nil
		case <-t.C:
		}
	}
}

// measureRelay: instances relays, idle on an empty outbox, then the events
// committed as Pending rows in one transaction. The time runs from the
// commit to the last row marked Published.
func measureRelay(ctx context.Context, st *stage, dir string, flags Flags, events []event, instances int) (Sample, error) {
	procs, err := newProcesses(dir, flags.Programs)
	if err != nil {
		return Sample{}, err
	}
	defer procs.stop(ctx)
	var names []string
	for i := 1; i <= instances; i++ {
		name := fmt.Sprintf("relay-%d", i)
		names = append(names, name)
		if _, err := procs.start(ctx, name, progRelay, relayArgs(st, name, flags.Relay)); err != nil {
			return Sample{}, err
		}
	}
	if err := st.seedOutbox(ctx, events); err != nil {
		return Sample{}, err
	}
	start := time.Now()
	if err := waitDone(ctx, st.orders, "every outbox row Published", waitLimit(len(events)),
		`SELECT NOT EXISTS (SELECT 1 FROM outbox_messages WHERE status IN ('Pending', 'Processing'))`); err != nil {
		return Sample{}, err
	}
	// A relay writes its marked line after the commit the query saw: wait
	// for the logs to catch up.
	_, end, marked, err := procs.spanOf(ctx, eventlog.Claimed, eventlog.Marked, len(events), names...)
	if err != nil {
		return Sample{}, err
	}
	if marked != len(events) {
		return Sample{}, fmt.Errorf("relay: %d rows marked Published in the logs, want %d (a row published twice is not throughput)", marked, len(events))
	}
	return newSample(len(events), end.Sub(start)), nil
}

// measureConsumer: the events already queued, then the consumer started.
// The time runs from its first delivery to its last ack (each ack after
// the commit of the inbox row and the reservation).
func measureConsumer(ctx context.Context, st *stage, dir string, flags Flags, events []event) (Sample, error) {
	if _, err := publishRaw(ctx, st.amqpURL, events); err != nil {
		return Sample{}, fmt.Errorf("queue the events: %w", err)
	}
	procs, err := newProcesses(dir, flags.Programs)
	if err != nil {
		return Sample{}, err
	}
	defer procs.stop(ctx)
	if _, err := procs.start(ctx, "inventory", progInventory, inventoryArgs(st, flags.Inventory)); err != nil {
		return Sample{}, err
	}
	from, to, err := procs.waitReserved(ctx, st, len(events))
	if err != nil {
		return Sample{}, err
	}
	return newSample(len(events), to.Sub(from)), nil
}

// waitReserved waits until the consumer reserved n events and returns the
// times of its first delivery and of its last ack, checking it acked them all.
func (p *processes) waitReserved(ctx context.Context, st *stage, n int) (first, last time.Time, err error) {
	if err := waitDone(ctx, st.inventory, "every event reserved", waitLimit(n),
		`SELECT count(*) >= $1 FROM inventory_reservations`, n); err != nil {
		return first, last, err
	}
	// The consumer acks (and logs it) after the commit the count above saw.
	first, last, acked, err := p.spanOf(ctx, eventlog.Delivered, eventlog.Acked, n, "inventory")
	if err != nil {
		return first, last, err
	}
	if acked < n {
		return first, last, fmt.Errorf("consumer: %d acks in the log, want %d", acked, n)
	}
	return first, last, nil
}

// measureEndToEnd: the order service, relays and the consumer running,
// then orders sent over HTTP as fast as clients get answers. The time runs
// from the first order committed to the last reservation acked.
func measureEndToEnd(ctx context.Context, st *stage, dir string, flags Flags, orders, relays, clients int, seed uint64) (Sample, error) {
	procs, err := newProcesses(dir, flags.Programs)
	if err != nil {
		return Sample{}, err
	}
	defer procs.stop(ctx)
	if _, err := procs.start(ctx, "inventory", progInventory, inventoryArgs(st, flags.Inventory)); err != nil {
		return Sample{}, err
	}
	for i := 1; i <= relays; i++ {
		name := fmt.Sprintf("relay-%d", i)
		if _, err := procs.start(ctx, name, progRelay, relayArgs(st, name, flags.Relay)); err != nil {
			return Sample{}, err
		}
	}
	order, err := procs.start(ctx, "order", progOrder, orderArgs(st))
	if err != nil {
		return Sample{}, err
	}
	wl := workload.New(workload.Spec{Orders: orders, Concurrency: clients}, flags.Programs.Workload, seed, order.ControlAddr)
	if err := wl.Run(ctx); err != nil {
		return Sample{}, fmt.Errorf("orders: %w", err)
	}
	if st := wl.Stats(); st.Acknowledged != int64(orders) {
		return Sample{}, fmt.Errorf("orders: %d acknowledged of %d (%d failed, %d rejected)", st.Acknowledged, orders, st.Failed, st.Rejected)
	}
	from, _, _, err := procs.span(eventlog.Committed, eventlog.Committed, "order")
	if err != nil {
		return Sample{}, err
	}
	_, to, err := procs.waitReserved(ctx, st, orders)
	if err != nil {
		return Sample{}, err
	}
	return newSample(orders, to.Sub(from)), nil
}

// waitLimit bounds a measurement's wait: generous (100 events/s at worst)
// so a slow machine is measured rather than failed, but a stuck pipeline
// still ends the run.
func waitLimit(events int) time.Duration {
	return max(time.Minute, time.Duration(events)*10*time.Millisecond)
}

// procDir is a repetition's folder for process logs.
func procDir(root, name string, rep int) string {
	return filepath.Join(root, fmt.Sprintf("%s-%d", name, rep))
}
