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

// KindPartition is the node-partition fault's kind, as a schedule names
// it.
const KindPartition = "node-partition"

// Partition cuts a node of a clustered broker off from the other nodes
// (the links their distribution traffic goes through are down) for For,
// while the node's own clients still reach it, then heals the cut. The
// window opened only if the cluster saw the partition (a node down or a
// partition reported) within For, which its result says.
type Partition struct {
	Node    string        `json:"node"`
	Trigger Trigger       `json:"trigger"`
	For     time.Duration `json:"for"`
}

func init() {
	register(Desc[Partition]{
		Name:    KindPartition,
		Example: Partition{Node: NodeLeader, Trigger: Trigger{AfterOrders: 20}, For: 20 * time.Second},
		Doc:     "a node of the clustered broker cut off from the other nodes, its clients still reaching it, then healed",
		Opens:   protocol.NodePartitioned,
		Check: func(p Partition) error {
			return Need(KindPartition, p.Node != "" && p.For > 0, "node and for")
		},
		Window:  func(Partition) (history.Ref, string) { return "", "" },
		Touches: func(Partition) Touch { return Touch{Shared: []string{"broker"}} },
		Trigger: func(p Partition) Trigger { return p.Trigger },
		Enumerate: func(s *Surface, _ int) []Candidate {
			if !s.Cluster {
				return nil
			}
			return []Candidate{{Faults: []Fault{Partition{Node: NodeLeader, Trigger: Trigger{AfterOrders: 20}, For: 20 * time.Second}}}}
		},
		Shrink: func(_ Partition, sh *Shrink[Partition]) {
			sh.Trigger(func(p *Partition) *Trigger { return &p.Trigger })
		},
	})
}

// Describe implements Fault.
func (p Partition) Describe() result.Fault {
	return result.Fault{Kind: KindPartition, Target: p.Node, Detail: fmt.Sprintf("node %s cut off from the other nodes %s for %s", p.Node, p.Trigger, p.For)}
}

// Require implements Requirer: a clustered broker with such a node.
func (p Partition) Require(env *Env) error { return requireNode(env, p.Node) }

// Needs implements Needs: a clustered broker.
func (Partition) Needs() []string { return []string{CapCluster} }

// Inject implements Fault.
func (p Partition) Inject(ctx context.Context, env *Env) result.Fault {
	return nodeHold{fault: p, node: p.Node, trigger: p.Trigger, hold: p.For,
		enter:   func(ctx context.Context, c infra.Cluster, i int) error { return c.Partition(ctx, i) },
		leave:   func(ctx context.Context, c infra.Cluster, i int) error { return c.Heal(ctx, i) },
		entered: "cut off from the other nodes", left: "reachable by the other nodes again"}.inject(ctx, env)
}
