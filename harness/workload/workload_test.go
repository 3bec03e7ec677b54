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

// TestRunAfterFaults: the orders sent once the faults have ended follow the
// paced ones, numbered after them, and count as acknowledged.
func TestRunAfterFaults(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	reqs := target.Workload{Create: target.Request{Method: http.MethodPost, Path: target.Template{Raw: "/orders"},
		Body: target.Template{Raw: `{{n}}`}, OK: []int{http.StatusCreated}}}
	wl := New(Spec{Orders: 3, Concurrency: 2, AfterFaults: 2}, reqs, 1, func() string { return strings.TrimPrefix(srv.URL, "http://") })
	require.NoError(t, wl.Run(context.Background()))
	assert.Equal(t, int64(3), wl.Acknowledged())
	require.NoError(t, wl.RunAfterFaults(context.Background()))
	assert.Equal(t, int64(5), wl.Acknowledged())
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(bodies)
	assert.Equal(t, []string{"0", "1", "2", "3", "4"}, bodies)
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
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	reqs := target.Workload{Create: target.Request{Method: http.MethodPost, Path: target.Template{Raw: "/orders"},
		Body: target.Template{Raw: `{{n}}`}, OK: []int{http.StatusCreated}}}
	addr := func() string { return strings.TrimPrefix(srv.URL, "http://") }
	spec := Spec{Profile: Sustained, Orders: 10, Concurrency: 4, AfterFaults: 1, Sustain: &Sustain{Share: 0.5, For: 300 * time.Millisecond}}
	require.NoError(t, spec.Validate())

	wl := New(spec, reqs, 1, addr)
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
	mu.Lock()
	got := slices.Clone(bodies)
	mu.Unlock()
	assert.Contains(t, got, strconv.Itoa(10+sent), "the order after the faults is numbered after the sustained ones")
	assert.Len(t, got, 10+sent+1)

	none := New(spec, reqs, 1, addr)
	assert.ErrorContains(t, none.Run(context.Background()), "nothing counts the events that took effect")
	stuck := New(spec, reqs, 1, addr)
	stuck.Carried(func(context.Context) (int, error) { return 0, nil })
	assert.ErrorContains(t, stuck.Run(context.Background()), "took no effect")
}
