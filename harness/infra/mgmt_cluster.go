package infra

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
)

// A broker cluster's state is read, and its calls made, through the
// nodes' management APIs the same way whoever runs the nodes: mgmtCluster
// does that for the local and the docker provider. A provider supplies
// only its nodes, and which of them run; killing, starting, freezing and
// cutting off a node stay with it. mgmtCluster's errors carry no
// provider's prefix: the provider adds its own.

// mgmtNode is one node of a broker cluster as mgmtCluster sees it.
type mgmtNode struct {
	name string // Erlang node name, as the nodes report each other
	// api is the node's management API as the run's user, as it is
	// reached now (a node started again may listen elsewhere).
	api func() mgmtAPI
}

// mgmtCluster is a broker cluster seen through its nodes' management
// APIs.
type mgmtCluster struct {
	nodes []mgmtNode // every node, in order
	// running lists the nodes to ask, in order: those running (neither
	// killed nor paused).
	running func() []mgmtNode
}

// onNode calls call with the management API of the first running node; a
// node that gives no answer (refused, timed out, or a 5xx) passes the
// call to the next, round the running nodes again until one answers, ctx
// ends or clusterFailover has passed. Each call has clusterCallTimeout.
func (m mgmtCluster) onNode(ctx context.Context, call func(ctx context.Context, api mgmtAPI) error) error {
	return m.onNodeWithin(ctx, clusterCallTimeout, call)
}

// onNodeWithin is onNode with each call bounded by perCall.
func (m mgmtCluster) onNodeWithin(ctx context.Context, perCall time.Duration, call func(ctx context.Context, api mgmtAPI) error) error {
	ctx, cancel := context.WithTimeout(ctx, clusterFailover)
	defer cancel()
	var errs []error
	for {
		nodes := m.running()
		if len(nodes) == 0 {
			return errors.New("no broker node is running")
		}
		errs = errs[:0]
		for _, n := range nodes {
			cctx, cancel := context.WithTimeout(ctx, perCall)
			err := call(cctx, n.api())
			cancel()
			if err == nil || answered(err) {
				return err
			}
			errs = append(errs, fmt.Errorf("node %s: %w", n.name, err))
			if ctx.Err() != nil {
				return errors.Join(errs...)
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(errs...)
		case <-time.After(pollInterval):
		}
	}
}

// apiQueue is what QueueLeader and QueueType read of a queue.
type apiQueue struct {
	Type   string `json:"type"`
	Leader string `json:"leader"` // quorum queues
	Node   string `json:"node"`   // the node a classic queue lives on
}

// apiQueue reads queue in vhost from a running node; a queue that does
// not exist gives ErrNotFound.
func (m mgmtCluster) apiQueue(ctx context.Context, vhost, queue string) (apiQueue, error) {
	var q apiQueue
	path := "/api/queues/" + url.PathEscape(vhost) + "/" + url.PathEscape(queue)
	err := m.onNode(ctx, func(ctx context.Context, api mgmtAPI) error {
		code, err := api.do(ctx, http.MethodGet, path, nil, &q, http.StatusOK, http.StatusNotFound)
		if err == nil && code == http.StatusNotFound {
			return ErrNotFound
		}
		return err
	})
	if err != nil {
		return apiQueue{}, fmt.Errorf("queue %q in vhost %q: %w", queue, vhost, err)
	}
	return q, nil
}

// queueLeader is the node queue in vhost lives on: a quorum queue's
// leader, a classic queue's node. A quorum queue between leaders (its
// leader just died) gives an error: poll.
func (m mgmtCluster) queueLeader(ctx context.Context, vhost, queue string) (string, error) {
	q, err := m.apiQueue(ctx, vhost, queue)
	if err != nil {
		return "", err
	}
	leader := q.Node
	if q.Type == "quorum" && q.Leader != "" {
		leader = q.Leader
	}
	if leader == "" {
		return "", fmt.Errorf("queue %q in vhost %q: no leader reported", queue, vhost)
	}
	return leader, nil
}

// queueType is the type of queue in vhost ("classic", "quorum", ...).
func (m mgmtCluster) queueType(ctx context.Context, vhost, queue string) (string, error) {
	q, err := m.apiQueue(ctx, vhost, queue)
	if err != nil {
		return "", err
	}
	return q.Type, nil
}

// nodesView is GET /api/nodes as one node answers it.
type nodesView []struct {
	Name       string   `json:"name"`
	Running    bool     `json:"running"`
	Partitions []string `json:"partitions"`
}

func (v nodesView) running() []string {
	var out []string
	for _, n := range v {
		if n.Running {
			out = append(out, n.Name)
		}
	}
	return out
}

// nodesView asks node n's management API for the nodes as it sees them,
// within clusterCallTimeout.
func (m mgmtCluster) nodesView(ctx context.Context, n mgmtNode) (nodesView, error) {
	ctx, cancel := context.WithTimeout(ctx, clusterCallTimeout)
	defer cancel()
	var v nodesView
	if _, err := n.api().do(ctx, http.MethodGet, "/api/nodes", nil, &v, http.StatusOK); err != nil {
		return nil, err
	}
	return v, nil
}

// status is the union of what the running nodes that answer report, all
// asked at once. A node cut off from the majority stops its broker
// (pause_minority) and no longer answers, so it shows as down.
func (m mgmtCluster) status(ctx context.Context) (ClusterStatus, error) {
	nodes := m.running()
	views := make([]nodesView, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for k, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			views[k], errs[k] = m.nodesView(ctx, n)
		}()
	}
	wg.Wait()
	st := ClusterStatus{Partitions: map[string][]string{}}
	running := map[string]bool{}
	answers := 0
	for k, v := range views {
		if errs[k] != nil {
			continue
		}
		answers++
		for _, e := range v {
			running[e.Name] = running[e.Name] || e.Running
			for _, p := range e.Partitions {
				if !slices.Contains(st.Partitions[e.Name], p) {
					st.Partitions[e.Name] = append(st.Partitions[e.Name], p)
				}
			}
		}
	}
	if answers == 0 {
		return ClusterStatus{}, fmt.Errorf("no node answers: %w", errors.Join(errs...))
	}
	for _, n := range m.nodes {
		if running[n.name] {
			st.Running = append(st.Running, n.name)
		} else {
			st.Down = append(st.Down, n.name)
		}
	}
	return st, nil
}

// waitHealthy polls until whole returns nil (the provider's own record
// that every node runs) and each node's management API shows every node
// running and no partition.
func (m mgmtCluster) waitHealthy(ctx context.Context, whole func() error) error {
	return poll(ctx, func(ctx context.Context) error {
		if err := whole(); err != nil {
			return err
		}
		for _, n := range m.nodes {
			view, err := m.nodesView(ctx, n)
			if err != nil {
				return fmt.Errorf("node %s: %w", n.name, err)
			}
			running := view.running()
			for _, o := range m.nodes {
				if !slices.Contains(running, o.name) {
					return fmt.Errorf("node %s does not see %s running", n.name, o.name)
				}
			}
			for _, e := range view {
				if len(e.Partitions) > 0 {
					return fmt.Errorf("node %s reports %s partitioned from %v", n.name, e.Name, e.Partitions)
				}
			}
		}
		return nil
	})
}

// featureFlagsCallTimeout bounds one call of enableFeatureFlags.
const featureFlagsCallTimeout = 30 * time.Second

// enableFeatureFlags enables every stable feature flag the cluster has
// disabled. A node that starts a cluster from scratch enables them all,
// but on 3.10 one that others join while it still boots can leave the
// whole cluster with every flag off (seen here: quorum_queue disabled,
// every quorum queue refused with "the corresponding feature flag is
// disabled"). A flag's dependencies are enabled with it.
//
// It runs once, as the cluster starts, when no fault is on any node: a
// node slow to answer is slow, not frozen, and each call gets
// featureFlagsCallTimeout (listing the flags asks every node).
func (m mgmtCluster) enableFeatureFlags(ctx context.Context) error {
	return m.onNodeWithin(ctx, featureFlagsCallTimeout, func(ctx context.Context, api mgmtAPI) error {
		var flags []struct {
			Name      string `json:"name"`
			State     string `json:"state"`
			Stability string `json:"stability"`
		}
		if _, err := api.do(ctx, http.MethodGet, "/api/feature-flags", nil, &flags, http.StatusOK); err != nil {
			return fmt.Errorf("list feature flags: %w", err)
		}
		for _, f := range flags {
			if f.State != "disabled" || f.Stability != "stable" {
				continue
			}
			if _, err := api.do(ctx, http.MethodPut, "/api/feature-flags/"+url.PathEscape(f.Name)+"/enable", struct{}{}, nil, http.StatusNoContent, http.StatusOK); err != nil {
				return fmt.Errorf("enable feature flag %s: %w", f.Name, err)
			}
		}
		return nil
	})
}

// seenRunning polls until every running node sees node name running: a
// node started again is not back until the others count it in.
func (m mgmtCluster) seenRunning(ctx context.Context, name string) error {
	return poll(ctx, func(ctx context.Context) error {
		for _, o := range m.running() {
			view, err := m.nodesView(ctx, o)
			if err != nil {
				return fmt.Errorf("node %s: %w", o.name, err)
			}
			if !slices.Contains(view.running(), name) {
				return fmt.Errorf("node %s does not see it running", o.name)
			}
		}
		return nil
	})
}

// traceVHost turns the firehose of vhost name on or off on every running
// node (each keeps its own), each call bounded by clusterCallTimeout.
func (m mgmtCluster) traceVHost(ctx context.Context, name, description string, on bool) error {
	var errs []error
	for _, n := range m.running() {
		cctx, cancel := context.WithTimeout(ctx, clusterCallTimeout)
		err := n.api().traceVHost(cctx, name, description, on)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.name, err))
		}
	}
	return errors.Join(errs...)
}

// createVHost creates vhost name on a running node, user getting all
// permissions on it. A vhost that exists on the next node after a node
// that did not answer is the one that node created: user gets its
// permissions there too.
func (m mgmtCluster) createVHost(ctx context.Context, name, user string) error {
	unanswered := false
	return m.onNode(ctx, func(ctx context.Context, api mgmtAPI) error {
		err := api.createVHost(ctx, name, user)
		if errors.Is(err, errVHostExists) && unanswered {
			return api.grantAll(ctx, name, user)
		}
		if err != nil && !answered(err) {
			unanswered = true
		}
		return err
	})
}

// vhostRunning waits, up to vhostStartTimeout, until vhost name runs on
// every running node (mgmtAPI.vhostDown), asking any node that answers.
func (m mgmtCluster) vhostRunning(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, vhostStartTimeout)
	defer cancel()
	return poll(ctx, func(ctx context.Context) error {
		var nodes []string
		for _, n := range m.running() {
			nodes = append(nodes, n.name)
		}
		return m.onNode(ctx, func(ctx context.Context, api mgmtAPI) error { return api.vhostDown(ctx, name, nodes) })
	})
}

// vhostsRunning makes every vhost run on every node again (a node that
// came back may have failed to start one) with running, the provider's
// vhostRunning; running's errors come back as they are.
func (m mgmtCluster) vhostsRunning(ctx context.Context, running func(ctx context.Context, name string) error) error {
	var vhosts []vhostListed
	err := m.onNode(ctx, func(ctx context.Context, api mgmtAPI) (err error) {
		vhosts, err = api.vhosts(ctx)
		return err
	})
	if err != nil {
		return err
	}
	for _, v := range vhosts {
		if err := running(ctx, v.Name); err != nil {
			return err
		}
	}
	return nil
}
