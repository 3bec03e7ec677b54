package fault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
)

// KindNodeKill is the node-kill fault's kind, as a schedule names it.
const KindNodeKill = "node-kill"

// NodeKill SIGKILLs a node of a clustered broker — the node leading the
// target's queue, or the node a process's broker link goes to — and starts
// it again DownFor later. Killing the leader opens an election: its result
// says which node was elected and how long it took, or the window did not
// open. With Holding, it first waits until the broker counts deliveries
// held unacked on the target's queue, so the node dies with them in hand;
// with Slow besides, the consumer's database link is slowed (slowLink)
// from the trigger to the kill, so that it holds them while it commits.
// With DownFor zero the node stays down for the rest of the run — a lost
// machine — and the infrastructure starts it again before the next run.
type NodeKill struct {
	Node    string        `json:"node"` // NodeLeader, ClientNode(instance), or "node-<n>"
	Trigger Trigger       `json:"trigger"`
	DownFor time.Duration `json:"down_for"` // 0: left down
	Holding bool          `json:"holding"`
	Slow    history.Link  `json:"slow"` // with Holding: a link reference ("consumer.pg") slowed from the trigger to the kill; "" none
}

func init() {
	register(Desc[NodeKill]{
		Name:    KindNodeKill,
		Example: NodeKill{Node: NodeLeader, Trigger: Trigger{AfterOrders: 20}, DownFor: 5 * time.Second},
		Doc:     "a node of the clustered broker killed (SIGKILL) and started again: the queue's leader, or the node a process talks to",
		Opens:   protocol.QueueLeaderLost,
		Check: func(p NodeKill) error {
			if err := Need(KindNodeKill, p.Node != "", "node"); err != nil {
				return err
			}
			if p.Slow != "" && !p.Holding {
				return errors.New("node-kill fault: slow needs holding")
			}
			return nil
		},
		Window: func(NodeKill) (history.Ref, string) { return "", "" },
		Touches: func(k NodeKill) Touch {
			t := Touch{Shared: []string{"broker"}}
			if k.Slow != "" {
				t.Links = []history.Link{k.Slow}
			}
			return t
		},
		Trigger: func(k NodeKill) Trigger { return k.Trigger },
		Enumerate: func(s *Surface, _ int) []Candidate {
			if !s.Cluster {
				return nil
			}
			return []Candidate{{Faults: []Fault{NodeKill{Node: NodeLeader, Trigger: Trigger{AfterOrders: 20}, DownFor: 5 * time.Second}}}}
		},
		Shrink: func(_ NodeKill, sh *Shrink[NodeKill]) {
			sh.Trigger(func(k *NodeKill) *Trigger { return &k.Trigger })
		},
	})
}

// Describe implements Fault.
func (k NodeKill) Describe() result.Fault {
	held := ""
	if k.Holding {
		held = " once the broker counts deliveries unacked,"
	}
	if k.Slow != "" {
		held = fmt.Sprintf(" once the broker counts deliveries unacked (link %s slowed %s a statement until then),", k.Slow, slowLatency)
	}
	again := fmt.Sprintf("started again after %s", k.DownFor)
	if k.DownFor == 0 {
		again = "left down for the rest of the run"
	}
	return result.Fault{Kind: KindNodeKill, Target: k.Node, Detail: fmt.Sprintf("node %s killed (SIGKILL)%s %s, %s", k.Node, held, k.Trigger, again)}
}

// Require implements Requirer: a clustered broker with such a node, and
// the link it slows.
func (k NodeKill) Require(env *Env) error {
	if k.Slow != "" {
		if _, err := env.Roles.Link(k.Slow); err != nil {
			return err
		}
	}
	return requireNode(env, k.Node)
}

// Inject implements Fault.
func (k NodeKill) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	var seen states
	// unslow takes the Slow link's latency off: right after the kill (the
	// window is the node's death with deliveries in hand; taken off before
	// it, the consumer would commit and ack them first), or when the fault
	// ends sooner.
	var unslow func() error
	var w waits
	done := func(hit bool, err error) result.Fault {
		r := record(k, start, hit, err)
		r.States, r.Waits = seen, w
		if unslow != nil {
			if uerr := unslow(); uerr != nil {
				r.UndoError = uerr.Error()
			}
			unslow = nil
		}
		return r
	}
	c, err := cluster(env)
	if err != nil {
		return done(false, err)
	}
	if err := env.Wait(ctx, k.Trigger); err != nil {
		return done(false, err)
	}
	// A node killed before it saved a quorum queue's server comes back
	// without it (see BrokerRestart.Inject).
	if err := queuesSaved(ctx, env, &w); err != nil {
		return done(false, err)
	}
	if k.Holding {
		if k.Slow != "" {
			if unslow, err = slowLink(ctx, env, k.Slow); err != nil {
				return done(false, err)
			}
		}
		var held string
		err := w.wait(causeHeld(env, "its consumer"), env.Deadline, func() (string, error) {
			var err error
			held, _, err = waitHeldDeliveries(ctx, env, false, respawn{})
			return held, err
		})
		if err != nil {
			return done(false, err)
		}
		seen.add(LaneCluster, "held", "%s", held)
	}
	start = time.Now()
	leader := seen.readLeader(ctx, env, c)
	replicated := true // a quorum queue elects a new leader; a classic one has no replica
	if env.Topology.Queue != "" {
		if qt, err := c.QueueType(ctx, env.VHost, env.Topology.Queue); err == nil && qt != "quorum" {
			replicated = false
			seen.add(LaneCluster, "queue", "%s is a %s queue: its only copy is on %s", env.Topology.Queue, qt, leader)
		}
	}
	i, name, err := resolveNode(ctx, env, c, k.Node)
	if err != nil {
		return done(false, err)
	}
	if err := c.KillNode(ctx, i); err != nil {
		return done(false, fmt.Errorf("kill %s: %w", name, err))
	}
	seen.add(LaneCluster, "down", "%s killed (SIGKILL)", name)
	if unslow != nil {
		err := unslow()
		unslow = nil
		if err != nil {
			return notUndone(done(false, nil), err)
		}
	}
	env.Logf("broker node %s (%s) killed", name, k.Node)
	var windowErr error
	switch {
	case name == leader && replicated:
		windowErr = w.wait(fmt.Sprintf("a node other than %s to lead %s", name, env.Topology.Queue), env.Deadline, func() (string, error) {
			leader, err := waitLeaderMoved(ctx, env, c, name, &seen)
			if err != nil {
				return "", err
			}
			return leader + " elected", nil
		})
	case name == leader:
		seen.add(LaneCluster, "unavailable", "%s has no replica to elect: it is unavailable while %s is down", env.Topology.Queue, name)
	case k.Node == NodeLeader:
		windowErr = fmt.Errorf("the node killed (%s) no longer led %s when it died (%s did)", name, env.Topology.Queue, leader)
	}
	if k.DownFor == 0 {
		seen.add(LaneCluster, "down", "%s left down for the rest of the run", name)
		return done(windowErr == nil, windowErr)
	}
	holdErr := pause(ctx, k.DownFor-time.Since(start))
	if err := c.StartNode(context.WithoutCancel(ctx), i); err != nil {
		r := done(windowErr == nil, windowErr)
		return notUndone(r, fmt.Errorf("start %s again: %w", name, err))
	}
	seen.add(LaneCluster, "up", "%s started again", name)
	env.Logf("broker node %s started again", name)
	if err := w.wait(causeHealed, healTimeout, func() (string, error) { return "", waitHealed(context.WithoutCancel(ctx), env, c, &seen) }); err != nil {
		return notUndone(done(windowErr == nil, windowErr), err)
	}
	if windowErr != nil {
		return done(false, windowErr)
	}
	return done(true, holdErr)
}

// Needs implements Needs: a clustered broker.
func (NodeKill) Needs() []string { return []string{CapCluster} }
