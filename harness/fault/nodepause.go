package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/protocol"
)

// KindNodePause is the node-pause fault's kind, as a schedule names it.
const KindNodePause = "node-pause"

// NodePause freezes a node of a clustered broker (SIGSTOP) for Hold, then
// thaws it. Held past net_ticktime, the other nodes count it gone — a
// partition — while its clients' connections stay open and hang: the
// window opened only if another node saw it down or partitioned within
// Hold, which its result says.
type NodePause struct {
	Node    string        `json:"node"`
	Trigger Trigger       `json:"trigger"`
	Hold    time.Duration `json:"hold"`
}

func init() {
	register(Desc[NodePause]{
		Name:    KindNodePause,
		Example: NodePause{Node: NodeLeader, Trigger: Trigger{AfterOrders: 20}, Hold: 20 * time.Second},
		Doc:     "a node of the clustered broker frozen (SIGSTOP) past net_ticktime, then thawed",
		Opens:   protocol.NodePaused,
		Check: func(p NodePause) error {
			return Need(KindNodePause, p.Node != "" && p.Hold > 0, "node and hold")
		},
		Window:  func(NodePause) (history.Ref, string) { return "", "" },
		Touches: func(NodePause) Touch { return Touch{Shared: []string{"broker"}} },
		Trigger: func(p NodePause) Trigger { return p.Trigger },
		Enumerate: func(s *Surface, _ int) []Candidate {
			if !s.Cluster {
				return nil
			}
			return []Candidate{{Faults: []Fault{NodePause{Node: NodeLeader, Trigger: Trigger{AfterOrders: 20}, Hold: 20 * time.Second}}}}
		},
		Shrink: func(_ NodePause, sh *Shrink[NodePause]) {
			sh.Trigger(func(p *NodePause) *Trigger { return &p.Trigger })
		},
	})
}

// Describe implements Fault.
func (p NodePause) Describe() result.Fault {
	return result.Fault{Kind: KindNodePause, Target: p.Node, Detail: fmt.Sprintf("node %s frozen (SIGSTOP) %s, held %s", p.Node, p.Trigger, p.Hold)}
}

// Require implements Requirer: a clustered broker with such a node.
func (p NodePause) Require(env *Env) error { return requireNode(env, p.Node) }

// Needs implements Needs: a clustered broker.
func (NodePause) Needs() []string { return []string{CapCluster} }

// Inject implements Fault.
func (p NodePause) Inject(ctx context.Context, env *Env) result.Fault {
	return nodeHold{fault: p, node: p.Node, trigger: p.Trigger, hold: p.Hold,
		enter:   func(_ context.Context, c infra.Cluster, i int) error { return c.PauseNode(i) },
		leave:   func(_ context.Context, c infra.Cluster, i int) error { return c.ResumeNode(i) },
		entered: "frozen (SIGSTOP)", left: "thawed (SIGCONT)"}.inject(ctx, env)
}
