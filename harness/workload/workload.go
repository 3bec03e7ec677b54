// Package workload drives a target's producer over HTTP, as its target file
// says: one request creates a business fact (its id read from the answer),
// and for aggregate workloads the follow-up steps of the same aggregate.
// It retries through producer crashes (a request that fails may or may not
// have committed: the checker reads the truth from the database).
package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faultline-dev/faultline/harness/poll"
	"github.com/faultline-dev/faultline/harness/safe"
	"github.com/faultline-dev/faultline/harness/target"
)

// Spec is the traffic to send.
type Spec struct {
	Orders      int // facts to create
	Concurrency int // clients at once
	// Events per fact: 1 = the create request only; 3 = create and the
	// target's first two follow-up steps.
	EventsPerOrder int
	// Pace spreads the orders over at least this long (0: as fast as they go).
	Pace time.Duration
	// StepDelay separates the events of one order (created → paid →
	// cancelled), so they are claimed in different batches.
	StepDelay time.Duration
	// AfterFaults more orders are sent, as fast as they go, once every
	// fault of the run has ended (RunAfterFaults): a process that must be
	// seen working again after a fault has work to do then, however long
	// the fault took against the paced orders.
	AfterFaults int
	// Profile names the traffic's shape (Paced where empty; profile.go).
	Profile string
	// Hold, when set, is the backlog the traffic piles up before the
	// pipeline may work it off.
	Hold *Hold
	// Sustain, when set, makes Orders a probe and sends load near what
	// the pipeline carried in it (Runner.Run).
	Sustain *Sustain
}

// Sustain is load held near what the pipeline can carry, measured by the
// run: the Spec's Orders go out at once as a probe; once every event they
// made has taken effect (Runner.Carried), the pipeline's rate is those
// events over the time from the first request; then Share of that rate
// is sent, paced, for For.
type Sustain struct {
	Share float64
	For   time.Duration
}

// carriedPoll is how often the probe's effects are counted.
const carriedPoll = 20 * time.Millisecond

// Steady is the traffic most runs send: 120 orders over 5 s from four
// clients, so that faults land mid-stream.
func Steady() Spec {
	return Spec{Profile: Paced, Orders: 120, Concurrency: 4, Pace: 5 * time.Second}
}

// Stats is what the workload saw from the client side.
type Stats struct {
	Acknowledged int64 // requests answered 201
	Failed       int64 // requests that failed (connection refused, 5xx); retried
	Rejected     int64 // 4xx answers (a bug in the workload: they are not retried)
	// MaxInFlight is the most requests the clients had open at once.
	MaxInFlight int64
	// Carried is the events a second the pipeline took to effect in a
	// sustained profile's probe, and Sent the events a second answered
	// after it (0 for other profiles).
	Carried, Sent float64
}

// Runner sends a Spec to a producer.
type Runner struct {
	spec   Spec
	reqs   target.Workload
	addr   func() string // current address of a producer ("" while none runs)
	client *http.Client
	rng    *rand.Rand
	rngMu  sync.Mutex

	acked                 atomic.Int64
	failed                atomic.Int64
	rejected              atomic.Int64
	inFlight, maxInFlight atomic.Int64

	// byID counts, per fact id the producer gave (the create's answer,
	// field workload.create.id), the requests of that aggregate it
	// answered ok: each is a fact the client was told exists.
	byIDMu sync.Mutex
	byID   map[string]int64

	// carried counts the events that took effect (Carried), for a
	// sustained profile; carriedRate and sentRate are its figures.
	carried               func(context.Context) (int, error)
	carriedRate, sentRate atomic.Uint64 // math.Float64bits
	sustained             int           // orders sent after the probe
}

// Carried gives the runner the count of events that took effect, which a
// sustained profile measures the pipeline by.
func (r *Runner) Carried(count func(context.Context) (int, error)) { r.carried = count }

// New makes a runner of the target's requests; addr is asked before every
// request, so the runner can spread requests over the producers and skip
// one that is down.
func New(spec Spec, reqs target.Workload, seed uint64, addr func() string) *Runner {
	if spec.Concurrency < 1 {
		spec.Concurrency = 1
	}
	if spec.EventsPerOrder < 1 {
		spec.EventsPerOrder = 1
	}
	return &Runner{
		spec:   spec,
		reqs:   reqs,
		addr:   addr,
		client: &http.Client{Timeout: 10 * time.Second},
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// Acknowledged is the number of 201 answers so far.
func (r *Runner) Acknowledged() int64 { return r.acked.Load() }

// AcknowledgedByID is, per fact id the producer gave in its create
// answers, how many requests of that aggregate (the create and each step)
// it answered ok; nil when the target's create gives no id
// (workload.create.id), so acknowledgements are known only as a count.
func (r *Runner) AcknowledgedByID() map[string]int64 {
	if r.reqs.Create.ID == "" {
		return nil
	}
	r.byIDMu.Lock()
	defer r.byIDMu.Unlock()
	out := make(map[string]int64, len(r.byID))
	for id, n := range r.byID {
		out[id] = n
	}
	return out
}

// acknowledge records one ok answer for the aggregate id (none: "").
func (r *Runner) acknowledge(id string) {
	r.acked.Add(1)
	if id == "" {
		return
	}
	r.byIDMu.Lock()
	if r.byID == nil {
		r.byID = map[string]int64{}
	}
	r.byID[id]++
	r.byIDMu.Unlock()
}

// Stats reports the client-side counts.
func (r *Runner) Stats() Stats {
	return Stats{Acknowledged: r.acked.Load(), Failed: r.failed.Load(), Rejected: r.rejected.Load(), MaxInFlight: r.maxInFlight.Load(),
		Carried: math.Float64frombits(r.carriedRate.Load()), Sent: math.Float64frombits(r.sentRate.Load())}
}

// Run sends every order (and its later events) and returns when all were
// acknowledged or ctx ended.
func (r *Runner) Run(ctx context.Context) error {
	if s := r.spec.Sustain; s != nil {
		return r.sustain(ctx, *s)
	}
	return r.run(ctx, 0, r.spec.Orders, r.spec.Pace)
}

// waitCarried counts the events that took effect until want did, at most
// within, and returns the last count.
func (r *Runner) waitCarried(ctx context.Context, want int, within time.Duration) int {
	took := 0
	// A count that failed to read is asked again; past within, what was
	// counted by then is the answer.
	_ = poll.Until(ctx, within, carriedPoll, func() (bool, error) {
		if n, err := r.carried(ctx); err == nil {
			took = n
		}
		return took >= want, nil
	})
	return took
}

// sustain sends the probe, measures what the pipeline carried, and sends
// Share of that rate for For. The probe's effects are waited for at most
// For past its last answer; a pipeline slower than that is measured by
// what it carried by then.
func (r *Runner) sustain(ctx context.Context, s Sustain) error {
	if r.carried == nil {
		return fmt.Errorf("workload %s: nothing counts the events that took effect", r.spec.ProfileName())
	}
	start := time.Now()
	if err := r.run(ctx, 0, r.spec.Orders, 0); err != nil {
		return err
	}
	want := int(r.acked.Load())
	took := r.waitCarried(ctx, want, s.For)
	if ctx.Err() != nil {
		return fmt.Errorf("workload: %w", ctx.Err())
	}
	rate := float64(min(took, want)) / time.Since(start).Seconds()
	r.carriedRate.Store(math.Float64bits(rate))
	per := float64(max(r.spec.EventsPerOrder, 1))
	orders := int(math.Ceil(s.Share * rate * s.For.Seconds() / per))
	if orders < 1 {
		return fmt.Errorf("workload %s: the probe's %d events took no effect within %s: nothing to sustain", r.spec.ProfileName(), want, s.For)
	}
	before, from := r.acked.Load(), time.Now()
	r.sustained = orders
	err := r.run(ctx, r.spec.Orders, orders, s.For)
	r.sentRate.Store(math.Float64bits(float64(r.acked.Load()-before) / time.Since(from).Seconds()))
	return err
}

// RunAfterFaults sends the spec's AfterFaults orders, numbered after the
// others, unpaced; the caller calls it once every fault has ended.
func (r *Runner) RunAfterFaults(ctx context.Context) error {
	return r.run(ctx, r.spec.Orders+r.sustained, r.spec.AfterFaults, 0)
}

// run sends count orders numbered from first, spread over pace.
func (r *Runner) run(ctx context.Context, first, count int, pace time.Duration) error {
	jobs := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, r.spec.Concurrency)
	for w := 0; w < r.spec.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A panic of a worker is its error: the run ends indeterminate
			// and the other workers drain the jobs.
			err := safe.Do("workload worker", func() error {
				for i := range jobs {
					if err := r.oneOrder(ctx, i); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				errs <- err
			}
		}()
	}
	start := time.Now()
	var sendErr error
	for i := 0; i < count; i++ {
		if pace > 0 {
			due := start.Add(pace * time.Duration(i) / time.Duration(count))
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			}
		}
		select {
		case jobs <- first + i:
			continue
		case <-ctx.Done():
			sendErr = ctx.Err()
		case err := <-errs:
			sendErr = err
		}
		break
	}
	close(jobs)
	wg.Wait()
	if sendErr != nil {
		return fmt.Errorf("workload: %w", sendErr)
	}
	select {
	case err := <-errs:
		return fmt.Errorf("workload: %w", err)
	default:
	}
	return nil
}

// random draws from the seeded generator.
func (r *Runner) random(lo, hi int) int {
	if hi < lo {
		lo, hi = hi, lo
	}
	r.rngMu.Lock()
	defer r.rngMu.Unlock()
	return lo + r.rng.IntN(hi-lo+1)
}

// oneOrder creates a fact and walks its follow-up steps.
func (r *Runner) oneOrder(ctx context.Context, i int) error {
	vals := target.WorkloadValues{N: i, Random: r.random}
	created, acked, err := r.send(ctx, r.reqs.Create, vals)
	if err != nil {
		return err
	}
	if r.reqs.Create.ID != "" {
		id, err := answerID(created, r.reqs.Create.ID)
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		vals.ID = id
	}
	if acked {
		r.acknowledge(vals.ID)
	}
	for s := 0; s < r.spec.EventsPerOrder-1 && s < len(r.reqs.Steps); s++ {
		if r.spec.StepDelay > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(r.spec.StepDelay):
			}
		}
		_, acked, err := r.send(ctx, r.reqs.Steps[s], vals)
		if err != nil {
			return err
		}
		if acked {
			r.acknowledge(vals.ID)
		}
	}
	return nil
}

// answerID reads the fact's id from a create answer: the JSON field named
// field, a string or a number, as its text (a number as written, so that a
// large integer id stays what the database holds).
func answerID(answer []byte, field string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil {
		return "", fmt.Errorf("decode answer %q: %w", truncate(answer), err)
	}
	id, ok := fields[field]
	if !ok {
		return "", fmt.Errorf("the answer %q has no field %q (workload.create.id)", truncate(answer), field)
	}
	switch id.(type) {
	case string, json.Number:
		return fmt.Sprint(id), nil
	}
	return "", fmt.Errorf("the answer %q: field %q (workload.create.id) is neither a string nor a number", truncate(answer), field)
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// send renders a request and retries it until one of its ok statuses (or
// a done status, meaning a retried step had committed before a crash) or
// ctx ends; it returns the answer's body and whether the status was an ok
// one (the caller acknowledges it).
func (r *Runner) send(ctx context.Context, req target.Request, vals target.WorkloadValues) ([]byte, bool, error) {
	path, err := req.Path.RenderWorkload(vals)
	if err != nil {
		return nil, false, err
	}
	var body []byte
	if !req.Body.IsZero() {
		b, err := req.Body.RenderWorkload(vals)
		if err != nil {
			return nil, false, err
		}
		body = []byte(b)
	}
	delay := 20 * time.Millisecond
	for {
		status, data, err := r.try(ctx, req, path, body)
		switch {
		case err == nil && slices.Contains(req.OK, status):
			return data, true, nil
		case err == nil && slices.Contains(req.Done, status):
			return data, false, nil
		case err == nil && status >= 400 && status < 500:
			r.rejected.Add(1)
			return nil, false, fmt.Errorf("%s %s: %d %s", req.Method, path, status, bytes.TrimSpace(data))
		}
		r.failed.Add(1)
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

func (r *Runner) try(ctx context.Context, spec target.Request, path string, body []byte) (int, []byte, error) {
	addr := r.addr()
	if addr == "" {
		return 0, nil, fmt.Errorf("no producer running")
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, spec.Method, "http://"+addr+path, rd)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range spec.Headers {
		req.Header.Set(k, v)
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	n := r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	for m := r.maxInFlight.Load(); n > m && !r.maxInFlight.CompareAndSwap(m, n); m = r.maxInFlight.Load() {
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, data, err
}
