package history

import (
	"fmt"
	"strconv"
	"strings"
)

// Ref names one process instance of a target the way scenarios and
// schedules do, by its role, never by the target's own process names:
// "relay-2" is the relay role's 2nd instance, "consumer" (a role alone)
// its role's 1st. A run maps each to the instance's name in it
// (Record.Instances).
type Ref string

// RefOf is the reference of role's n-th instance (1-based).
func RefOf(role string, n int) Ref { return Ref(role + "-" + strconv.Itoa(n)) }

// Split is the role and the 1-based number r names: "relay-2" is relay's
// 2nd, "consumer" its role's 1st.
func (r Ref) Split() (role string, n int) {
	s := string(r)
	if i := strings.LastIndexByte(s, '-'); i > 0 {
		if k, err := strconv.Atoi(s[i+1:]); err == nil {
			return s[:i], k
		}
	}
	return s, 1
}

// Role is the role r names.
func (r Ref) Role() string {
	role, _ := r.Split()
	return role
}

// DB is the reference of the instance's link to its database, Broker of
// its link to the broker (on a clustered broker, to its own node).
func (r Ref) DB() Link { return Link(string(r) + "." + ToDB) }

// Broker: see DB.
func (r Ref) Broker() Link { return Link(string(r) + "." + ToBroker) }

// The far ends of an instance's links, as a link reference names them.
const (
	ToDB     = "pg"
	ToBroker = "amqp"
)

// Link names one instance's link by reference: "relay-1.pg" (to its
// database) or "consumer.amqp" (to the broker).
type Link string

// Split is the instance a link reference is of and its far end (ToDB,
// ToBroker); a reference of any other form is an error saying the form.
func (l Link) Split() (Ref, string, error) {
	inst, to, ok := strings.Cut(string(l), ".")
	if !ok || inst == "" || (to != ToDB && to != ToBroker) {
		return "", "", fmt.Errorf("link %q: want ROLE[-N].%s or ROLE[-N].%s", string(l), ToDB, ToBroker)
	}
	return Ref(inst), to, nil
}
