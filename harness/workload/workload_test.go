package workload

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/target"
)

// counter is a producer that answers every create 201 and keeps the
// bodies it was sent ({{n}}: the order's number).
type counter struct {
	mu     sync.Mutex
	bodies []string
	srv    *httptest.Server
}

func newCounter(t *testing.T) *counter {
	c := &counter{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.bodies = append(c.bodies, string(b))
		c.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// reqs are the target's requests: a create whose body is the order's number.
func (c *counter) reqs() target.Workload {
	return target.Workload{Create: target.Request{Method: http.MethodPost, Path: target.Template{Raw: "/orders"},
		Body: target.Template{Raw: `{{n}}`}, OK: []int{http.StatusCreated}}}
}

func (c *counter) addr() string { return strings.TrimPrefix(c.srv.URL, "http://") }

// sent are the bodies so far, sorted.
func (c *counter) sent() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.bodies)
	slices.Sort(out)
	return out
}

// TestRunAfterFaults: the orders sent once the faults have ended follow the
// paced ones, numbered after them, and count as acknowledged.
func TestRunAfterFaults(t *testing.T) {
	c := newCounter(t)
	wl := New(Spec{Orders: 3, Concurrency: 2, AfterFaults: 2}, c.reqs(), 1, c.addr)
	require.NoError(t, wl.Run(context.Background()))
	assert.Equal(t, int64(3), wl.Acknowledged())
	require.NoError(t, wl.RunAfterFaults(context.Background()))
	assert.Equal(t, int64(5), wl.Acknowledged())
	assert.Equal(t, []string{"0", "1", "2", "3", "4"}, c.sent())
}

// TestAcknowledgedByID: each aggregate's requests answered ok are counted
// under the id its create answer gave, a large integer id as written; a
// step answered "done" is not an acknowledgement.
func TestAcknowledgedByID(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		switch {
		case r.URL.Path == "/orders":
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"orderId": 1234567890123`+string(b)+`}`)
		case strings.HasSuffix(r.URL.Path, "/cancel"):
			w.WriteHeader(http.StatusConflict)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer srv.Close()
	reqs := target.Workload{
		Create: target.Request{Method: http.MethodPost, Path: target.Template{Raw: "/orders"}, Body: target.Template{Raw: `{{n}}`}, ID: "orderId", OK: []int{http.StatusCreated}},
		Steps: []target.Request{
			{Method: http.MethodPost, Path: target.Template{Raw: "/orders/{{id}}/pay"}, OK: []int{http.StatusCreated}},
			{Method: http.MethodPost, Path: target.Template{Raw: "/orders/{{id}}/cancel"}, OK: []int{http.StatusCreated}, Done: []int{http.StatusConflict}},
		}}
	wl := New(Spec{Orders: 2, Concurrency: 2, EventsPerOrder: 3}, reqs, 1, func() string { return strings.TrimPrefix(srv.URL, "http://") })
	require.NoError(t, wl.Run(context.Background()))
	assert.Equal(t, int64(4), wl.Acknowledged(), "two creates, two payments; the cancels were done")
	assert.Equal(t, map[string]int64{"12345678901230": 2, "12345678901231": 2}, wl.AcknowledgedByID())
	mu.Lock()
	assert.Contains(t, paths, "/orders/12345678901230/pay")
	mu.Unlock()

	noID := New(Spec{Orders: 1}, target.Workload{Create: target.Request{Method: http.MethodPost, Path: target.Template{Raw: "/orders"}, Body: target.Template{Raw: `{{n}}`}, OK: []int{http.StatusCreated}}},
		1, func() string { return strings.TrimPrefix(srv.URL, "http://") })
	require.NoError(t, noID.Run(context.Background()))
	assert.Nil(t, noID.AcknowledgedByID(), "no create id: a count only")
}

func TestAnswerID(t *testing.T) {
	for _, tc := range []struct {
		answer, want, err string
	}{
		{answer: `{"orderId":"ab-1"}`, want: "ab-1"},
		{answer: `{"orderId":9007199254740993}`, want: "9007199254740993"},
		{answer: `{"id":1}`, err: `has no field "orderId"`},
		{answer: `{"orderId":{"x":1}}`, err: "neither a string nor a number"},
		{answer: `not json`, err: "decode answer"},
	} {
		got, err := answerID([]byte(tc.answer), "orderId")
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, tc.answer)
			continue
		}
		require.NoError(t, err, tc.answer)
		assert.Equal(t, tc.want, got)
	}
}

// TestSustain: the probe goes out, the rate is what the pipeline carried
// of it, and share of that rate is sent for For, numbered after the probe;
// the orders after the faults follow those. Without a count of what took
// effect, or with nothing taking effect, there is nothing to sustain.
func TestSustain(t *testing.T) {
	c := newCounter(t)
	spec := Spec{Profile: Sustained, Orders: 10, Concurrency: 4, AfterFaults: 1, Sustain: &Sustain{Share: 0.5, For: 300 * time.Millisecond}}
	require.NoError(t, spec.Validate())

	wl := New(spec, c.reqs(), 1, c.addr)
	polls := 0
	// The pipeline shows the probe's effects from its fifth count on.
	wl.Carried(func(context.Context) (int, error) {
		if polls++; polls < 5 {
			return 0, nil
		}
		return int(wl.Acknowledged()), nil
	})
	require.NoError(t, wl.Run(context.Background()))
	st := wl.Stats()
	require.Positive(t, st.Carried)
	sent := int(math.Ceil(0.5 * st.Carried * 0.3))
	assert.Equal(t, int64(10+sent), wl.Acknowledged(), "the probe, then half the carried rate for 300ms")
	assert.Positive(t, st.Sent)
	require.NoError(t, wl.RunAfterFaults(context.Background()))
	got := c.sent()
	assert.Contains(t, got, strconv.Itoa(10+sent), "the order after the faults is numbered after the sustained ones")
	assert.Len(t, got, 10+sent+1)

	none := New(spec, c.reqs(), 1, c.addr)
	assert.ErrorContains(t, none.Run(context.Background()), "nothing counts the events that took effect")
	stuck := New(spec, c.reqs(), 1, c.addr)
	stuck.Carried(func(context.Context) (int, error) { return 0, nil })
	assert.ErrorContains(t, stuck.Run(context.Background()), "took no effect")
}
