// Package bench is the reference pipeline's own benchmark (faultline
// bench). It measures what the pipeline's guards cost: the relay against
// the broker's ceiling and against a naive one-at-a-time relay, the
// consumer against the relay, and the whole pipeline end to end. Every
// figure is events per second, the median of a few repetitions with their
// min and max, and the verdict is a set of ratios between figures of the
// same run — never an absolute number, because the machines are shared
// and noisy.
//
// Each repetition gets its own databases and vhost on one infrastructure;
// the pipeline's programs (built by its target file's build step) run as
// real processes, straight against PostgreSQL and RabbitMQ.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/infra"
)

// Schema is the version of the bench.json contract.
const Schema = "github.com/faultline-dev/faultline/bench/v1"

// Figure names.
const (
	FigureRaw      = "raw"
	FigureNaive    = "naive-relay"
	FigureRelay    = "relay"
	FigureConsumer = "consumer"
	FigureEndToEnd = "end-to-end"
)

// FigureNames are the figures in the order they are measured.
func FigureNames() []string {
	return []string{FigureRaw, FigureNaive, FigureRelay, FigureConsumer, FigureEndToEnd}
}

// Options say how much to measure.
type Options struct {
	Events      int   // events per repetition of raw, relay, consumer and end to end (10,000)
	NaiveEvents int   // events per repetition of the naive relay (1,000: it is two orders slower)
	Reps        int   // repetitions of each figure (3)
	Relays      []int // relay instance counts ({1, 2, 4})
	Clients     int   // concurrent HTTP clients of the end-to-end run (32)
	// Only names the figures to measure (raw, naive-relay, relay, consumer,
	// end-to-end); empty: all. Ratios of figures not measured are 0.
	Only []string
	// RelayFlags and InventoryFlags are added to the programs' own
	// defaults (to measure a setting: --batch-size 500, --workers 1).
	RelayFlags, InventoryFlags []string
	// Dir holds the processes' logs while they run; it is removed after.
	Dir string
	// Log gets a line per repetition; nil discards.
	Log io.Writer
}

// Defaults are the issue's: 10,000 events, 3 repetitions, 1, 2 and 4 relays.
func Defaults() Options {
	return Options{Events: 10000, NaiveEvents: 1000, Reps: 3, Relays: []int{1, 2, 4}, Clients: 32}
}

// Validate rejects options that cannot be measured.
func (o Options) Validate() error {
	switch {
	case o.Events < 1:
		return fmt.Errorf("events must be at least 1, got %d", o.Events)
	case o.NaiveEvents < 1:
		return fmt.Errorf("naive events must be at least 1, got %d", o.NaiveEvents)
	case o.Reps < 1:
		return fmt.Errorf("repetitions must be at least 1, got %d", o.Reps)
	case len(o.Relays) == 0:
		return fmt.Errorf("no relay instance count")
	case o.Clients < 1:
		return fmt.Errorf("clients must be at least 1, got %d", o.Clients)
	}
	for _, name := range o.Only {
		if !slices.Contains(FigureNames(), name) {
			return fmt.Errorf("unknown figure %q (want one of %s)", name, strings.Join(FigureNames(), ", "))
		}
	}
	for _, n := range o.Relays {
		if n < 1 || n > 16 {
			return fmt.Errorf("relay instances must be 1..16, got %d", n)
		}
	}
	return nil
}

// Report is bench.json.
type Report struct {
	Schema     string    `json:"schema"`
	Started    time.Time `json:"started"`
	DurationMS int64     `json:"duration_ms"`
	Infra      string    `json:"infra"`
	Machine    Machine   `json:"machine"`
	Events     int       `json:"events"`
	Reps       int       `json:"repetitions"`
	Figures    []Figure  `json:"figures"`
	Ratios     Ratios    `json:"ratios"`
	Targets    []Target  `json:"targets"`
}

// Machine is where the figures were taken.
type Machine struct {
	CPUs      int    `json:"cpus"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	GoVersion string `json:"go_version"`
}

// measurement is one figure's repetition.
type measurement struct {
	fig Figure
	run func(ctx context.Context, st *stage, dir string, rep int) (Sample, error)
}

// Run measures every figure on in, with the reference pipeline's programs
// prog (built by its target's build step). Repetitions go round-robin
// (every figure once, then again), so a noisy moment of the machine spreads
// over all figures instead of one.
func Run(ctx context.Context, in infra.Infra, prog Programs, opts Options) (Report, error) {
	if err := opts.Validate(); err != nil {
		return Report{}, err
	}
	if err := prog.check(); err != nil {
		return Report{}, err
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	dir := opts.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "faultline-bench-*")
		if err != nil {
			return Report{}, fmt.Errorf("bench folder: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	rep := Report{
		Schema: Schema, Started: time.Now(), Infra: in.Name(), Events: opts.Events, Reps: opts.Reps,
		Machine: Machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version()},
	}
	events, err := makeEvents(max(opts.Events, opts.NaiveEvents))
	if err != nil {
		return Report{}, err
	}
	flags := Flags{Programs: prog, Relay: opts.RelayFlags, Inventory: opts.InventoryFlags}
	ms := []*measurement{
		{fig: Figure{Name: FigureRaw, Events: opts.Events, Description: fmt.Sprintf("plain publisher, async confirms (window %d), same payloads to the same quorum queue", rawWindow)},
			run: func(ctx context.Context, st *stage, _ string, _ int) (Sample, error) {
				d, err := publishRaw(ctx, st.amqpURL, events[:opts.Events])
				return newSample(opts.Events, d), err
			}},
		{fig: Figure{Name: FigureNaive, Events: opts.NaiveEvents, Description: "claim one row, publish (mandatory), wait for its confirm, mark Published, repeat"},
			run: func(ctx context.Context, st *stage, _ string, _ int) (Sample, error) {
				if err := st.seedOutbox(ctx, events[:opts.NaiveEvents]); err != nil {
					return Sample{}, err
				}
				n, d, err := naiveRelay(ctx, st.orders, st.amqpURL)
				if err == nil && n != opts.NaiveEvents {
					err = fmt.Errorf("naive relay published %d of %d rows", n, opts.NaiveEvents)
				}
				return newSample(n, d), err
			}},
	}
	for _, k := range opts.Relays {
		ms = append(ms, &measurement{
			fig: Figure{Name: FigureRelay, Instances: k, Events: opts.Events, Description: fmt.Sprintf("faultline relay, %d instance(s): Pending outbox rows to Published", k)},
			run: func(ctx context.Context, st *stage, dir string, _ int) (Sample, error) {
				return measureRelay(ctx, st, dir, flags, events[:opts.Events], k)
			}})
	}
	ms = append(ms, &measurement{
		fig: Figure{Name: FigureConsumer, Events: opts.Events, Description: "queued events through inbox + reservation in one transaction, ack after commit"},
		run: func(ctx context.Context, st *stage, dir string, _ int) (Sample, error) {
			return measureConsumer(ctx, st, dir, flags, events[:opts.Events])
		}})
	e2e := &measurement{
		fig: Figure{Name: FigureEndToEnd, Events: opts.Events},
	}
	e2e.run = func(ctx context.Context, st *stage, dir string, rep int) (Sample, error) {
		relays := bestRelays(ms, opts.Relays)
		e2e.fig.Instances = relays
		e2e.fig.Description = fmt.Sprintf("orders over HTTP (%d clients) through the order service, %d relay(s) and the consumer to reservations", opts.Clients, relays)
		return measureEndToEnd(ctx, st, dir, flags, opts.Events, relays, opts.Clients, uint64(rep))
	}
	ms = append(ms, e2e)
	if len(opts.Only) > 0 {
		ms = slices.DeleteFunc(ms, func(m *measurement) bool { return !slices.Contains(opts.Only, m.fig.Name) })
	}

	token := strconv.FormatInt(time.Now().UnixNano()%1e6, 36) // two runs on one infrastructure never share a name
	seq := 0
	for r := 1; r <= opts.Reps; r++ {
		for _, m := range ms {
			seq++
			id := fmt.Sprintf("fl_bench_%s_%d", token, seq)
			s, err := measureOnce(ctx, in, id, procDir(dir, id, r), m, r)
			if err != nil {
				return Report{}, fmt.Errorf("%s (repetition %d): %w", Label(m.fig), r, err)
			}
			m.fig.Samples = append(m.fig.Samples, s)
			fmt.Fprintf(logw, "%s %-18s rep %d/%d: %6d events in %8.1f ms = %8.0f events/s\n",
				time.Now().Format("15:04:05"), Label(m.fig), r, opts.Reps, s.Events, s.DurationMS, s.EventsPerSec)
		}
	}
	for _, m := range ms {
		m.fig.summarize()
		rep.Figures = append(rep.Figures, m.fig)
	}
	rep.Ratios, rep.Targets = ratios(rep.Figures)
	rep.DurationMS = time.Since(rep.Started).Milliseconds()
	return rep, nil
}

// measureOnce runs one repetition on a stage of its own and removes it.
func measureOnce(ctx context.Context, in infra.Infra, id, dir string, m *measurement, rep int) (Sample, error) {
	st, err := newStage(ctx, in, id)
	if err != nil {
		return Sample{}, err
	}
	defer st.close(ctx)
	defer os.RemoveAll(dir)
	return m.run(ctx, st, dir, rep)
}

// bestRelays is the relay instance count with the best median so far (the
// first count before any was measured).
func bestRelays(ms []*measurement, counts []int) int {
	best, bestRate := counts[0], 0.0
	for _, m := range ms {
		if m.fig.Name != FigureRelay || len(m.fig.Samples) == 0 {
			continue
		}
		f := m.fig
		f.summarize()
		if f.Median > bestRate {
			best, bestRate = f.Instances, f.Median
		}
	}
	return best
}

// Label names a figure in one word: relay×4, raw, ...
func Label(f Figure) string {
	if f.Name == FigureRelay {
		return fmt.Sprintf("relay×%d", f.Instances)
	}
	return f.Name
}
