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

	"github.com/faultline-dev/faultline/harness/history"
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

// The management API's view of a queue's length limit: its own argument,
// a policy's, the lower of the two when both are set; the overflow from
// the argument before the policy.
func TestQueueReadsItsLengthLimit(t *testing.T) {
	for _, tc := range []struct {
		name           string
		args, policy   map[string]any
		wantMax        int
		wantOverflow   string
		wantType       string
		wantDeadLetter string
	}{
		{"argument", map[string]any{"x-max-length": 5, "x-overflow": "reject-publish"}, nil, 5, "reject-publish", "quorum", ""},
		{"policy", nil, map[string]any{"max-length": 7, "overflow": "reject-publish"}, 7, "reject-publish", "quorum", ""},
		{"lower of both", map[string]any{"x-max-length": 9}, map[string]any{"max-length": 4, "overflow": "drop-head"}, 4, "drop-head", "quorum", ""},
		{"argument's overflow first", map[string]any{"x-overflow": "reject-publish", "x-dead-letter-exchange": "dlx"}, map[string]any{"overflow": "drop-head"}, 0, "reject-publish", "quorum", "dlx"},
		{"none", nil, nil, 0, "", "quorum", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/queues/fl_run/orders" {
					w.WriteHeader(http.StatusNotFound)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(map[string]any{"type": "quorum", "messages": 40, "messages_ready": 8, "messages_unacknowledged": 32,
					"arguments": tc.args, "effective_policy_definition": tc.policy})
			}))
			t.Cleanup(srv.Close)
			api := mgmtAPI{base: srv.URL, user: "u", pass: "p", http: &http.Client{Timeout: time.Second}}
			q, err := api.queue(context.Background(), "fl_run", "orders")
			require.NoError(t, err)
			assert.Equal(t, tc.wantMax, q.MaxLength)
			assert.Equal(t, tc.wantOverflow, q.Overflow)
			assert.Equal(t, tc.wantType, q.Type)
			assert.Equal(t, tc.wantDeadLetter, q.DeadLetterExchange)
			assert.Equal(t, 8, q.Ready)
		})
	}
}

// A queue refuses publishes only with an overflow that rejects them, once
// its ready messages reach its limit (classic) or pass it (quorum, which
// takes publishes until it is over).
func TestQueueRefusing(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    history.QueueInfo
		want bool
	}{
		{"quorum at its limit still takes", history.QueueInfo{Type: "quorum", Ready: 5, MaxLength: 5, Overflow: "reject-publish"}, false},
		{"quorum over its limit", history.QueueInfo{Type: "quorum", Ready: 6, MaxLength: 5, Overflow: "reject-publish"}, true},
		{"classic at its limit", history.QueueInfo{Type: "classic", Ready: 5, MaxLength: 5, Overflow: "reject-publish"}, true},
		{"classic below its limit", history.QueueInfo{Type: "classic", Ready: 4, MaxLength: 5, Overflow: "reject-publish-dlx"}, false},
		{"classic with dead-lettering overflow", history.QueueInfo{Type: "classic", Ready: 5, MaxLength: 5, Overflow: "reject-publish-dlx"}, true},
		{"drop-head takes every publish", history.QueueInfo{Type: "quorum", Ready: 50, MaxLength: 5, Overflow: "drop-head"}, false},
		{"default overflow is drop-head", history.QueueInfo{Type: "classic", Ready: 50, MaxLength: 5}, false},
		{"no limit", history.QueueInfo{Type: "quorum", Ready: 50, Overflow: "reject-publish"}, false},
	} {
		assert.Equal(t, tc.want, tc.q.Refusing(), tc.name)
	}
}
