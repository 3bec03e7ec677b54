package eventlog_test

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/faultline-dev/faultline/protocol/eventlog"
)

// benchEntries are the lines of one claimed batch, as the relay logs them.
func benchEntries(n int) []eventlog.Entry {
	out := make([]eventlog.Entry, n)
	for i := range out {
		out[i] = eventlog.Entry{Event: eventlog.Claimed, EventID: fmt.Sprintf("01J9ZQ4N8W3K5V7X2Y6T%06d", i),
			ClaimID: "relay-1:3f2b8c1e-6d4a-4f7e-9b0c-1a2b3c4d5e6f", AggregateID: fmt.Sprintf("ORD-%06d", i), Sequence: 1, Attempt: 1}
	}
	return out
}

func openBenchLog(b *testing.B) *eventlog.Log {
	b.Helper()
	l, err := eventlog.Open(filepath.Join(b.TempDir(), "relay-1.jsonl"), "relay-1")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// lineBytes is the size of the lines entries make.
func lineBytes(b *testing.B, entries []eventlog.Entry) int64 {
	b.Helper()
	w := &countingWriter{}
	eventlog.New(w, "relay-1").Batch(append([]eventlog.Entry(nil), entries...))
	return int64(len(w.all()))
}

// BenchmarkLog: one entry appended to a file (one write(2) per entry).
func BenchmarkLog(b *testing.B) {
	l := openBenchLog(b)
	e := benchEntries(1)[0]
	b.SetBytes(lineBytes(b, []eventlog.Entry{e}))
	b.ReportAllocs()
	for b.Loop() {
		l.Log(e)
	}
}

// BenchmarkBatch: 100 entries appended to a file. batch-100 is Log.Batch
// (one write); one-by-one is the baseline of 100 Log calls (100 writes);
// discard is Log.Batch to io.Discard, the encoding alone.
func BenchmarkBatch(b *testing.B) {
	template := benchEntries(100)
	size := lineBytes(b, template)
	entries := make([]eventlog.Entry, len(template))
	b.Run("batch-100", func(b *testing.B) {
		l := openBenchLog(b)
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			copy(entries, template) // Batch stamps Time and Process in place
			l.Batch(entries)
		}
	})
	b.Run("one-by-one", func(b *testing.B) {
		l := openBenchLog(b)
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, e := range template {
				l.Log(e)
			}
		}
	})
	b.Run("discard", func(b *testing.B) {
		l := eventlog.New(io.Discard, "relay-1")
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			copy(entries, template)
			l.Batch(entries)
		}
	})
}
