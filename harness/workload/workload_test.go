package workload

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

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
