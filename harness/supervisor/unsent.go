package supervisor

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Unsent is how many bytes the current incarnation has written to its TCP
// sockets that have not yet been read by the process at the other end:
// what its own send queues hold (the peer's kernel has not acknowledged
// it, /proc/net/tcp's tx_queue) and, for a peer on this machine (every
// link runs through a proxy on loopback), what the peer's socket has
// received and its process not read (the peer's rx_queue). A process
// frozen with none unsent has had everything it wrote read: killing it
// then cannot take a written frame back, however slow the machine. A
// socket closed with unread input is reset, and a reset discards both what
// was still queued to send and what the peer had received but not read.
func (p *Process) Unsent() (int64, error) {
	inc := p.current()
	if inc.exited() {
		return 0, fmt.Errorf("%s (pid %d): %w (%s)", p.spec.Name, inc.pid, ErrNotRunning, inc.reason)
	}
	inodes, err := socketInodes(inc.pid)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.spec.Name, err)
	}
	var total int64
	for _, table := range []string{"tcp", "tcp6"} {
		n, err := unreadBy(filepath.Join("/proc", strconv.Itoa(inc.pid), "net", table), inodes)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p.spec.Name, err)
		}
		total += n
	}
	return total, nil
}

// socketInodes are the inodes of the sockets pid holds open.
func socketInodes(pid int) (map[string]bool, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list the sockets of pid %d: %w", pid, err)
	}
	out := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if err != nil {
			continue // closed since the listing
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			out[strings.TrimSuffix(inode, "]")] = true
		}
	}
	return out, nil
}

// unreadBy sums, in a /proc/net/tcp table, the tx_queue of the sockets
// whose inode is among inodes and the rx_queue of their peers' sockets in
// the same table. A missing table (no IPv6) holds none.
func unreadBy(path string, inodes map[string]bool) (int64, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseUnread(bufio.NewScanner(f), inodes)
}

// tcpEntry is one socket of a /proc/net/tcp table.
type tcpEntry struct {
	local, remote, inode string
	tx, rx               int64
}

// parseUnread reads a /proc/net/tcp table: after its header line,
// "sl local rem st tx_queue:rx_queue tr:when retrnsmt uid timeout inode
// ...". It sums the send queues of the sockets in inodes and the receive
// queues of the sockets connected to them (local and remote swapped).
func parseUnread(sc *bufio.Scanner, inodes map[string]bool) (int64, error) {
	var entries []tcpEntry
	header := true
	for sc.Scan() {
		if header {
			header = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		txs, rxs, ok := strings.Cut(f[4], ":")
		if !ok {
			return 0, fmt.Errorf("malformed queue field %q", f[4])
		}
		tx, err := strconv.ParseInt(txs, 16, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed send queue %q: %w", txs, err)
		}
		rx, err := strconv.ParseInt(rxs, 16, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed receive queue %q: %w", rxs, err)
		}
		entries = append(entries, tcpEntry{local: f[1], remote: f[2], inode: f[9], tx: tx, rx: rx})
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	peerOf := map[string]bool{} // "local remote" of each of our sockets' peers
	var total int64
	for _, e := range entries {
		if inodes[e.inode] {
			total += e.tx
			peerOf[e.remote+" "+e.local] = true
		}
	}
	for _, e := range entries {
		if !inodes[e.inode] && peerOf[e.local+" "+e.remote] {
			total += e.rx
		}
	}
	return total, nil
}
