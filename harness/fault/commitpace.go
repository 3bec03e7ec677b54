package fault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/protocol"
)

// pacer keeps relays that claim rows in step while the commit-order fault
// holds an insert: each keeps its own place, so the window opens only once
// every relay is past the held insert, and a relay whose polls land just
// before another's takes every later row as it commits, leaving the other
// never past it. While an insert is seen held (its number missing among
// the committed ones, a later one there), the relays that have written a
// later row are frozen (SIGSTOP) until every relay has, the held insert
// commits, or a relay has been frozen hold in all; then they are thawed.
// What it did is reported with the fault. It sees the relays' writes in
// the audit rows the commit-order fault reads to tell the held inserts
// what was read (tellReads), and steps with each read of them.
type pacer struct {
	mu          sync.Mutex // a step against end
	ended       bool       // end was called: no more steps
	env         *Env
	every, last int64 // every every-th insert up to last is held
	hold        time.Duration
	procs       map[string]*supervisor.Process // the relays, by name

	numbers map[string]int64 // eventId → its insert's number, once committed
	present map[int64]bool   // the insert numbers committed
	top     int64            // the highest committed
	wrote   map[string]int64 // relay → the highest insert number it wrote a row of

	since  map[string]time.Time     // relay → frozen since (frozen now)
	frozen map[string]time.Duration // relay → frozen in all
	times  map[string]int           // relay → times frozen
}

// newPacer is the pacer of the run's relays, or nil where there is no
// other relay to keep in step with (one relay, or relays sharing one
// place: an offset relay's group passes a held insert together) or no
// audit trail to see their writes in. A nil pacer does nothing.
func newPacer(env *Env, c CommitOrder) (*pacer, error) {
	if env.RelayModel == history.ModelOffset || env.Audit == nil {
		return nil, nil
	}
	p := &pacer{env: env, every: int64(c.Every), last: int64(c.Every * c.Holds), hold: c.Hold, procs: map[string]*supervisor.Process{},
		numbers: map[string]int64{}, present: map[int64]bool{}, wrote: map[string]int64{},
		since: map[string]time.Time{}, frozen: map[string]time.Duration{}, times: map[string]int{}}
	for n := 1; n <= env.Roles.Count(protocol.Relay); n++ {
		proc, err := env.Process(history.RefOf(protocol.Relay, n))
		if err != nil {
			return nil, err
		}
		p.procs[proc.Name()] = proc
	}
	if len(p.procs) < 2 {
		return nil, nil
	}
	return p, nil
}

// end thaws every relay the pacer froze and ends its steps; later calls
// do nothing.
func (p *pacer) end() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = true
	var errs []error
	for name := range p.since {
		errs = append(errs, p.thaw(name))
	}
	return errors.Join(errs...)
}

// step takes in the audit rows read since the last step and reads the
// inserts committed since then, freezes the relays past a held insert
// that another relay is not past, and thaws the others. An insert's
// number commits with its row, so a row a relay wrote has its number to be
// read; one without was inserted before the fault and is past nothing.
func (p *pacer) step(ctx context.Context, pool *pgxpool.Pool, audit []history.AuditRow) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return nil
	}
	rows, err := pool.Query(ctx, "SELECT ins, event_id FROM "+commitOrderInserts+" WHERE ins > $1 OR ins = ANY($2)", p.top, p.missing())
	if err != nil {
		return fmt.Errorf("read the inserts' numbers: %w", err)
	}
	for rows.Next() {
		var n int64
		var id string
		if err := rows.Scan(&n, &id); err != nil {
			rows.Close()
			return fmt.Errorf("read the inserts' numbers: %w", err)
		}
		p.numbers[id], p.present[n], p.top = n, true, max(p.top, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the inserts' numbers: %w", err)
	}
	for _, a := range audit {
		if n, ok := p.numbers[a.EventID]; ok && a.Op == "UPDATE" && p.procs[a.Writer] != nil {
			p.wrote[a.Writer] = max(p.wrote[a.Writer], n)
		}
	}

	freeze := p.toFreeze()
	var errs []error
	for name, proc := range p.procs {
		_, isFrozen := p.since[name]
		switch {
		case freeze[name] && !isFrozen:
			if proc.Frozen() {
				continue // another fault's freeze, not the pacer's to end
			}
			if err := proc.Pause(); err != nil && !errors.Is(err, supervisor.ErrNotRunning) {
				errs = append(errs, err)
				continue
			}
			p.since[name] = time.Now()
			p.times[name]++
			p.env.Logf("commit-order: %s frozen, past a held insert another relay is not past", name)
		case !freeze[name] && isFrozen:
			errs = append(errs, p.thaw(name))
		}
	}
	return errors.Join(errs...)
}

// toFreeze are the relays to keep frozen now: each past an insert seen
// held that another relay is not past, and frozen less than hold in all.
// The relay furthest behind is past whatever the others are not, so it
// is never frozen: some relay always runs.
func (p *pacer) toFreeze() map[string]bool {
	freeze := map[string]bool{}
	for _, n := range p.held() {
		var past []string
		for name := range p.procs {
			if p.wrote[name] > n {
				past = append(past, name)
			}
		}
		if len(past) == len(p.procs) {
			continue
		}
		for _, name := range past {
			if p.frozen[name]+p.frozenFor(name) < p.hold {
				freeze[name] = true
			}
		}
	}
	return freeze
}

// held are the numbers of the inserts seen held: due to be held, not
// committed, and a later insert committed.
func (p *pacer) held() []int64 {
	var out []int64
	for n := p.every; n <= p.last && n < p.top; n += p.every {
		if !p.present[n] {
			out = append(out, n)
		}
	}
	return out
}

// missing are the numbers below the highest committed that are not
// committed yet, to be read again.
func (p *pacer) missing() []int64 {
	var out []int64
	for n := int64(1); n < p.top; n++ {
		if !p.present[n] {
			out = append(out, n)
		}
	}
	return out
}

// frozenFor is how long the relay has been frozen this time (0: not now).
func (p *pacer) frozenFor(name string) time.Duration {
	if at, ok := p.since[name]; ok {
		return time.Since(at)
	}
	return 0
}

// thaw resumes a frozen relay and counts the time it was frozen.
func (p *pacer) thaw(name string) error {
	p.frozen[name] += p.frozenFor(name)
	delete(p.since, name)
	if err := p.procs[name].Resume(); err != nil && !errors.Is(err, supervisor.ErrNotRunning) {
		return err
	}
	return nil
}

// String says which relays were frozen, how often and for how long.
func (p *pacer) String() string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for name, n := range p.times {
		out = append(out, fmt.Sprintf("%s frozen %d times, %s in all", name, n, p.frozen[name].Round(time.Millisecond)))
	}
	if len(out) == 0 {
		return ""
	}
	slices.Sort(out)
	return "; kept in step (a relay past a held insert frozen until every relay was): " + strings.Join(out, ", ")
}
