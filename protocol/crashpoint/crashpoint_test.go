package crashpoint

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/protocol/eventlog"
)

func TestParseArming(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		want    Arming
		wantErr string // empty: valid
	}{
		{spec: "kill", want: Arming{Action: Kill, Hit: 1}},
		{spec: "kill@3", want: Arming{Action: Kill, Hit: 3}},
		{spec: "pause@2", want: Arming{Action: Pause, Hit: 2}},
		{spec: "pause", want: Arming{Action: Pause, Hit: 1}},
		{spec: "delay:200ms@*", want: Arming{Action: Delay, Delay: 200 * time.Millisecond, Hit: 0}},
		{spec: "delay:1s", want: Arming{Action: Delay, Delay: time.Second, Hit: 1}},
		{spec: "  kill@*\n", want: Arming{Action: Kill, Hit: 0}},
		{spec: "explode", wantErr: `unknown action "explode"`},
		{spec: "", wantErr: "unknown action"},
		{spec: "kill@0", wantErr: "hit must be a number >= 1 or *"},
		{spec: "kill@-2", wantErr: "hit must be a number >= 1 or *"},
		{spec: "kill@x", wantErr: "hit must be a number >= 1 or *"},
		{spec: "kill@", wantErr: "hit must be a number >= 1 or *"},
		{spec: "delay", wantErr: "delay needs a positive duration"},
		{spec: "delay:", wantErr: "delay needs a positive duration"},
		{spec: "delay:-1s", wantErr: "delay needs a positive duration"},
		{spec: "delay:0s", wantErr: "delay needs a positive duration"},
		{spec: "delay:soon", wantErr: "delay needs a positive duration"},
		{spec: "kill:3", wantErr: "kill takes no argument"},
		{spec: "pause:1s", wantErr: "pause takes no argument"},
		{spec: "hold@2", want: Arming{Action: Hold, Hit: 2}},
		{spec: "hold:1s", wantErr: "hold takes no argument"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := ParseArming(tc.spec)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Contains(t, err.Error(), "crash point arming", "the error says what was being parsed")
				assert.Equal(t, Arming{}, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseList(t *testing.T) {
	for _, tc := range []struct {
		name    string
		list    string
		want    map[string]Arming
		wantErr string
	}{
		{name: "empty", list: "", want: map[string]Arming{}},
		{name: "only separators", list: " , ,", want: map[string]Arming{}},
		{name: "one", list: "relay.after-confirm=kill@3",
			want: map[string]Arming{RelayAfterConfirm: {Action: Kill, Hit: 3}}},
		{name: "several with spaces", list: " relay.after-confirm = kill@3 , relay.after-claim=delay:200ms@*,",
			want: map[string]Arming{
				RelayAfterConfirm: {Action: Kill, Hit: 3},
				RelayAfterClaim:   {Action: Delay, Delay: 200 * time.Millisecond},
			}},
		{name: "missing =", list: "relay.after-confirm", wantErr: "want name=action[@hit]"},
		{name: "missing = after a good one", list: "relay.after-claim=kill,relay.after-confirm:kill", wantErr: "want name=action[@hit]"},
		{name: "bad arming", list: "relay.after-confirm=explode", wantErr: "unknown action"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseList(tc.list)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestArmingStringRoundTrips(t *testing.T) {
	for _, a := range []Arming{
		{Action: Kill, Hit: 1},
		{Action: Kill, Hit: 3},
		{Action: Kill, Hit: 0},
		{Action: Pause, Hit: 2},
		{Action: Pause, Hit: 0},
		{Action: Delay, Delay: 200 * time.Millisecond, Hit: 0},
		{Action: Delay, Delay: 1500 * time.Millisecond, Hit: 7},
		{Action: Delay, Delay: 3 * time.Microsecond, Hit: 1},
		{Action: Hold, Hit: 2},
		{Action: Hold, Hit: 0},
	} {
		s := a.String()
		back, err := ParseArming(s)
		require.NoError(t, err, "String gave %q", s)
		assert.Equal(t, a, back, "round trip of %q", s)
	}
	assert.Equal(t, "kill@3", Arming{Action: Kill, Hit: 3}.String())
	assert.Equal(t, "delay:200ms@*", Arming{Action: Delay, Delay: 200 * time.Millisecond}.String())
}

// recorder replaces Set.act: it records kill and pause instead of signalling
// this test binary, and what the event log held at that moment.
type recorder struct {
	mu      sync.Mutex
	actions []string
	logSeen []string // the log's content when each action ran
	buf     *syncBuffer
}

func (r *recorder) act(action string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.actions = append(r.actions, action)
	r.logSeen = append(r.logSeen, r.buf.String())
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.actions...)
}

// syncBuffer is a bytes.Buffer safe for a reader while the log writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The points of a relay like the reference's.
const (
	RelayAfterClaim   = "relay.after-claim"
	RelayAfterPublish = "relay.after-publish"
	RelayAfterConfirm = "relay.after-confirm"
	RelayAfterMark    = "relay.after-mark"
	RelayBeforeRenew  = "relay.before-renew"
)

var relayPoints = []string{RelayAfterClaim, RelayAfterPublish, RelayAfterConfirm, RelayAfterMark, RelayBeforeRenew}

// newTestSet is the relay's set of points logging to a buffer, with kill
// and pause recorded rather than performed.
func newTestSet(t *testing.T) (*Set, *recorder) {
	t.Helper()
	buf := &syncBuffer{}
	s := NewSet("relay", eventlog.New(buf, "relay-1"), relayPoints...)
	rec := &recorder{buf: buf}
	s.act = rec.act
	s.canAct = func(string) error { return nil } // recorded, so possible on any OS
	return s, rec
}

func crashLines(t *testing.T, buf *syncBuffer) []eventlog.Entry {
	t.Helper()
	es, err := eventlog.Read(strings.NewReader(buf.String()))
	require.NoError(t, err)
	var out []eventlog.Entry
	for _, e := range es {
		if e.Event == eventlog.CrashPoint {
			out = append(out, e)
		}
	}
	return out
}

func TestNewSetHoldsOnlyItsProcessPoints(t *testing.T) {
	s, _ := newTestSet(t)
	assert.Equal(t, []string{RelayAfterClaim, RelayAfterConfirm, RelayAfterMark, RelayAfterPublish, RelayBeforeRenew}, s.Names())
	for _, st := range s.Statuses() {
		assert.False(t, st.Armed, st.Name)
		assert.Empty(t, st.Arming, st.Name)
	}
}

func TestArmUnknownNameErrorsAndNamesKnownPoints(t *testing.T) {
	s, _ := newTestSet(t)
	err := s.Arm("relay.nowhere", Arming{Action: Kill, Hit: 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"relay.nowhere"`)
	for _, n := range s.Names() {
		assert.Contains(t, err.Error(), n, "the error lists the known points")
	}
	// A point of another process is unknown here too.
	assert.Error(t, s.Arm("order.after-commit", Arming{Action: Kill, Hit: 1}))
	assert.Error(t, s.Disarm("relay.nowhere"))
	assert.Error(t, s.ArmList("relay.nowhere=kill"))
}

func TestHitFiresExactlyOnTheArmedHitThenDisarms(t *testing.T) {
	for _, action := range []string{Kill, Pause} {
		t.Run(action, func(t *testing.T) {
			s, rec := newTestSet(t)

			// Unarmed hits are not counted.
			for range 5 {
				s.Hit(RelayAfterConfirm)
			}
			require.NoError(t, s.Arm(RelayAfterConfirm, Arming{Action: action, Hit: 3}))
			assert.Equal(t, Status{Name: RelayAfterConfirm, Armed: true, Arming: action + "@3"}, status(s, RelayAfterConfirm))

			s.Hit(RelayAfterConfirm)
			s.Hit(RelayAfterClaim) // another point does not count
			s.Hit("relay.not-a-point")
			s.Hit(RelayAfterConfirm)
			assert.Empty(t, rec.got(), "nothing fires before the armed hit")
			assert.Equal(t, int64(2), status(s, RelayAfterConfirm).Hits)

			s.Hit(RelayAfterConfirm)
			assert.Equal(t, []string{action}, rec.got(), "fires on hit 3")
			st := status(s, RelayAfterConfirm)
			assert.False(t, st.Armed, "one-shot: disarmed after firing")
			assert.Equal(t, int64(3), st.Hits)
			assert.Equal(t, int64(1), st.Fired)

			for range 5 {
				s.Hit(RelayAfterConfirm)
			}
			assert.Equal(t, []string{action}, rec.got(), "does not fire again once disarmed")
			assert.Equal(t, int64(3), status(s, RelayAfterConfirm).Hits, "hits are counted only while armed")

			lines := crashLines(t, rec.buf)
			require.Len(t, lines, 1)
			assert.Equal(t, RelayAfterConfirm, lines[0].Point)
			assert.Equal(t, int64(3), lines[0].Hit)
			assert.Equal(t, action, lines[0].Action)
			assert.Equal(t, "relay-1", lines[0].Process)
		})
	}
}

func TestHitLogsBeforeActing(t *testing.T) {
	s, rec := newTestSet(t)
	require.NoError(t, s.Arm(RelayAfterPublish, Arming{Action: Kill, Hit: 1}))
	s.Hit(RelayAfterPublish)
	require.Equal(t, []string{Kill}, rec.got())
	seen, err := eventlog.Read(strings.NewReader(rec.logSeen[0]))
	require.NoError(t, err)
	require.Len(t, seen, 1, "the crashpoint line is in the log when the action runs")
	assert.Equal(t, eventlog.CrashPoint, seen[0].Event)
	assert.Equal(t, RelayAfterPublish, seen[0].Point)
	assert.Equal(t, int64(1), seen[0].Hit)
	assert.Equal(t, Kill, seen[0].Action)
}

func TestArmRestartsTheHitCount(t *testing.T) {
	s, rec := newTestSet(t)
	require.NoError(t, s.Arm(RelayAfterMark, Arming{Action: Pause, Hit: 2}))
	s.Hit(RelayAfterMark)
	require.NoError(t, s.Arm(RelayAfterMark, Arming{Action: Pause, Hit: 2}))
	s.Hit(RelayAfterMark)
	assert.Empty(t, rec.got(), "re-arming starts counting from zero again")
	s.Hit(RelayAfterMark)
	assert.Equal(t, []string{Pause}, rec.got())
}

func TestDisarmStopsCounting(t *testing.T) {
	s, rec := newTestSet(t)
	require.NoError(t, s.Arm(RelayAfterClaim, Arming{Action: Kill, Hit: 2}))
	s.Hit(RelayAfterClaim)
	require.NoError(t, s.Disarm(RelayAfterClaim))
	for range 3 {
		s.Hit(RelayAfterClaim)
	}
	assert.Empty(t, rec.got())
	st := status(s, RelayAfterClaim)
	assert.False(t, st.Armed)
	assert.Equal(t, int64(1), st.Hits)
	assert.Empty(t, crashLines(t, rec.buf))
}

func TestEveryHitFiresWithStar(t *testing.T) {
	s, rec := newTestSet(t)
	require.NoError(t, s.Arm(RelayBeforeRenew, Arming{Action: Pause, Hit: 0}))
	for range 4 {
		s.Hit(RelayBeforeRenew)
	}
	assert.Equal(t, []string{Pause, Pause, Pause, Pause}, rec.got())
	st := status(s, RelayBeforeRenew)
	assert.True(t, st.Armed, "@* stays armed")
	assert.Equal(t, "pause@*", st.Arming)
	assert.Equal(t, int64(4), st.Fired)
	lines := crashLines(t, rec.buf)
	require.Len(t, lines, 4)
	for i, l := range lines {
		assert.Equal(t, int64(i+1), l.Hit, "each line carries its hit number")
	}
}

func TestDelaySleepsAtLeastItsDuration(t *testing.T) {
	const d = 50 * time.Millisecond
	s, rec := newTestSet(t)
	require.NoError(t, s.Arm(RelayAfterClaim, Arming{Action: Delay, Delay: d, Hit: 0}))
	for i := range 2 {
		start := time.Now()
		s.Hit(RelayAfterClaim)
		assert.GreaterOrEqual(t, time.Since(start), d, "hit %d", i+1)
	}
	assert.Empty(t, rec.got(), "a delay neither kills nor pauses")
	lines := crashLines(t, rec.buf)
	require.Len(t, lines, 2)
	assert.Equal(t, Delay, lines[1].Action)

	// Disarmed, the same point returns at once.
	require.NoError(t, s.Disarm(RelayAfterClaim))
	start := time.Now()
	s.Hit(RelayAfterClaim)
	assert.Less(t, time.Since(start), d)
}

// A hold stops only its caller, logged first, until the point is
// disarmed or armed again; the process's other goroutines go on.
func TestHoldWaitsUntilDisarmed(t *testing.T) {
	for _, release := range []struct {
		name string
		do   func(*Set) error
	}{
		{"disarmed", func(s *Set) error { return s.Disarm(RelayAfterPublish) }},
		{"armed again", func(s *Set) error { return s.Arm(RelayAfterPublish, Arming{Action: Kill, Hit: 5}) }},
	} {
		t.Run(release.name, func(t *testing.T) {
			s, rec := newTestSet(t)
			require.NoError(t, s.Arm(RelayAfterPublish, Arming{Action: Hold, Hit: 2}))
			s.Hit(RelayAfterPublish) // hit 1 passes
			done := make(chan struct{})
			go func() {
				defer close(done)
				s.Hit(RelayAfterPublish)
			}()
			require.Eventually(t, func() bool { return len(crashLines(t, rec.buf)) == 1 }, 10*time.Second, time.Millisecond, "the hold is logged before it waits")
			s.Hit(RelayAfterConfirm) // another call site of the process goes on
			select {
			case <-done:
				t.Fatal("the hold went on before the point was disarmed")
			default:
			}
			require.NoError(t, release.do(s))
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the hold still waits after the release")
			}
			assert.Equal(t, Hold, crashLines(t, rec.buf)[0].Action)
			assert.Empty(t, rec.got(), "a hold neither kills nor pauses")
		})
	}
	t.Run("released before it waits", func(t *testing.T) {
		s, _ := newTestSet(t)
		require.NoError(t, s.Arm(RelayAfterPublish, Arming{Action: Hold, Hit: 1}))
		require.NoError(t, s.Disarm(RelayAfterPublish))
		s.Hit(RelayAfterPublish) // disarmed: returns at once
	})
}

func TestArmList(t *testing.T) {
	s, _ := newTestSet(t)
	require.NoError(t, s.ArmList("relay.after-confirm=kill@3,relay.after-claim=delay:200ms@*"))
	assert.Equal(t, "kill@3", status(s, RelayAfterConfirm).Arming)
	assert.Equal(t, "delay:200ms@*", status(s, RelayAfterClaim).Arming)
	assert.False(t, status(s, RelayAfterMark).Armed)

	t.Setenv(EnvVar, "relay.after-mark=pause@2")
	require.NoError(t, s.ArmFromEnv())
	assert.Equal(t, "pause@2", status(s, RelayAfterMark).Arming)

	t.Setenv(EnvVar, "relay.after-mark=pause@0")
	assert.ErrorContains(t, s.ArmFromEnv(), "hit must be")
}

// TestConcurrentHitsFireOnce: many goroutines racing over an armed point
// fire it exactly once, on exactly the armed hit.
func TestConcurrentHitsFireOnce(t *testing.T) {
	s, rec := newTestSet(t)
	require.NoError(t, s.Arm(RelayAfterPublish, Arming{Action: Kill, Hit: 50}))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				s.Hit(RelayAfterPublish)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, []string{Kill}, rec.got())
	lines := crashLines(t, rec.buf)
	require.Len(t, lines, 1)
	assert.Equal(t, int64(50), lines[0].Hit)
}

func status(s *Set, name string) Status {
	for _, st := range s.Statuses() {
		if st.Name == name {
			return st
		}
	}
	return Status{}
}

// BenchmarkHitUnarmed is the cost every call site pays in production: one
// map lookup and one atomic load.
func BenchmarkHitUnarmed(b *testing.B) {
	s := NewSet("relay", eventlog.New(&bytes.Buffer{}, "relay"), relayPoints...)
	b.ReportAllocs()
	for b.Loop() {
		s.Hit(RelayAfterConfirm)
	}
}

// BenchmarkHitArmedOtherPoint: arming one point must not slow the others.
func BenchmarkHitArmedOtherPoint(b *testing.B) {
	s := NewSet("relay", eventlog.New(&bytes.Buffer{}, "relay"), relayPoints...)
	s.act = func(string) { b.Fatal("the armed point was never hit") }
	if err := s.Arm(RelayAfterClaim, Arming{Action: Kill, Hit: 1}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.Hit(RelayAfterConfirm)
	}
}

// TestHitUnarmedDoesNotAllocate guards the unarmed fast path the benchmark
// measures: no lock, no log, no allocation.
func TestHitUnarmedDoesNotAllocate(t *testing.T) {
	s, rec := newTestSet(t)
	require.NoError(t, s.Arm(RelayAfterClaim, Arming{Action: Kill, Hit: 1}))
	allocs := testing.AllocsPerRun(1000, func() {
		s.Hit(RelayAfterConfirm)
		s.Hit("relay.not-a-point")
	})
	assert.Zero(t, allocs)
	assert.Empty(t, rec.got())
	assert.Zero(t, status(s, RelayAfterConfirm).Hits)
}
