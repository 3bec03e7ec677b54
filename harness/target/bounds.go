package target

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Bounds of the format. A target file is input from outside: every number
// or list in it that sizes a loop, an allocation or a wait of faultline's
// has a bound, and the file is refused past it, so that a hostile or
// mistaken file gets an error rather than an out-of-memory crash or a hang.
const (
	// MaxFileSize is the largest target file read (bytes).
	MaxFileSize = 1 << 20
	// maxNodes bounds the YAML tree as the loader walks it: every alias
	// counts as the nodes it stands for, so a few KiB of nested aliases
	// (a "billion laughs") cannot make the walk exponential.
	maxNodes = 100_000
	// maxInstances bounds one process's instances, maxAllInstances the
	// instances of all processes together: each is a real OS process.
	maxInstances    = 16
	maxAllInstances = 32
	maxProcesses    = 16
	maxDatabases    = 16 // each run creates every one
	maxSteps        = 32 // workload steps, sent for every fact
	// maxItems bounds any other list or mapping (routing keys, variants,
	// settings, env, headers, statuses, schema commands, ...).
	maxItems = 256
	// maxDuration bounds every duration (timeouts, lease, rides_out).
	maxDuration = time.Hour
	// maxRestartBackoff bounds restart.backoff: a process down longer than
	// that between restarts is down for the run, not being restarted.
	maxRestartBackoff = time.Minute
)

// checkTree looks at the raw YAML tree before anything decodes it: an
// alias that refers to its own anchor (which would make the walk endless)
// is refused, and so is a tree that aliases expand past maxNodes. Merge
// keys (<<) are aliases too and count the same. It reports whether the
// tree is safe to walk.
func (d *decoder) checkTree(root *yaml.Node) bool {
	e := &expansion{size: map[*yaml.Node]int{}, busy: map[*yaml.Node]bool{}}
	if cycle := e.count(root); cycle != nil {
		d.problem(cycle.Line, "", "alias *%s refers to its own anchor: the file would never end", cycle.Value)
		return false
	}
	// Walk the tree as written, counting each alias as what it stands
	// for, to name the alias where the file grows past the bound.
	total := 0
	var over *yaml.Node
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if over != nil {
			return
		}
		if n.Kind == yaml.AliasNode {
			total += e.size[n.Alias]
		} else {
			total++
		}
		if total > maxNodes {
			over = n
			return
		}
		if n.Kind != yaml.AliasNode {
			for _, c := range n.Content {
				walk(c)
			}
		}
	}
	walk(root)
	if over == nil {
		return true
	}
	if over.Kind == yaml.AliasNode {
		d.problem(over.Line, "", "alias *%s takes the file past %d YAML nodes with its aliases expanded (it stands for %s nodes); aliases may repeat a part, not multiply it",
			over.Value, maxNodes, atMost(e.size[over.Alias]))
	} else {
		d.problem(over.Line, "", "the file has more than %d YAML nodes with its aliases expanded", maxNodes)
	}
	return false
}

// expansion counts the nodes of a tree with its aliases expanded.
type expansion struct {
	// size is the expanded node count of each node counted, saturated at
	// maxNodes+1 so that it cannot overflow.
	size map[*yaml.Node]int
	busy map[*yaml.Node]bool // being counted: an alias to one is a cycle
}

// count fills e.size for n and everything under it, and returns the alias
// of a cycle if it finds one. Each node is counted once (memoized), so the
// work is linear in the nodes as written.
func (e *expansion) count(n *yaml.Node) (cycle *yaml.Node) {
	if _, done := e.size[n]; done {
		return nil
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			e.size[n] = 1
			return nil
		}
		if e.busy[n.Alias] {
			return n
		}
		if c := e.count(n.Alias); c != nil {
			return c
		}
		e.size[n] = e.size[n.Alias]
		return nil
	}
	e.busy[n] = true
	defer delete(e.busy, n)
	total := 1
	for _, c := range n.Content {
		if cycle := e.count(c); cycle != nil {
			return cycle
		}
		total = min(total+e.size[c], maxNodes+1)
	}
	e.size[n] = total
	return nil
}

func atMost(n int) string {
	if n > maxNodes {
		return fmt.Sprintf("more than %d", maxNodes)
	}
	return fmt.Sprint(n)
}
