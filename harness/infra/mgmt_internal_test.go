package infra

import (
	"context"
	"encoding/json"
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

// fakeVHostStates answers a vhost's GET with its state on each node, and
// a start on a node with the state the node takes: a node whose vhost
// failed to start reports it stopped until it is started again.
type fakeVHostStates struct {
	mu     sync.Mutex
	state  map[string]string // node → state
	starts []string          // nodes asked to start it, in order
	takes  string            // the state a started node takes
}

func (f *fakeVHostStates) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/vhosts/fl_run":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"name": "fl_run", "cluster_state": f.state})
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/vhosts/fl_run/start/"):
		node := strings.TrimPrefix(r.URL.Path, "/api/vhosts/fl_run/start/")
		f.starts = append(f.starts, node)
		f.state[node] = f.takes
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// A vhost that did not start on a node (a loaded machine) refuses every
// connection there until started: vhostRunning starts it and waits, on one
// node as on a cluster; a node that is down starts its vhosts when it
// comes back; a vhost that never starts is an error once the wait is over.
func TestVHostRunningStartsAStoppedVHost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		state   map[string]string
		takes   string
		starts  []string
		wantErr string
	}{
		{name: "running everywhere", state: map[string]string{"a@h": "running", "b@h": "nodedown"}},
		{name: "stopped on one node: started", state: map[string]string{"a@h": "running", "b@h": "stopped"}, takes: "running", starts: []string{"b@h"}},
		{name: "never starts", state: map[string]string{"a@h": "stopped"}, takes: "stopped", wantErr: `vhost "fl_run" not running on [a@h]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeVHostStates{state: tc.state, takes: tc.takes}
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			api := mgmtAPI{base: srv.URL, user: "u", pass: "p", http: &http.Client{Timeout: time.Second}}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := api.vhostRunning(ctx, "fl_run")
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			f.mu.Lock()
			defer f.mu.Unlock()
			assert.Equal(t, tc.starts, f.starts)
		})
	}
}
