// Package workload drives the order service over HTTP: orders, and for
// aggregate workloads each order's created → paid → cancelled history.
// It retries through order-service crashes (a request that fails may or may
// not have committed: the checker reads the truth from the database).
package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Spec is the traffic to send.
type Spec struct {
	Orders      int // orders to create
	Concurrency int // clients at once
	// Events per order: 1 = order.created only; 3 = created → paid → cancelled.
	EventsPerOrder int
	// Pace spreads the orders over at least this long (0: as fast as they go).
	Pace time.Duration
	// StepDelay separates the events of one order (created → paid →
	// cancelled), so they are claimed in different batches.
	StepDelay time.Duration
}

// Stats is what the workload saw from the client side.
type Stats struct {
	Acknowledged int64 // requests answered 201
	Failed       int64 // requests that failed (connection refused, 5xx); retried
	Rejected     int64 // 4xx answers (a bug in the workload: they are not retried)
}

// Runner sends a Spec to one order service.
type Runner struct {
	spec   Spec
	addr   func() string // current address of the order service (it moves on restart)
	client *http.Client
	rng    *rand.Rand
	rngMu  sync.Mutex

	acked    atomic.Int64
	failed   atomic.Int64
	rejected atomic.Int64
	notify   chan struct{}
}

// New makes a runner; addr is asked before every request, so the runner
// follows an order service restarted on a new port.
func New(spec Spec, seed uint64, addr func() string) *Runner {
	if spec.Concurrency < 1 {
		spec.Concurrency = 1
	}
	if spec.EventsPerOrder < 1 {
		spec.EventsPerOrder = 1
	}
	return &Runner{
		spec:   spec,
		addr:   addr,
		client: &http.Client{Timeout: 10 * time.Second},
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		notify: make(chan struct{}, 1),
	}
}

// Acknowledged is the number of 201 answers so far.
func (r *Runner) Acknowledged() int64 { return r.acked.Load() }

// Stats reports the client-side counts.
func (r *Runner) Stats() Stats {
	return Stats{Acknowledged: r.acked.Load(), Failed: r.failed.Load(), Rejected: r.rejected.Load()}
}

// WaitAcknowledged blocks until n requests were acknowledged.
func (r *Runner) WaitAcknowledged(ctx context.Context, n int64) error {
	for r.acked.Load() < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %d acknowledged orders (have %d): %w", n, r.acked.Load(), ctx.Err())
		case <-r.notify:
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Run sends every order (and its later events) and returns when all were
// acknowledged or ctx ended.
func (r *Runner) Run(ctx context.Context) error {
	jobs := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, r.spec.Concurrency)
	for w := 0; w < r.spec.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := r.oneOrder(ctx, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	start := time.Now()
	var sendErr error
	for i := 0; i < r.spec.Orders; i++ {
		if r.spec.Pace > 0 {
			due := start.Add(r.spec.Pace * time.Duration(i) / time.Duration(r.spec.Orders))
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			}
		}
		select {
		case jobs <- i:
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

// oneOrder creates an order and walks its history.
func (r *Runner) oneOrder(ctx context.Context, i int) error {
	r.rngMu.Lock()
	amount := fmt.Sprintf("%d.%02d", 1+r.rng.IntN(500), r.rng.IntN(100))
	customer := fmt.Sprintf("C%05d", r.rng.IntN(100000))
	r.rngMu.Unlock()
	body, _ := json.Marshal(map[string]any{
		"customerId": customer, "amount": json.Number(amount), "currency": "CNY",
		"items": []map[string]any{{"sku": fmt.Sprintf("SKU-%d", i%17), "quantity": 1 + i%3}},
	})
	var created struct {
		OrderID string `json:"orderId"`
	}
	if err := r.post(ctx, "/orders", body, &created); err != nil {
		return err
	}
	steps := []string{"pay", "cancel"}
	for s := 0; s < r.spec.EventsPerOrder-1 && s < len(steps); s++ {
		if r.spec.StepDelay > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(r.spec.StepDelay):
			}
		}
		if err := r.post(ctx, "/orders/"+created.OrderID+"/"+steps[s], nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// post retries until a 201 (or a 409 for a state change that already
// committed before a crash) or ctx ends.
func (r *Runner) post(ctx context.Context, path string, body []byte, out any) error {
	delay := 20 * time.Millisecond
	for {
		status, data, err := r.try(ctx, path, body)
		switch {
		case err == nil && status == http.StatusCreated:
			r.acked.Add(1)
			select {
			case r.notify <- struct{}{}:
			default:
			}
			if out != nil {
				if err := json.Unmarshal(data, out); err != nil {
					return fmt.Errorf("POST %s: decode answer: %w", path, err)
				}
			}
			return nil
		case err == nil && status == http.StatusConflict && body == nil:
			// a state change retried after a crash that had committed it
			return nil
		case err == nil && status >= 400 && status < 500:
			r.rejected.Add(1)
			return fmt.Errorf("POST %s: %d %s", path, status, bytes.TrimSpace(data))
		}
		r.failed.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

func (r *Runner) try(ctx context.Context, path string, body []byte) (int, []byte, error) {
	addr := r.addr()
	if addr == "" {
		return 0, nil, fmt.Errorf("order service not running")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, data, err
}
