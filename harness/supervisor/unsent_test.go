package supervisor

import (
	"bufio"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The send queues of the process's own sockets are summed; other sockets'
// are not.
func TestParseSendQueued(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:C350 0100007F:1628 01 0000002A:00000000 01:00000014 00000000     0        0 2222 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:C351 0100007F:1628 01 00000100:00000000 01:00000014 00000000     0        0 3333 1 0000000000000000 20 4 30 10 -1
`
	n, err := parseSendQueued(bufio.NewScanner(strings.NewReader(table)), map[string]bool{"1111": true, "2222": true})
	require.NoError(t, err)
	assert.Equal(t, int64(0x2a), n)

	_, err = parseSendQueued(bufio.NewScanner(strings.NewReader("header\n 0: a b 01 zz 0 0 0 0 2222\n")), map[string]bool{"2222": true})
	assert.ErrorContains(t, err, "malformed")
}
