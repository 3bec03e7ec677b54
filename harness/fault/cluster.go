package fault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/result"
)

// What the cluster faults (node-kill, node-pause, node-partition) share:
// which node they act on, and what they read of the cluster's state as
// evidence that it happened.

// Lanes of the infrastructure's state on a run's timeline.
const (
	LaneCluster  = "broker cluster"
	LaneDatabase = "database"
)

// Node references a fault can name.
const (
	// NodeLeader is the node leading the target's queue when the fault
	// fires.
	NodeLeader = "leader"
	// nodeClientPrefix + an instance ("client:relay-1") is the node that
	// instance's broker link goes to.
	nodeClientPrefix = "client:"
	// nodeIndexPrefix + a 1-based number ("node-2") is that node.
	nodeIndexPrefix = "node-"
)

// ClientNode is the reference to the node instance's broker link goes to.
func ClientNode(instance string) string { return nodeClientPrefix + instance }

// clusterPoll is how often a cluster fault reads the cluster's state while
// it waits for it to change.
const clusterPoll = 200 * time.Millisecond

// cluster is the run's clustered broker, or why there is none.
func cluster(env *Env) (infra.Cluster, error) {
	c, ok := env.Infra.(infra.Cluster)
	if !ok || len(c.Nodes()) < 2 {
		return nil, errors.New("needs a clustered broker, and the run's broker is a single node")
	}
	return c, nil
}

// requireNode checks that ref can name a node of the run's cluster.
func requireNode(env *Env, ref string) error {
	c, err := cluster(env)
	if err != nil {
		return err
	}
	switch {
	case ref == NodeLeader:
		if env.Topology.Queue == "" {
			return errors.New("the queue's leader: the target's topology names no queue")
		}
	case strings.HasPrefix(ref, nodeClientPrefix):
		in, err := env.Roles.Instance(history.Ref(strings.TrimPrefix(ref, nodeClientPrefix)))
		if err != nil {
			return err
		}
		if _, ok := env.ClientNodes[in.Name]; !ok {
			return fmt.Errorf("instance %s has no broker link to a node of its own", in.Name)
		}
	case strings.HasPrefix(ref, nodeIndexPrefix):
		n, err := strconv.Atoi(strings.TrimPrefix(ref, nodeIndexPrefix))
		if err != nil || n < 1 || n > len(c.Nodes()) {
			return fmt.Errorf("node %q: want node-1 to node-%d", ref, len(c.Nodes()))
		}
	default:
		return fmt.Errorf("node %q: want %q, %q<instance> or %q<n>", ref, NodeLeader, nodeClientPrefix, nodeIndexPrefix)
	}
	return nil
}

// resolveNode finds the node ref names now: its index and name.
func resolveNode(ctx context.Context, env *Env, c infra.Cluster, ref string) (int, string, error) {
	nodes := c.Nodes()
	switch {
	case ref == NodeLeader:
		leader, err := c.QueueLeader(ctx, env.VHost, env.Topology.Queue)
		if err != nil {
			return 0, "", fmt.Errorf("the leader of %s: %w", env.Topology.Queue, err)
		}
		for i, n := range nodes {
			if n.Name == leader {
				return i, leader, nil
			}
		}
		return 0, "", fmt.Errorf("the leader of %s is %q, no node of the cluster", env.Topology.Queue, leader)
	case strings.HasPrefix(ref, nodeClientPrefix):
		in, err := env.Roles.Instance(history.Ref(strings.TrimPrefix(ref, nodeClientPrefix)))
		if err != nil {
			return 0, "", err
		}
		i, ok := env.ClientNodes[in.Name]
		if !ok || i < 0 || i >= len(nodes) {
			return 0, "", fmt.Errorf("node %q: no such client node", ref)
		}
		return i, nodes[i].Name, nil
	default:
		n, err := strconv.Atoi(strings.TrimPrefix(ref, nodeIndexPrefix))
		if err != nil || n < 1 || n > len(nodes) {
			return 0, "", fmt.Errorf("node %q: no such node", ref)
		}
		return n - 1, nodes[n-1].Name, nil
	}
}

// states collects what a fault read of the cluster, for its result.
type states []result.State

func (s *states) add(lane, kind, format string, args ...any) {
	*s = append(*s, result.State{At: time.Now(), Lane: lane, Kind: kind, Label: fmt.Sprintf(format, args...)})
}

// readLeader reads the queue's leader into s (best effort: a reading that
// fails is noted, not fatal).
func (s *states) readLeader(ctx context.Context, env *Env, c infra.Cluster) string {
	if env.Topology.Queue == "" {
		return ""
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	leader, err := c.QueueLeader(rctx, env.VHost, env.Topology.Queue)
	if err != nil {
		s.add(LaneCluster, "leader", "leader of %s unknown: %v", env.Topology.Queue, err)
		return ""
	}
	s.add(LaneCluster, "leader", "%s leads %s", leader, env.Topology.Queue)
	return leader
}

// waitLeaderMoved polls until the queue's leader is a node other than
// from, and says which and how long it took.
func waitLeaderMoved(ctx context.Context, env *Env, c infra.Cluster, from string, s *states) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, env.Deadline)
	defer cancel()
	start := time.Now()
	var last error
	for {
		leader, err := c.QueueLeader(ctx, env.VHost, env.Topology.Queue)
		if err == nil && leader != "" && leader != from {
			s.add(LaneCluster, "leader", "%s leads %s (elected %s after %s died)", leader, env.Topology.Queue, time.Since(start).Round(time.Millisecond), from)
			return leader, nil
		}
		if err != nil {
			last = err
		}
		if err := pause(ctx, clusterPoll); err != nil {
			return "", fmt.Errorf("no new leader of %s seen within %s (last error: %v)", env.Topology.Queue, env.Deadline, last)
		}
	}
}

// waitSeenDown polls the cluster's state until some other node sees node
// name down or partitioned from it, and says how long that took.
func waitSeenDown(ctx context.Context, c infra.Cluster, name string, within time.Duration, s *states) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	start := time.Now()
	var last error
	for {
		st, err := c.Status(ctx)
		if err == nil {
			if slices.Contains(st.Down, name) {
				s.add(LaneCluster, "down", "%s seen down by the others after %s", name, time.Since(start).Round(time.Millisecond))
				return nil
			}
			for node, from := range st.Partitions {
				if node == name || slices.Contains(from, name) {
					s.add(LaneCluster, "partitioned", "%s and %v report a partition after %s", node, from, time.Since(start).Round(time.Millisecond))
					return nil
				}
			}
		} else {
			last = err
		}
		if err := pause(ctx, clusterPoll); err != nil {
			return fmt.Errorf("no node saw %s down or partitioned within %s (last error: %v)", name, within, last)
		}
	}
}

// healTimeout bounds the wait for the cluster to be whole again after a
// fault: a node restarted to clear a partition rejoins in about 10 s.
const healTimeout = 2 * time.Minute

// causeHealed is what a cluster fault waits for after it (waitHealed).
const causeHealed = "the cluster to be whole again (every node running, no partition)"

// waitHealed waits until the cluster is whole again and notes it.
func waitHealed(ctx context.Context, env *Env, c infra.Cluster, s *states) error {
	ctx, cancel := context.WithTimeout(ctx, healTimeout)
	defer cancel()
	start := time.Now()
	did, err := c.Restore(ctx)
	for _, d := range did {
		s.add(LaneCluster, "restored", "%s", d)
	}
	if err != nil {
		return fmt.Errorf("the cluster is not whole again within %s: %w", healTimeout, err)
	}
	s.add(LaneCluster, "healed", "every node running, no partition (%s after the fault ended)", time.Since(start).Round(time.Millisecond))
	return nil
}

// nodeHold is a cluster fault that holds a node in a state for a while:
// how to put it there and take it out, in words for its states and log.
type nodeHold struct {
	fault   Fault
	node    string // the node reference
	trigger Trigger
	hold    time.Duration
	enter   func(ctx context.Context, c infra.Cluster, i int) error
	leave   func(ctx context.Context, c infra.Cluster, i int) error
	entered string // e.g. "frozen (SIGSTOP)"
	left    string // e.g. "thawed (SIGCONT)"
}

// inject runs the hold: after the trigger the node is put in its state;
// the window opened only if another node saw it down or partitioned
// within the hold; then it is taken out and the cluster made whole.
func (h nodeHold) inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	var seen states
	var w waits
	done := func(hit bool, err error) result.Fault {
		r := record(h.fault, start, hit, err)
		r.States, r.Waits = seen, w
		return r
	}
	c, err := cluster(env)
	if err != nil {
		return done(false, err)
	}
	if err := env.Wait(ctx, h.trigger); err != nil {
		return done(false, err)
	}
	start = time.Now()
	seen.readLeader(ctx, env, c)
	i, name, err := resolveNode(ctx, env, c, h.node)
	if err != nil {
		return done(false, err)
	}
	if err := h.enter(ctx, c, i); err != nil {
		return done(false, fmt.Errorf("%s: %s: %w", name, h.entered, err))
	}
	seen.add(LaneCluster, "down", "%s %s", name, h.entered)
	env.Logf("broker node %s (%s) %s", name, h.node, h.entered)
	windowErr := w.wait(fmt.Sprintf("another node to see %s down or partitioned", name), h.hold, func() (string, error) {
		return "", waitSeenDown(ctx, c, name, h.hold, &seen)
	})
	if windowErr == nil {
		seen.readLeader(ctx, env, c)
	}
	holdErr := pause(ctx, h.hold-time.Since(start))
	if err := h.leave(context.WithoutCancel(ctx), c, i); err != nil {
		return notUndone(done(false, windowErr), fmt.Errorf("%s: %s: %w", name, h.left, err))
	}
	seen.add(LaneCluster, "up", "%s %s after %s", name, h.left, time.Since(start).Round(time.Millisecond))
	env.Logf("broker node %s %s", name, h.left)
	if err := w.wait(causeHealed, healTimeout, func() (string, error) { return "", waitHealed(context.WithoutCancel(ctx), env, c, &seen) }); err != nil {
		return notUndone(done(windowErr == nil, windowErr), err)
	}
	if windowErr != nil {
		return done(false, windowErr)
	}
	return done(true, holdErr)
}
