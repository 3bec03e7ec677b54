package supervisor

import (
	"bufio"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The send queues of the process's own sockets are summed, and the
// receive queues of their peers on this machine: what the peer process has
// not read yet is lost as surely as what was never sent when a kill resets
// the connection. Other sockets' queues are not counted.
func TestParseUnread(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:C350 0100007F:1628 01 0000002A:00000000 01:00000014 00000000     0        0 2222 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:C351 0100007F:1628 01 00000100:00000000 01:00000014 00000000     0        0 3333 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:1628 0100007F:C350 01 00000000:00000010 01:00000014 00000000     0        0 4444 1 0000000000000000 20 4 30 10 -1
   4: 0100007F:1628 0100007F:C351 01 00000000:00000200 01:00000014 00000000     0        0 5555 1 0000000000000000 20 4 30 10 -1
`
	n, err := parseUnread(bufio.NewScanner(strings.NewReader(table)), map[string]bool{"1111": true, "2222": true})
	require.NoError(t, err)
	assert.Equal(t, int64(0x2a+0x10), n, "own 2222's send queue and its peer 4444's receive queue; 3333 and its peer 5555 are another process's")

	_, err = parseUnread(bufio.NewScanner(strings.NewReader("header\n 0: a b 01 zz:0 0 0 0 0 2222\n")), map[string]bool{"2222": true})
	assert.ErrorContains(t, err, "malformed")
}
