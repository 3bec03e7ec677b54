// Package fault holds the faults a scenario injects. A fault is a value
// with a description and an Inject; each kind is one small file. Inject
// waits for its trigger, does its damage, undoes it where that is part of
// the fault (restart, resume, toxic removed), and reports what happened.
package fault

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"faultline/harness/infra"
	"faultline/harness/result"
	"faultline/harness/supervisor"
	"faultline/proxies"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// Fault is one injected fault.
type Fault interface {
	// Describe says what the fault will do, before it happens.
	Describe() result.Fault
	// Inject waits for the trigger, injects, recovers, and reports.
	Inject(ctx context.Context, env *Env) result.Fault
}

// StartArmer is a fault armed in a process's environment at start.
type StartArmer interface {
	StartEnv(process string) []string
}

// Needs is a fault that needs a capability of the infrastructure.
type Needs interface {
	Needs() []string
}

// Capabilities a fault may need.
const (
	CapBrokerRestart = "broker-restart"
)

// Env is what a fault may touch: the scenario's processes, links, broker.
type Env struct {
	Processes *supervisor.Supervisor
	Links     map[string]*proxies.Link
	Infra     infra.Infra
	VHost     string
	OrdersDB  *pgxpool.Pool
	// Acknowledged reports how many orders the workload has had answered.
	Acknowledged func() int64
	// Deadline bounds how long a fault waits for its window to open.
	Deadline time.Duration
	Logf     func(format string, args ...any)
}

// Trigger says when a fault fires: after the workload has had AfterOrders
// orders acknowledged, plus Delay.
type Trigger struct {
	AfterOrders int64
	Delay       time.Duration
}

func (t Trigger) String() string {
	s := fmt.Sprintf("after %d orders", t.AfterOrders)
	if t.Delay > 0 {
		s += " + " + t.Delay.String()
	}
	return s
}

// Wait blocks until the trigger fires.
func (env *Env) Wait(ctx context.Context, t Trigger) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for env.Acknowledged() < t.AfterOrders {
		select {
		case <-ctx.Done():
			return fmt.Errorf("trigger %s: %w", t, ctx.Err())
		case <-tick.C:
		}
	}
	return pause(ctx, t.Delay)
}

// pause waits d — a scheduled duration of a fault, not a stand-in for a
// condition.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Process finds a process of the scenario.
func (env *Env) Process(name string) (*supervisor.Process, error) {
	p, ok := env.Processes.Process(name)
	if !ok {
		return nil, fmt.Errorf("no process %q in this scenario", name)
	}
	return p, nil
}

// Link finds a link of the scenario.
func (env *Env) Link(name string) (*proxies.Link, error) {
	l, ok := env.Links[name]
	if !ok {
		return nil, fmt.Errorf("no link %q in this scenario", name)
	}
	return l, nil
}

// WaitLog polls a process's event log until an entry matches, up to the
// fault deadline.
func (env *Env) WaitLog(ctx context.Context, process string, match func(eventlog.Entry) bool) (eventlog.Entry, error) {
	p, err := env.Process(process)
	if err != nil {
		return eventlog.Entry{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, env.Deadline)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var offset int64
	for {
		entries, next, err := readFrom(p.EventLogPath(), offset)
		if err == nil {
			offset = next
			for _, e := range entries {
				if match(e) {
					return e, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return eventlog.Entry{}, fmt.Errorf("no matching line in %s's event log within %s", process, env.Deadline)
		case <-tick.C:
		}
	}
}

// readFrom reads whole lines of an event log from offset.
func readFrom(path string, offset int64) ([]eventlog.Entry, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, offset, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return nil, offset, err
	}
	var out []eventlog.Entry
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break // a partial last line is read next time
		}
		offset += int64(len(line))
		entries, perr := eventlog.Read(strings.NewReader(line))
		if perr == nil {
			out = append(out, entries...)
		}
	}
	return out, offset, nil
}

// Admin opens an AMQP channel straight to the scenario's vhost (not through
// a proxy) for faults that change the topology or publish themselves.
// The broker may be restarting (another fault of the same schedule): the
// dial is retried until the fault deadline.
func (env *Env) Admin(ctx context.Context) (*amqp.Connection, *amqp.Channel, error) {
	deadline := time.Now().Add(env.Deadline)
	var conn *amqp.Connection
	var err error
	for {
		conn, err = amqp.DialConfig(env.Infra.AMQPURL(env.VHost), amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("admin connection: %w", err)
		}
		if perr := pause(ctx, 200*time.Millisecond); perr != nil {
			return nil, nil, fmt.Errorf("admin connection: %w (last error: %v)", perr, err)
		}
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("admin channel: %w", err)
	}
	return conn, ch, ctx.Err()
}

// record fills the common fields of a fault's result.
func record(f Fault, start time.Time, hit bool, err error) result.Fault {
	r := f.Describe()
	r.Start, r.End, r.Hit = start, time.Now(), hit
	if err != nil {
		r.Error = err.Error()
	}
	return r
}
