package infra

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeVHosts answers the management API's vhost and permission calls; the
// first slow calls answer only once the client has given up (its request
// is cancelled), but still take effect, as a loaded RabbitMQ node does.
type fakeVHosts struct {
	mu     sync.Mutex
	slow   int
	vhosts map[string]bool
	puts   int
}

func (f *fakeVHosts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	slow := f.slow > 0
	if slow {
		f.slow--
	}
	f.mu.Unlock()
	if slow {
		<-r.Context().Done()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/api/vhosts/"):
		f.puts++
		name := strings.TrimPrefix(r.URL.Path, "/api/vhosts/")
		if f.vhosts[name] {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		f.vhosts[name] = true
		w.WriteHeader(http.StatusCreated)
	case r.Method == http.MethodPut:
		w.WriteHeader(http.StatusCreated)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func TestCreateVHostRidesOutASlowAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		slow    int
		exists  bool
		wantErr string
		puts    int
	}{
		{name: "answered at once", puts: 1},
		{name: "the first answer too late: its vhost is the run's own", slow: 1, puts: 2},
		{name: "every answer too late", slow: unansweredAttempts, wantErr: "no answer after 3 attempts", puts: unansweredAttempts},
		{name: "somebody else's vhost", exists: true, wantErr: "it already exists", puts: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeVHosts{slow: tc.slow, vhosts: map[string]bool{}}
			if tc.exists {
				f.vhosts["fl_run"] = true
			}
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			api := mgmtAPI{base: srv.URL, user: "u", pass: "p", http: &http.Client{Timeout: time.Second}}
			err := api.createVHost(context.Background(), "fl_run", "u")
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			srv.Close() // waits for the slow handlers
			assert.Equal(t, tc.puts, f.puts)
		})
	}
}

func TestCreateVHostStopsWithItsContext(t *testing.T) {
	f := &fakeVHosts{slow: unansweredAttempts, vhosts: map[string]bool{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	api := mgmtAPI{base: srv.URL, user: "u", pass: "p", http: &http.Client{Timeout: time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := api.createVHost(ctx, "fl_run", "u")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	srv.Close()
	assert.Equal(t, 1, f.puts, "no attempt after the context ended")
}
