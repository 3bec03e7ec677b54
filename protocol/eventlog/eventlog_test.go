package eventlog_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// countingWriter records each Write call separately.
type countingWriter struct {
	mu     sync.Mutex
	writes [][]byte
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

func (c *countingWriter) all() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Join(c.writes, nil)
}

func TestLogWritesOneJSONLineWithTimeAndProcess(t *testing.T) {
	w := &countingWriter{}
	l := eventlog.New(w, "relay-1")
	assert.Equal(t, "relay-1", l.Process())

	before := time.Now()
	l.Log(eventlog.Entry{Event: eventlog.Published, EventID: "01J0", ClaimID: "relay-1:abc", Sequence: 2})
	after := time.Now()

	require.Len(t, w.writes, 1, "one entry, one write")
	line := w.writes[0]
	require.True(t, bytes.HasSuffix(line, []byte("\n")), "a line ends with a newline")
	assert.Equal(t, 1, bytes.Count(line, []byte("\n")), "exactly one line")

	var raw map[string]any
	require.NoError(t, json.Unmarshal(line, &raw), "%s", line)
	assert.Equal(t, "published", raw["event"])
	assert.Equal(t, "relay-1", raw["process"])
	assert.Equal(t, "01J0", raw["eventId"])
	assert.Equal(t, "relay-1:abc", raw["claimId"])
	assert.NotContains(t, raw, "error", "empty fields are left out")
	assert.NotContains(t, raw, "redelivered")

	var e eventlog.Entry
	require.NoError(t, json.Unmarshal(line, &e))
	assert.Equal(t, time.UTC, e.Time.Location(), "times are UTC")
	assert.False(t, e.Time.Before(before.Add(-time.Millisecond)), "time %s is not before the call %s", e.Time, before)
	assert.False(t, e.Time.After(after), "time %s is not after the call %s", e.Time, after)
}

func TestLogKeepsGivenTimeAndProcess(t *testing.T) {
	w := &countingWriter{}
	l := eventlog.New(w, "order")
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	l.Log(eventlog.Entry{Time: at, Process: "someone-else", Event: eventlog.Committed})
	es, err := eventlog.Read(bytes.NewReader(w.all()))
	require.NoError(t, err)
	require.Len(t, es, 1)
	assert.True(t, at.Equal(es[0].Time), "%s", es[0].Time)
	assert.Equal(t, "someone-else", es[0].Process)
}

func TestHelpers(t *testing.T) {
	w := &countingWriter{}
	l := eventlog.New(w, "inventory")
	l.Event(eventlog.Acked, "evt-1")
	l.Errorf("cannot %s: %d", "connect", 3)
	es, err := eventlog.Read(bytes.NewReader(w.all()))
	require.NoError(t, err)
	require.Len(t, es, 2)
	assert.Equal(t, eventlog.Acked, es[0].Event)
	assert.Equal(t, "evt-1", es[0].EventID)
	assert.Equal(t, eventlog.ErrorOccurred, es[1].Event)
	assert.Equal(t, "cannot connect: 3", es[1].Error)
	assert.Equal(t, "inventory", es[1].Process)
}

func TestBatchWritesAllLinesInOneWrite(t *testing.T) {
	w := &countingWriter{}
	l := eventlog.New(w, "relay-2")
	batch := []eventlog.Entry{
		{Event: eventlog.Claimed, EventID: "a"},
		{Event: eventlog.Claimed, EventID: "b"},
		{Event: eventlog.Claimed, EventID: "c"},
	}
	l.Batch(batch)
	require.Len(t, w.writes, 1, "a batch is one write")
	assert.Equal(t, 3, bytes.Count(w.writes[0], []byte("\n")))

	l.Batch(nil)
	l.Batch([]eventlog.Entry{})
	assert.Len(t, w.writes, 1, "an empty batch writes nothing")

	es, err := eventlog.Read(bytes.NewReader(w.all()))
	require.NoError(t, err)
	require.Len(t, es, 3)
	for i, id := range []string{"a", "b", "c"} {
		assert.Equal(t, id, es[i].EventID, "order kept")
		assert.Equal(t, "relay-2", es[i].Process)
		assert.Equal(t, es[0].Time, es[i].Time, "one batch, one time")
		assert.False(t, es[i].Time.IsZero())
	}
}

// TestLinesAreJSONMarshalBytes: a line is exactly json.Marshal of the entry
// and a newline (HTML characters escaped, nothing indented), whatever
// encodes it, so logs written before and after read the same.
func TestLinesAreJSONMarshalBytes(t *testing.T) {
	w := &countingWriter{}
	l := eventlog.New(w, "relay-1")
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	batch := []eventlog.Entry{
		{Time: at, Event: eventlog.Claimed, EventID: "01J0", ClaimID: "relay-1:abc", AggregateID: "ORD-1", Sequence: 3, Attempt: 2},
		{Time: at, Event: eventlog.Returned, EventID: "01J1", Redelivered: true, Hit: 7, Detail: `<NO_ROUTE> & "quoted" ünïcode` + "\t\u2028"},
		{Time: at, Event: eventlog.ErrorOccurred, Error: strings.Repeat("long error ", 40)},
	}
	l.Batch(batch)
	var want []byte
	for _, e := range batch {
		line, err := json.Marshal(e)
		require.NoError(t, err)
		want = append(append(want, line...), '\n')
	}
	require.Len(t, w.writes, 1)
	assert.Equal(t, string(want), string(w.writes[0]))
}

// chunkyWriter stores each Write in small pieces, yielding between them,
// the way a pipe or socket may take a large write: only the Log's own lock
// keeps two lines from interleaving.
type chunkyWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *chunkyWriter) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i += 64 {
		c.mu.Lock()
		c.buf.Write(p[i:min(i+64, len(p))])
		c.mu.Unlock()
		runtime.Gosched()
	}
	return len(p), nil
}

// TestConcurrentLogsNeverInterleave: many goroutines logging single lines
// and batches; every line parses and none is lost or doubled.
func TestConcurrentLogsNeverInterleave(t *testing.T) {
	for _, sink := range []string{"file", "chunky writer"} {
		t.Run(sink, func(t *testing.T) {
			var (
				l    *eventlog.Log
				read func() ([]eventlog.Entry, error)
			)
			if sink == "file" {
				path := filepath.Join(t.TempDir(), "log.jsonl")
				var err error
				l, err = eventlog.Open(path, "relay-1")
				require.NoError(t, err)
				read = func() ([]eventlog.Entry, error) {
					l.Sync()
					require.NoError(t, l.Close())
					return eventlog.ReadFile(path)
				}
			} else {
				w := &chunkyWriter{}
				l = eventlog.New(w, "relay-1")
				read = func() ([]eventlog.Entry, error) { return eventlog.Read(&w.buf) }
			}
			const goroutines, perG = 16, 200
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range perG {
						id := fmt.Sprintf("g%02d-%04d", g, i)
						if i%10 == 0 {
							// a batch of two, one long line among them
							l.Batch([]eventlog.Entry{
								{Event: eventlog.Claimed, EventID: id, Detail: strings.Repeat("x", 4096)},
								{Event: eventlog.Marked, EventID: id},
							})
							continue
						}
						l.Log(eventlog.Entry{Event: eventlog.Published, EventID: id, Detail: strings.Repeat("y", i)})
					}
				})
			}
			wg.Wait()

			es, err := read()
			require.NoError(t, err)
			perGLines := perG + perG/10 // each batch adds one more line
			require.Len(t, es, goroutines*perGLines)
			seen := map[string]int{}
			for _, e := range es {
				seen[e.Event+"/"+e.EventID]++
			}
			for g := range goroutines {
				for i := range perG {
					id := fmt.Sprintf("g%02d-%04d", g, i)
					if i%10 == 0 {
						assert.Equal(t, 1, seen["claimed/"+id], id)
						assert.Equal(t, 1, seen["marked/"+id], id)
					} else {
						assert.Equal(t, 1, seen["published/"+id], id)
					}
				}
			}
		})
	}
}

func TestOpenAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	for i, ev := range []string{eventlog.Started, eventlog.Control} {
		l, err := eventlog.Open(path, "order")
		require.NoError(t, err, "open %d", i)
		l.Log(eventlog.Entry{Event: ev})
		require.NoError(t, l.Close())
	}
	es, err := eventlog.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, es, 2, "a second Open appends, it does not truncate")
	assert.Equal(t, eventlog.Started, es[0].Event)
	assert.Equal(t, eventlog.Control, es[1].Event)

	_, err = eventlog.Open(filepath.Join(t.TempDir(), "no", "such", "dir", "log"), "order")
	assert.ErrorContains(t, err, "open event log")
}

func TestOpenEmptyPathIsStderr(t *testing.T) {
	l, err := eventlog.Open("", "order")
	require.NoError(t, err)
	assert.NoError(t, l.Close(), "closing a stderr log closes nothing")
	_, err = os.Stderr.Stat()
	assert.NoError(t, err, "stderr is still open")
}

func TestRead(t *testing.T) {
	good1 := `{"time":"2026-01-01T00:00:00Z","process":"relay-1","event":"claimed","eventId":"a"}`
	good2 := `{"time":"2026-01-01T00:00:01Z","process":"relay-1","event":"published","eventId":"a"}`
	for _, tc := range []struct {
		name    string
		in      string
		wantIDs []string // events read, as event names
		wantErr string
	}{
		{name: "empty", in: "", wantIDs: nil},
		{name: "two lines", in: good1 + "\n" + good2 + "\n", wantIDs: []string{"claimed", "published"}},
		{name: "blank lines skipped", in: good1 + "\n\n" + good2 + "\n", wantIDs: []string{"claimed", "published"}},
		{name: "torn last line skipped", in: good1 + "\n" + good2[:len(good2)/2], wantIDs: []string{"claimed"}},
		{name: "torn only line skipped", in: `{"time":"2026`, wantIDs: nil},
		// A kill stopped the write at a page boundary; the restarted
		// instance's first line went on right behind the torn one.
		{name: "torn line with the next instance's line behind it", in: good1 + "\n" + good2[:40] + good1 + "\n" + good2 + "\n", wantIDs: []string{"claimed", "claimed", "published"}},
		{name: "torn line with garbage behind it", in: good1[:40] + `{"not":"an entry"}` + "\n", wantErr: "event log line 1"},
		{name: "an entry behind text that is not an object", in: `garbage` + good1 + "\n", wantErr: "event log line 1"},
		{name: "malformed middle line", in: good1 + "\n" + `{"event":` + "\n" + good2 + "\n", wantErr: "event log line 2"},
		{name: "malformed line after a blank one", in: good1 + "\n\nnot json\n" + good2 + "\n", wantErr: "event log line 3"},
		{name: "malformed last complete line", in: good1 + "\n" + "garbage\n", wantErr: "event log line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, err := eventlog.Read(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, e := range es {
				got = append(got, e.Event)
			}
			assert.Equal(t, tc.wantIDs, got)
		})
	}
}

func TestReadFileMissing(t *testing.T) {
	_, err := eventlog.ReadFile(filepath.Join(t.TempDir(), "missing.jsonl"))
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist, "callers can tell a missing log from a bad one")
	assert.Contains(t, err.Error(), "open event log")
}
