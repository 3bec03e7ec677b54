// Package eventlog is the append-only JSON-lines log every pipeline process
// writes. The harness merges these logs into the timeline of a run, so each
// line says when, which process, what happened, and to which eventId.
//
// A line is written with a single write(2) as soon as it is logged: a process
// killed by SIGKILL loses nothing it had logged. Batches of lines (a claimed
// batch, a batch of marks) go out in one write to keep logging off the hot path.
package eventlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Event names. The harness's checker reads exactly these.
const (
	Started       = "started"
	Control       = "control" // Detail: the control server's bound address
	Committed     = "committed"
	Claimed       = "claimed"
	Published     = "published"
	Returned      = "returned"
	Confirmed     = "confirmed"
	Nacked        = "nacked"
	Unknown       = "unknown-outcome"
	Marked        = "marked"
	Fenced        = "fenced"
	Retry         = "retry-scheduled"
	FailedAlert   = "failed"
	Renewed       = "renewed"
	ClaimLost     = "claim-lost"
	Delivered     = "delivered"
	Duplicate     = "duplicate"
	Reserved      = "reserved"
	HeldBack      = "held-back"
	Acked         = "acked"
	DeadLettered  = "dead-lettered"
	CrashPoint    = "crashpoint"
	Connected     = "connected"
	Disconnected  = "disconnected"
	InboxCleaned  = "inbox-cleaned"
	ErrorOccurred = "error"
)

// Entry is one line of an event log.
type Entry struct {
	Time        time.Time `json:"time"`
	Process     string    `json:"process"`
	Event       string    `json:"event"`
	EventID     string    `json:"eventId,omitempty"`
	ClaimID     string    `json:"claimId,omitempty"`
	AggregateID string    `json:"aggregateId,omitempty"`
	Sequence    int64     `json:"sequence,omitempty"`
	Redelivered bool      `json:"redelivered,omitempty"`
	Attempt     int       `json:"attempt,omitempty"`
	Point       string    `json:"point,omitempty"`
	Hit         int64     `json:"hit,omitempty"`
	Action      string    `json:"action,omitempty"`
	Error       string    `json:"error,omitempty"`
	Detail      string    `json:"detail,omitempty"`
}

// Log appends entries for one process. It is safe for concurrent use.
type Log struct {
	process string
	mu      sync.Mutex
	w       io.Writer
	closer  io.Closer
	now     func() time.Time
}

// Open appends to path (created if missing). An empty path logs to stderr.
func Open(path, process string) (*Log, error) {
	if path == "" {
		return New(os.Stderr, process), nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open event log: %w", err)
	}
	l := New(f, process)
	l.closer = f
	return l, nil
}

// New logs to w.
func New(w io.Writer, process string) *Log {
	return &Log{process: process, w: w, now: time.Now}
}

// Process is the name this log stamps on every entry.
func (l *Log) Process() string { return l.process }

// Log writes one entry; Time and Process are filled in when empty.
func (l *Log) Log(e Entry) {
	l.Batch([]Entry{e})
}

// lineSize is room for a typical line: a claimed line with a ULID, a
// uuid claim id and its aggregate is about 230 bytes.
const lineSize = 256

// Batch writes several entries in one write.
func (l *Log) Batch(entries []Entry) {
	if len(entries) == 0 {
		return
	}
	now := l.now().UTC()
	// An Encoder writes each line straight into the batch's buffer (the
	// same bytes as json.Marshal and a newline, without a copy per line),
	// sized once for the batch instead of regrown as lines come.
	var buf bytes.Buffer
	buf.Grow(lineSize * len(entries))
	enc := json.NewEncoder(&buf)
	for i := range entries {
		e := &entries[i]
		if e.Time.IsZero() {
			e.Time = now
		}
		if e.Process == "" {
			e.Process = l.process
		}
		_ = enc.Encode(e) // an Entry of strings and numbers always marshals; on error nothing is written
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(buf.Bytes())
}

// Event is shorthand for an entry with just an event name and an eventId.
func (l *Log) Event(event, eventID string) {
	l.Log(Entry{Event: event, EventID: eventID})
}

// Errorf logs a process-level error line.
func (l *Log) Errorf(format string, args ...any) {
	l.Log(Entry{Event: ErrorOccurred, Error: fmt.Sprintf(format, args...)})
}

// Sync makes logged lines durable in the file (lines are already written to
// the kernel; a SIGKILL does not lose them). Used before a crash point acts.
func (l *Log) Sync() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f, ok := l.w.(*os.File); ok {
		_ = f.Sync()
	}
}

// Close closes the underlying file, if Open created one.
func (l *Log) Close() error {
	if l.closer == nil {
		return nil
	}
	return l.closer.Close()
}

// Read parses a log written by Log. A process killed by SIGKILL in the
// middle of a write leaves a line without its end (Linux stops a write to a
// file at a page boundary when a fatal signal is pending): as the last line,
// it is skipped; followed by the lines of the instance started after the
// kill, the first of which is glued to it, the torn part is skipped and the
// line behind it kept. Any other malformed line is an error.
func Read(r io.Reader) ([]Entry, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read event log: %w", err)
	}
	var out []Entry
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			// no trailing newline: a torn write
			var e Entry
			if json.Unmarshal(data, &e) == nil {
				out = append(out, e)
			}
			break
		}
		line := data[:i]
		data = data[i+1:]
		if len(line) == 0 {
			continue
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			behind, ok := afterTornWrite(line)
			if !ok {
				return out, fmt.Errorf("event log line %d: %w", lineNo, err)
			}
			e = behind
		}
		out = append(out, e)
	}
	return out, nil
}

// afterTornWrite finds the entry written right behind a torn one on the
// same line: the line starts an object it does not finish, and from a later
// '{' to its end is one whole entry with an event name.
func afterTornWrite(line []byte) (Entry, bool) {
	if len(line) == 0 || line[0] != '{' {
		return Entry{}, false
	}
	for i := 1; i < len(line); i++ {
		if line[i] != '{' {
			continue
		}
		var e Entry
		if json.Unmarshal(line[i:], &e) == nil && e.Event != "" {
			return e, true
		}
	}
	return Entry{}, false
}

// ReadFile reads the log at path.
func ReadFile(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open event log: %w", err)
	}
	defer f.Close()
	return Read(f)
}
