package infra

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// detsSlot is one dets slot of status holding objects, each a term in
// external term format; each size counts itself.
func detsSlot(status uint32, objects ...[]byte) []byte {
	size := 8
	for _, o := range objects {
		size += 4 + len(o)
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(size))
	b = binary.BigEndian.AppendUint32(b, status)
	for _, o := range objects {
		b = binary.BigEndian.AppendUint32(b, uint32(4+len(o)))
		b = append(b, o...)
	}
	return b
}

// nameUID is the term {Name, <<"UID">>} with Name's atom written with tag
// (100 ATOM_EXT, 115 SMALL_ATOM_EXT, 118 ATOM_UTF8_EXT, 119
// SMALL_ATOM_UTF8_EXT).
func nameUID(tag byte, name string) []byte {
	b := []byte{131, 104, 2, tag}
	if tag == 100 || tag == 118 {
		b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
	} else {
		b = append(b, byte(len(name)))
	}
	b = append(b, name...)
	return append(b, 109, 0, 0, 0, 3, 'U', 'I', 'D')
}

func TestDetsServerNames(t *testing.T) {
	header := make([]byte, 64)
	cases := []struct {
		name string
		file []byte
		want []string
	}{
		{"empty file", nil, nil},
		{"header only", header, nil},
		{"a live object", append(append([]byte{}, header...), detsSlot(detsActive, nameUID(100, "v_q"))...), []string{"v_q"}},
		{"a deleted object", append(append([]byte{}, header...), detsSlot(detsFree, nameUID(100, "v_q"))...), nil},
		{
			"a deleted queue and a live one",
			append(append(append([]byte{}, header...), detsSlot(detsFree, nameUID(100, "v_q.dead"))...), detsSlot(detsActive, nameUID(100, "v_q"))...),
			[]string{"v_q"},
		},
		{"every atom encoding", append(append(append(append(detsSlot(detsActive, nameUID(100, "a")),
			detsSlot(detsActive, nameUID(115, "b"))...),
			detsSlot(detsActive, nameUID(118, "c"))...),
			detsSlot(detsActive, nameUID(119, "d"))...),
			detsSlot(detsActive, nameUID(118, "é"))...),
			[]string{"a", "b", "c", "d", "é"}},
		{"Latin-1 atom", detsSlot(detsActive, []byte{131, 104, 2, 115, 2, 'v', 0xe9, 106}), []string{"vé"}},
		{"a bag's slot of two", detsSlot(detsActive, nameUID(119, "x"), nameUID(119, "y")), []string{"x", "y"}},
		{"torn: the slot runs past the end", detsSlot(detsActive, nameUID(119, "x"))[:20], nil},
		{"torn: the object runs past its slot", func() []byte {
			b := detsSlot(detsActive, nameUID(119, "x"))
			binary.BigEndian.PutUint32(b[8:], 200)
			return b
		}(), nil},
		{"not a tuple", detsSlot(detsActive, []byte{131, 100, 0, 1, 'x'}), nil},
		{"a tuple of no atom", detsSlot(detsActive, []byte{131, 104, 1, 97, 7}), nil},
		{"not a term", detsSlot(detsActive, []byte{1, 2, 3, 4}), nil},
		{"an atom that says it is longer", detsSlot(detsActive, []byte{131, 104, 2, 119, 9, 'x'}), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, detsServerNames(tc.file))
		})
	}
}

// testdata/ra-names.dets is a RabbitMQ 3.10 node's names.dets after two
// runs: one whose queue and dead-letter queue were deleted with their
// vhost, then one whose dead-letter queue was deleted.
func TestDetsServerNamesOfARealRegistry(t *testing.T) {
	b, err := os.ReadFile("testdata/ra-names.dets")
	require.NoError(t, err)
	assert.Equal(t, []string{"fl_broker_restart_over_backlog_5_d75ff8_inventory.order-events"}, detsServerNames(b))
}

func TestRaServerName(t *testing.T) {
	name, ok := raServerName("/", "orders")
	assert.True(t, ok)
	assert.Equal(t, "%2F_orders", name)
	name, ok = raServerName("fl_x", "orders.dead")
	assert.True(t, ok)
	assert.Equal(t, "fl_x_orders.dead", name)
	_, ok = raServerName("v", strings.Repeat("q", 253))
	assert.True(t, ok, "255 bytes")
	_, ok = raServerName("v", strings.Repeat("q", 254))
	assert.False(t, ok, "256 bytes")
}

func TestCheckRegistries(t *testing.T) {
	registries := map[string][]byte{
		// node a has saved both queues; node b only the dead-letter
		// queue, whose name begins with the other's.
		"a": append(detsSlot(detsActive, nameUID(100, "v_q")), detsSlot(detsActive, nameUID(100, "v_q.dead"))...),
		"b": detsSlot(detsActive, nameUID(100, "v_q.dead")),
	}
	reads := map[string]int{}
	read := func(_ context.Context, node string) ([]byte, error) {
		reads[node]++
		if node == "down" {
			return nil, errors.New("no such file")
		}
		return registries[node], nil
	}
	ctx := context.Background()

	t.Run("a server one member has not saved", func(t *testing.T) {
		c, err := checkRegistries(ctx, []quorumMember{
			{Name: "q", VHost: "v", Members: []string{"a", "b"}},
			{Name: "q.dead", VHost: "v", Members: []string{"a", "b"}},
		}, read)
		require.NoError(t, err)
		assert.Equal(t, 4, c.Servers)
		assert.Equal(t, []string{`queue "q" in vhost "v" on node b`}, c.Unsaved)
		assert.False(t, c.Saved())
		assert.Equal(t, 1, reads["a"], "a node's registry is read once a check")
	})
	t.Run("every server saved", func(t *testing.T) {
		c, err := checkRegistries(ctx, []quorumMember{{Name: "q", VHost: "v", Members: []string{"a"}}}, read)
		require.NoError(t, err)
		assert.True(t, c.Saved())
		assert.Equal(t, "1 quorum queue servers, 1 named on disk", c.String())
	})
	t.Run("a node with no registry yet", func(t *testing.T) {
		c, err := checkRegistries(ctx, []quorumMember{{Name: "q", VHost: "v", Members: []string{"new"}}}, read)
		require.NoError(t, err)
		assert.False(t, c.Saved())
	})
	t.Run("a registry that cannot be read", func(t *testing.T) {
		_, err := checkRegistries(ctx, []quorumMember{{Name: "q", VHost: "v", Members: []string{"down"}}}, read)
		assert.ErrorContains(t, err, "node down")
	})
	t.Run("a name drawn at random", func(t *testing.T) {
		c, err := checkRegistries(ctx, []quorumMember{
			{Name: strings.Repeat("q", 300), VHost: "v", Members: []string{"a", "b"}},
			{Name: "q", VHost: "v", Members: []string{"a"}},
		}, read)
		require.NoError(t, err)
		assert.True(t, c.Saved(), "nothing else to look for")
		assert.Len(t, c.Unnamed, 2, "one per member")
		assert.Contains(t, c.String(), "3 quorum queue servers, 1 named on disk")
		assert.Contains(t, c.String(), "not looked for")
	})
	t.Run("a queue listed without its members", func(t *testing.T) {
		c, err := checkRegistries(ctx, []quorumMember{{Name: "q", VHost: "v"}}, read)
		require.NoError(t, err)
		assert.False(t, c.Saved(), "not saved until it can be looked for")
		assert.Equal(t, 1, c.Servers)
		assert.Equal(t, []string{`queue "q" in vhost "v" (no members listed yet)`}, c.Unsaved)
	})
}
