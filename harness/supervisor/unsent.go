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
// sockets that their peers have not acknowledged yet (the kernel's send
// queues, /proc/net/tcp's tx_queue). A process frozen with none unsent has
// had everything it wrote received: killing it then cannot take a written
// frame back, however slow the machine (a socket closed with unread input
// is reset, and a reset discards what was still queued to send).
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
		n, err := sendQueued(filepath.Join("/proc", strconv.Itoa(inc.pid), "net", table), inodes)
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

// sendQueued sums the tx_queue of the sockets in a /proc/net/tcp table
// whose inode is among inodes. A missing table (no IPv6) holds none.
func sendQueued(path string, inodes map[string]bool) (int64, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseSendQueued(bufio.NewScanner(f), inodes)
}

// parseSendQueued reads a /proc/net/tcp table: after its header line,
// "sl local rem st tx_queue:rx_queue tr:when retrnsmt uid timeout inode ...".
func parseSendQueued(sc *bufio.Scanner, inodes map[string]bool) (int64, error) {
	var total int64
	header := true
	for sc.Scan() {
		if header {
			header = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 || !inodes[f[9]] {
			continue
		}
		tx, _, ok := strings.Cut(f[4], ":")
		if !ok {
			return 0, fmt.Errorf("malformed queue field %q", f[4])
		}
		n, err := strconv.ParseInt(tx, 16, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed send queue %q: %w", tx, err)
		}
		total += n
	}
	return total, sc.Err()
}
