package relay

import (
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/topology"
	"github.com/faultline-dev/faultline/system/variant"
)

// node is a stand-in for one node of a cluster: a TCP forwarder on
// 127.0.0.1 to the test's one broker, which can be cut off (every
// connection closed, new ones closed at once) or frozen (every byte held:
// a paused node, which answers nothing and closes nothing).
type node struct {
	t        *testing.T
	ln       net.Listener
	target   string
	served   atomic.Int64 // connections forwarded
	refused  atomic.Int64 // connections closed at once while cut off
	mu       sync.Mutex
	conns    []net.Conn
	cut      bool
	frozen   chan struct{} // non-nil while frozen; closed when the node ends
	ended    chan struct{}
	copyDone sync.WaitGroup
}

func newNode(t *testing.T, brokerURL string) (*node, string) {
	t.Helper()
	u, err := url.Parse(brokerURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	n := &node{t: t, ln: ln, target: u.Host, ended: make(chan struct{})}
	go n.accept()
	t.Cleanup(n.close)
	u.Host = ln.Addr().String()
	return n, u.String()
}

func (n *node) accept() {
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return
		}
		n.mu.Lock()
		if n.cut {
			n.mu.Unlock()
			n.refused.Add(1)
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", n.target, 5*time.Second)
		if err != nil {
			n.mu.Unlock()
			c.Close()
			continue
		}
		n.served.Add(1)
		n.conns = append(n.conns, c, up)
		n.copyDone.Add(2)
		n.mu.Unlock()
		go n.pipe(up, c)
		go n.pipe(c, up)
	}
}

// pipe copies src to dst, holding what it read while the node is frozen.
func (n *node) pipe(dst, src net.Conn) {
	defer n.copyDone.Done()
	buf := make([]byte, 32<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			n.mu.Lock()
			frozen := n.frozen
			n.mu.Unlock()
			if frozen != nil {
				select {
				case <-frozen:
				case <-n.ended:
				}
				return // a frozen node's links are never thawed here
			}
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			return
		}
	}
}

// cutOff closes every link through the node and refuses new ones: a node
// killed or partitioned away.
func (n *node) cutOff() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut = true
	for _, c := range n.conns {
		c.Close()
	}
	n.conns = nil
}

// freeze holds every byte on the node's links from now on: a paused node.
func (n *node) freeze() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.frozen = make(chan struct{})
}

func (n *node) close() {
	n.ln.Close()
	n.mu.Lock()
	close(n.ended)
	for _, c := range n.conns {
		c.Close()
	}
	n.conns = nil
	n.mu.Unlock()
	n.copyDone.Wait()
}

// The relay connects to the first node of --amqp-urls; when that node is
// lost (cut off, or frozen: noticed by the heartbeat) the correct relay
// goes on through the next node, and single-node keeps dialling the lost
// one, publishing nothing.
func TestRelayFailsOverToTheNextNode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		variant string
		lose    func(*node)
	}{
		{"cut off", "", (*node).cutOff},
		{"frozen", "", (*node).freeze},
		{"single-node cut off", variant.SingleNode, (*node).cutOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			require.NoError(t, topology.DeclareConsumer(e.channel(), topology.QueueOptions{}))
			first, firstURL := newNode(t, e.amqp)
			second, secondURL := newNode(t, e.amqp)
			c := e.config("relay-1")
			c.AMQPURLs = firstURL + "," + secondURL
			c.Heartbeat, c.ReconnectMax, c.ConfirmTimeout = time.Second, 200*time.Millisecond, 10*time.Second
			before := e.insert(2)
			e.runVariant(tc.variant, c)
			e.waitFor("the first rows Published", func() bool { return e.row(before[1]).status == "Published" })
			require.Positive(t, first.served.Load())
			require.Zero(t, second.served.Load(), "the first node answered: the second is not dialled")

			tc.lose(first)
			after := e.insertMore(2, 100)
			if tc.variant == variant.SingleNode {
				e.waitFor("three dials of the lost node", func() bool { return first.refused.Load() >= 3 })
				assert.Zero(t, second.served.Load(), "single-node never dials the second node")
				// Claimed or not (a claim can land before the relay sees its
				// connection gone), none of them went out.
				for _, id := range after {
					assert.NotEqual(t, "Published", e.row(id).status, id)
				}
				return
			}
			e.waitFor("the later rows Published through the second node", func() bool {
				return e.row(after[0]).status == "Published" && e.row(after[1]).status == "Published"
			})
			assert.Positive(t, second.served.Load())
			var nodes []string
			for _, x := range e.log("relay-1") {
				if x.Event == eventlog.Connected && strings.HasPrefix(x.Detail, "amqp") {
					nodes = append(nodes, x.Detail)
				}
			}
			assert.Equal(t, []string{"amqp node=1/2", "amqp node=2/2"}, nodes)
		})
	}
}

// nack-as-success: a full quorum queue with reject-publish nacks the later
// publishes; the variant marks them Published all the same (the correct
// relay retries them: TestFullQueueNacksAndIsNotPublished).
func TestNackAsSuccessMarksNackedRowsPublished(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, topology.DeclareConsumer(e.channel(), topology.QueueOptions{MaxLength: 1}))
	ids := e.insert(6)
	c := e.config("relay-1")
	c.BatchSize = 2
	e.runVariant(variant.NackAsSuccess, c)
	e.waitFor("every row Published", func() bool {
		for _, id := range ids {
			if e.row(id).status != "Published" {
				return false
			}
		}
		return true
	})
	// A mark is logged after its row is written: wait for the lines.
	entries := e.waitLogged("relay-1", eventlog.Marked, 6)
	assert.Positive(t, count(entries, eventlog.Nacked), "the broker nacked some")
	assert.Equal(t, 6, count(entries, eventlog.Marked), "nacked rows marked too")
	for _, id := range ids {
		assert.Zero(t, e.row(id).attempts, "%s: a nack counted no failed attempt", id)
	}
	q, err := e.channel().QueueDeclarePassive(topology.Queue, true, false, false, false, nil)
	require.NoError(t, err)
	assert.Less(t, q.Messages, 6, "the nacked messages are not in the queue")
}
