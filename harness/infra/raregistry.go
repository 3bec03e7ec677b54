package infra

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"unicode/utf8"
)

// RabbitMQ 3.10 runs each quorum queue as a Ra server, and a node finds
// its servers again after a crash in its Ra registry on disk
// (<mnesia dir>/quorum/<node>/names.dets), which Ra 2.2 saves some time
// after a server starts (ra_directory: dets auto_save of 500 ms). A node
// crashed before its save comes back with the queue's record but not its
// server: the queue stays leaderless ("leader not known", basic.get
// times out) for good. Whether the save has happened is on the node's
// disk, so a fault that crashes the broker waits until every quorum
// queue is named there (QueueRegistry), rather than for a time.

// QueueRegistry is a provider that can read its broker nodes' Ra
// registries on disk.
type QueueRegistry interface {
	// QueueServersSaved compares the quorum queues the broker lists with
	// what each member node's registry on disk names.
	QueueServersSaved(ctx context.Context) (RegistryCheck, error)
}

// RegistryCheck is what QueueServersSaved saw.
type RegistryCheck struct {
	// Servers counts the quorum queue servers the broker lists: each
	// quorum queue once on each of its member nodes.
	Servers int
	// Unsaved are the servers no registry on disk names yet, as "queue q
	// in vhost v on node n", sorted; a queue listed without its members
	// (not yet in the broker's statistics) is one of them until they are.
	Unsaved []string
	// Unnamed are the servers of quorum queues whose server name RabbitMQ
	// draws at random (vhost and name together over 255 bytes): no
	// registry can be searched for them.
	Unnamed []string
}

// Saved says whether every server that can be looked for is named on
// disk.
func (c RegistryCheck) Saved() bool { return len(c.Unsaved) == 0 }

// String says the check in a few words.
func (c RegistryCheck) String() string {
	s := fmt.Sprintf("%d quorum queue servers, %d named on disk", c.Servers, c.Servers-len(c.Unsaved)-len(c.Unnamed))
	if len(c.Unsaved) > 0 {
		s += "; not yet: " + strings.Join(c.Unsaved, ", ")
	}
	if len(c.Unnamed) > 0 {
		s += "; named at random, not looked for: " + strings.Join(c.Unnamed, ", ")
	}
	return s
}

// quorumMember is a quorum queue as the management API lists it.
type quorumMember struct {
	Name    string   `json:"name"`
	VHost   string   `json:"vhost"`
	Type    string   `json:"type"`
	Members []string `json:"members"`
}

// quorumQueues lists every vhost's quorum queues with their member nodes.
func (m mgmtAPI) quorumQueues(ctx context.Context) ([]quorumMember, error) {
	var all []quorumMember
	if _, err := m.do(ctx, http.MethodGet, "/api/queues?columns=name,vhost,type,members", nil, &all, http.StatusOK); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	out := all[:0]
	for _, q := range all {
		if q.Type == "quorum" {
			out = append(out, q)
		}
	}
	return out, nil
}

// queueServersSaved is QueueServersSaved for any provider: the queues
// listed through onNode (a running node's management API), each node's
// registry read by readRegistry (see checkRegistries).
func queueServersSaved(ctx context.Context, onNode func(ctx context.Context, call func(ctx context.Context, api mgmtAPI) error) error,
	readRegistry func(ctx context.Context, node string) ([]byte, error)) (RegistryCheck, error) {
	var queues []quorumMember
	err := onNode(ctx, func(ctx context.Context, api mgmtAPI) (err error) {
		queues, err = api.quorumQueues(ctx)
		return err
	})
	if err != nil {
		return RegistryCheck{}, err
	}
	return checkRegistries(ctx, queues, readRegistry)
}

// checkRegistries compares queues, as the broker lists them, with the
// registries readRegistry reads: the named node's names.dets (nil, no
// error, while the node has none).
func checkRegistries(ctx context.Context, queues []quorumMember, readRegistry func(ctx context.Context, node string) ([]byte, error)) (RegistryCheck, error) {
	var c RegistryCheck
	named := map[string]map[string]bool{}
	for _, q := range queues {
		if len(q.Members) == 0 {
			// Counted as unsaved, so that a check never passes on a
			// queue it could not look for.
			c.Servers++
			c.Unsaved = append(c.Unsaved, fmt.Sprintf("queue %q in vhost %q (no members listed yet)", q.Name, q.VHost))
			continue
		}
		server, nameable := raServerName(q.VHost, q.Name)
		for _, node := range q.Members {
			c.Servers++
			if !nameable {
				c.Unnamed = append(c.Unnamed, fmt.Sprintf("queue %q in vhost %q on node %s", q.Name, q.VHost, node))
				continue
			}
			names, ok := named[node]
			if !ok {
				b, err := readRegistry(ctx, node)
				if err != nil {
					return RegistryCheck{}, fmt.Errorf("read the Ra registry of node %s: %w", node, err)
				}
				names = map[string]bool{}
				for _, n := range detsServerNames(b) {
					names[n] = true
				}
				named[node] = names
			}
			if !names[server] {
				c.Unsaved = append(c.Unsaved, fmt.Sprintf("queue %q in vhost %q on node %s", q.Name, q.VHost, node))
			}
		}
	}
	sort.Strings(c.Unsaved)
	sort.Strings(c.Unnamed)
	return c, nil
}

// raServerName is the name RabbitMQ 3.10 gives a quorum queue's Ra server
// (rabbit_queue_type_util:qname_to_internal_name): "<vhost>_<queue>",
// the default vhost written "%2F". Past 255 bytes it draws one at random:
// ok is false.
func raServerName(vhost, queue string) (name string, ok bool) {
	if vhost == "/" {
		vhost = "%2F"
	}
	name = vhost + "_" + queue
	return name, len(name) <= 255
}

// Dets (format 9) keeps each object of a set table in a slot of its own:
// the slot's size, its status (detsActive while the object lives,
// detsFree once deleted), then the object's size and the object in
// Erlang's external term format, each size counting its own four bytes.
// Ra's registry holds {ServerName, UId}.
const (
	detsActive = 0x12345678
	detsFree   = 0x03abcdef
)

// detsServerNames are the atoms that live objects of a dets file of
// {Name, ...} tuples begin with, read as Ra's restart will read the
// file: a deleted object does not count, a torn or foreign one is
// skipped. It scans for the active status word rather than following the
// file's hash segments, so it needs nothing of the layout but the slot.
func detsServerNames(b []byte) []string {
	var names []string
	for i := 4; i+12 <= len(b); i++ {
		if binary.BigEndian.Uint32(b[i:]) != detsActive {
			continue
		}
		slot := int(binary.BigEndian.Uint32(b[i-4:]))
		if slot < 12 || i-4+slot > len(b) {
			continue
		}
		// A slot of a set holds one object; a bag's holds several.
		for at, end := i+4, i-4+slot; at+4 <= end; {
			size := int(binary.BigEndian.Uint32(b[at:]))
			if size <= 4 || at+size > end {
				break
			}
			if name, ok := tupleAtom(b[at+4 : at+size]); ok {
				names = append(names, name)
			}
			at += size
		}
	}
	return names
}

// tupleAtom is the first element of term, an Erlang tuple in external
// term format, when that element is an atom.
func tupleAtom(term []byte) (string, bool) {
	if len(term) < 3 || term[0] != 131 {
		return "", false
	}
	switch term[1] {
	case 104: // SMALL_TUPLE_EXT
		term = term[3:]
	case 105: // LARGE_TUPLE_EXT
		if len(term) < 6 {
			return "", false
		}
		term = term[6:]
	default:
		return "", false
	}
	if len(term) < 2 {
		return "", false
	}
	var n, from int
	latin1 := false
	switch term[0] {
	case 100: // ATOM_EXT, Latin-1
		latin1 = true
		fallthrough
	case 118: // ATOM_UTF8_EXT
		if len(term) < 3 {
			return "", false
		}
		n, from = int(binary.BigEndian.Uint16(term[1:])), 3
	case 115: // SMALL_ATOM_EXT, Latin-1
		latin1 = true
		fallthrough
	case 119: // SMALL_ATOM_UTF8_EXT
		n, from = int(term[1]), 2
	default:
		return "", false
	}
	if from+n > len(term) {
		return "", false
	}
	raw := term[from : from+n]
	if !latin1 {
		if !utf8.Valid(raw) {
			return "", false
		}
		return string(raw), true
	}
	runes := make([]rune, len(raw))
	for k, c := range raw {
		runes[k] = rune(c)
	}
	return string(runes), true
}
