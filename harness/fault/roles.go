package fault

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline-dev/faultline/harness/history"
)

// Instance is one process instance of a target, as scenarios see it.
type Instance struct {
	Name     string            // its name in the run, e.g. "relay-2"
	Role     string            // producer, relay or consumer
	Points   map[string]string // protocol window → its own crash point name
	EventLog bool              // it writes a protocol event log
}

// Roles resolves the references scenarios use — a role and an instance
// number, "relay-2", or a role alone, "consumer" (its first instance) —
// into a target's instances, their links and crash points. Scenarios never
// name a target's own processes.
type Roles struct {
	byRole map[string][]Instance
}

// NewRoles makes the resolver of the instances, in the target's order.
func NewRoles(instances []Instance) *Roles {
	r := &Roles{byRole: map[string][]Instance{}}
	for _, in := range instances {
		r.byRole[in.Role] = append(r.byRole[in.Role], in)
	}
	return r
}

// DBLink is the run's name of the link of the instance named name to its
// database, BrokerLink of its link to the broker (on a clustered broker,
// to its own node): instance.pg, instance.amqp, as a link reference
// (history.Link) names them by role.
func DBLink(name string) string { return name + dbLinkSuffix }

// BrokerLink: see DBLink.
func BrokerLink(name string) string { return name + brokerLinkSuffix }

// NodeLink is the name of an instance's link to the k-th node (0-based)
// of a clustered broker besides its own.
func NodeLink(instance string, k int) string {
	return instance + brokerLinkSuffix + "-n" + strconv.Itoa(k+1)
}

// IsDBLink reports whether a link is an instance's link to its database.
func IsDBLink(link string) bool { return strings.HasSuffix(link, dbLinkSuffix) }

// IsBrokerLink reports whether a link is an instance's link to the broker
// or to a node of it (BrokerLink, NodeLink).
func IsBrokerLink(link string) bool {
	return strings.HasSuffix(link, brokerLinkSuffix) || strings.Contains(link, brokerLinkSuffix+"-n")
}

const (
	dbLinkSuffix     = "." + history.ToDB
	brokerLinkSuffix = "." + history.ToBroker
)

// Instance resolves ref ("relay-2", "consumer").
func (r *Roles) Instance(ref history.Ref) (Instance, error) {
	role, n := ref.Split()
	ins := r.byRole[role]
	if len(ins) == 0 {
		return Instance{}, fmt.Errorf("the target has no %s", role)
	}
	if n < 1 || n > len(ins) {
		return Instance{}, fmt.Errorf("the target runs %d %s instance(s), not %d", len(ins), role, n)
	}
	return ins[n-1], nil
}

// Count is how many instances the role has.
func (r *Roles) Count(role string) int { return len(r.byRole[role]) }

// All are every instance, by role in pipeline order.
func (r *Roles) All() []Instance {
	var out []Instance
	roles := make([]string, 0, len(r.byRole))
	for role := range r.byRole {
		roles = append(roles, role)
	}
	sort.Strings(roles)
	for _, role := range roles {
		out = append(out, r.byRole[role]...)
	}
	return out
}

// Link resolves a link reference, "relay-1.pg" or "consumer.amqp", into
// the run's link name (instance.pg, instance.amqp).
func (r *Roles) Link(ref history.Link) (string, error) {
	proc, to, err := ref.Split()
	if err != nil {
		return "", err
	}
	in, err := r.Instance(proc)
	if err != nil {
		return "", fmt.Errorf("link %s: %w", ref, err)
	}
	return in.Name + "." + to, nil
}

// Point resolves the crash point at window of the instance ref into the
// instance's own point name; a target that offers none there is an error
// saying so.
func (r *Roles) Point(ref history.Ref, window string) (string, error) {
	in, err := r.Instance(ref)
	if err != nil {
		return "", err
	}
	own, ok := in.Points[window]
	if !ok {
		return "", fmt.Errorf("the target's %s offers no crash point at %s", in.Role, window)
	}
	return own, nil
}
