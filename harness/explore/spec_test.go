package explore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/workload"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/proxies"
)

// Every fault kind, with every field set, and every toxic type.
func everyFault() []fault.Fault {
	at := &fault.Sync{Process: "relay-1", Point: protocol.RelayAfterConfirm}
	trig := fault.Trigger{AfterOrders: 20, Delay: time.Second}
	return []fault.Fault{
		fault.Crash{Process: "relay-1", Point: protocol.RelayAfterConfirm, Action: crashpoint.Pause, Hit: 2, Hold: 5 * time.Second},
		fault.Crash{Process: "consumer", Point: protocol.ConsumerAfterCommit, Action: crashpoint.Kill, Hit: 3, RestartAfter: 200 * time.Millisecond, Trigger: trig},
		fault.Crash{Process: "producer", Point: protocol.ProducerAfterCommit, Action: crashpoint.Kill, Hit: 1, NoRestart: true},
		fault.Crash{Process: "relay-2", Point: protocol.RelayAfterClaim, Action: crashpoint.Delay, Delay: 150 * time.Millisecond, Hit: 1},
		fault.Toxic{Link: "relay-1.pg", Toxic: proxies.Latency{Latency: 3 * time.Second, Jitter: 50 * time.Millisecond, Stream: proxies.Upstream, Toxicity: 0.5}, Trigger: trig, Duration: 6 * time.Second, At: at},
		fault.Toxic{Link: "relay-1.amqp", Toxic: proxies.Timeout{}, Duration: 5 * time.Second},
		fault.Toxic{Link: "consumer.amqp", Toxic: proxies.Timeout{Timeout: 200 * time.Millisecond, Stream: proxies.Downstream}, Duration: time.Second},
		fault.Toxic{Link: "consumer.pg", Toxic: proxies.ResetPeer{Timeout: 10 * time.Millisecond}, Duration: time.Second},
		fault.Toxic{Link: "consumer.pg", Toxic: proxies.Bandwidth{RateKBps: 8}, Duration: time.Second},
		fault.Toxic{Link: "consumer.pg", Toxic: proxies.Slicer{AverageSize: 64, SizeVariation: 8, Delay: 20 * time.Microsecond}, Duration: time.Second},
		fault.Toxic{Link: "consumer.pg", Toxic: proxies.LimitData{Bytes: 4096}, Duration: time.Second},
		fault.LinkDown{Link: "consumer.pg", Trigger: trig, Duration: 2 * time.Second, At: &fault.Sync{Process: "consumer", Point: protocol.ConsumerBeforeCommit}},
		fault.LinkDown{Link: "relay-2.pg", Duration: 2 * time.Second},
		fault.Unbind{RoutingKey: "order.created", Trigger: trig, Duration: 3 * time.Second},
		fault.Unbind{},
		fault.Poison{Count: 5, Trigger: trig},
		fault.BrokerRestart{Trigger: trig, Down: 500 * time.Millisecond},
		fault.RetentionReplay{Consumer: "consumer", Trigger: fault.Trigger{AfterOrders: 30}},
		fault.OnCommit{Process: "relay-1", Table: history.TableOutbox, Status: "Processing", Nth: 2, Trigger: trig,
			ToxicLink: "relay-1.pg", Toxic: proxies.Latency{Latency: time.Second, Stream: proxies.Upstream}, ToxicFor: 600 * time.Millisecond,
			Cut: []history.Link{"relay-1.pg"}, CutAfter: 500 * time.Millisecond, CutFor: 3 * time.Second,
			ActAfter: 200 * time.Millisecond, Action: fault.ActKill, RestartAfter: 300 * time.Millisecond},
		fault.OnCommit{Process: "consumer", Table: history.TableEffects, Nth: 1, Action: fault.ActPause, Hold: 5 * time.Second},
		fault.CommitOrder{Trigger: trig, Every: 4, Holds: 5, Hold: 600 * time.Millisecond, Duration: 3 * time.Second},
	}
}

func TestSpecRoundTrip(t *testing.T) {
	for _, f := range everyFault() {
		t.Run(Describe(f), func(t *testing.T) {
			s, err := SpecOf(f)
			require.NoError(t, err)
			data, err := json.Marshal(s)
			require.NoError(t, err)
			var back Spec
			require.NoError(t, json.Unmarshal(data, &back))
			g, err := back.Fault()
			require.NoError(t, err)
			assert.Equal(t, f, g, "%s", data)
		})
	}
}

func TestScheduleRoundTrip(t *testing.T) {
	s := Schedule{Target: "reference", Variant: "no-fencing", Seed: 42,
		Workload:  workload.Spec{Orders: 60, Concurrency: 4, EventsPerOrder: 3, Pace: 2500 * time.Millisecond, StepDelay: 300 * time.Millisecond},
		Settings:  map[string]string{"lease-renewal": "400ms"},
		Instances: map[string]int{"relay": 1}, Invariants: []string{check.NoneGaveUp},
		Faults: everyFault(), Violation: "stale-write", Origin: "explore run #7"}
	path := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, WriteSchedule(path, s))
	back, err := LoadSchedule(path)
	require.NoError(t, err)
	assert.Equal(t, s, back)

	// A backlog's schedule keeps its traffic.
	for _, p := range workload.ProfileList() {
		s := Schedule{Target: "t", Variant: "correct", Seed: 3, Workload: p.Spec, Faults: []fault.Fault{}}
		data, err := json.Marshal(s)
		require.NoError(t, err)
		var back Schedule
		require.NoError(t, json.Unmarshal(data, &back), "%s", data)
		assert.Equal(t, p.Spec, back.Workload, p.Name)
	}

	// The enumerated plan round-trips whole.
	items, err := Enumerate(testTarget(), Options{Seed: 3, Combos: 50})
	require.NoError(t, err)
	for _, it := range items {
		s := Schedule{Target: "t", Variant: "correct", Seed: 3, Workload: workload.Steady(), Faults: it.Faults}
		data, err := json.Marshal(s)
		require.NoError(t, err)
		var back Schedule
		require.NoError(t, json.Unmarshal(data, &back), "%s", data)
		assert.Equal(t, s, back)
	}
}

// A schedule file written before the fault kinds moved into their own
// files (testdata/every-kind.schedule.json: every kind, every field) still
// loads into the same faults, and is written back byte for byte, but for
// the synchronisation points' delays, which a process frozen at its point
// no longer has.
func TestScheduleFileStillLoads(t *testing.T) {
	path := filepath.Join("testdata", "every-kind.schedule.json")
	back, err := LoadSchedule(path)
	require.NoError(t, err)
	assert.Equal(t, everyFault(), back.Faults)
	old, err := os.ReadFile(path)
	require.NoError(t, err)
	syncDelay := regexp.MustCompile(`("point": "[a-z.-]+"),\n\s+"delay": "[0-9a-z]+"\n(\s+)\}`)
	want := syncDelay.ReplaceAll(old, []byte("$1\n$2}"))
	require.Equal(t, 2, bytes.Count(old, []byte(`"delay"`))-bytes.Count(want, []byte(`"delay"`)), "the file holds two synchronisation points with a delay")
	again := filepath.Join(t.TempDir(), "again.json")
	require.NoError(t, WriteSchedule(again, back))
	got, err := os.ReadFile(again)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}

// A schedule file written when none-gave-up was a flag (none_failed)
// loads with that invariant named, and is written with it named.
func TestScheduleNoneFailedStillLoads(t *testing.T) {
	var s Schedule
	require.NoError(t, json.Unmarshal([]byte(`{"schema":"github.com/faultline-dev/faultline/schedule/v1","target":"x","workload":{"orders":1},"none_failed":true,"faults":[]}`), &s))
	assert.Equal(t, []string{check.NoneGaveUp}, s.Invariants)
	assert.Equal(t, []string{check.NoneGaveUp}, s.Scenario("x").Invariants)
	data, err := json.Marshal(s)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"invariants":["none-gave-up"]`)
	assert.NotContains(t, string(data), "none_failed")
}

func TestScheduleDecodeErrors(t *testing.T) {
	ok := `{"schema":"github.com/faultline-dev/faultline/schedule/v1","target":"reference","variant":"correct","seed":1,"workload":{"orders":10},"faults":[%s]}`
	for _, tc := range []struct {
		name, json, want string
	}{
		{"unknown kind", fmt.Sprintf(ok, `{"kind":"meteor"}`), `unknown fault kind "meteor"`},
		{"no kind", fmt.Sprintf(ok, `{"process":"relay-1"}`), "fault without a kind"},
		{"crash without point", fmt.Sprintf(ok, `{"kind":"crash","process":"relay-1","action":"kill"}`), "crash fault: needs point"},
		{"bad action", fmt.Sprintf(ok, `{"kind":"crash","process":"relay-1","point":"relay.after-claim","action":"explode"}`), `action "explode"`},
		{"bad duration", fmt.Sprintf(ok, `{"kind":"crash","process":"relay-1","point":"relay.after-claim","action":"pause","hold":"soon"}`), `bad duration "soon"`},
		{"number duration", fmt.Sprintf(ok, `{"kind":"link-down","link":"consumer.pg","duration":5}`), `want a duration such as "5s"`},
		{"unknown toxic", fmt.Sprintf(ok, `{"kind":"toxic","link":"consumer.pg","toxic":{"type":"gremlin"}}`), `unknown toxic type "gremlin"`},
		{"invalid toxic", fmt.Sprintf(ok, `{"kind":"toxic","link":"consumer.pg","toxic":{"type":"bandwidth"}}`), "rate must be positive"},
		{"unknown field", fmt.Sprintf(ok, `{"kind":"poison","count":1,"colour":"red"}`), `unknown field "colour"`},
		{"after a link nothing lands on", fmt.Sprintf(ok, `{"kind":"link-down","link":"consumer.pg","duration":"1s"},{"kind":"unacked","process":"consumer","action":"kill","trigger":{"after_link":"relay-1.amqp"}}`), `after_link "relay-1.amqp": no toxic or link-down of this schedule lands on that link`},
		{"commit-order without every", fmt.Sprintf(ok, `{"kind":"commit-order","holds":5,"hold":"600ms"}`), "commit-order fault: needs every of 1 or more"},
		{"other schema", `{"schema":"github.com/faultline-dev/faultline/schedule/v9","target":"x","workload":{"orders":1},"faults":[]}`, `schema "github.com/faultline-dev/faultline/schedule/v9"`},
		{"no target", `{"schema":"github.com/faultline-dev/faultline/schedule/v1","workload":{"orders":1},"faults":[]}`, "no target name"},
		{"no orders", `{"schema":"github.com/faultline-dev/faultline/schedule/v1","target":"x","workload":{"orders":0},"faults":[]}`, "at least 1 order"},
		{"a hold of the producer", `{"schema":"github.com/faultline-dev/faultline/schedule/v1","target":"x","workload":{"orders":10,"profile":"relay-backlog","hold":{"role":"producer","backlog":5}},"faults":[]}`, `holds role "producer"`},
		{"an unknown traffic profile", `{"schema":"github.com/faultline-dev/faultline/schedule/v1","target":"x","workload":{"orders":10,"profile":"tsunami"},"faults":[]}`, "unknown traffic profile"},
		{"unknown invariant", `{"schema":"github.com/faultline-dev/faultline/schedule/v1","target":"x","workload":{"orders":1},"invariants":["no-such"],"faults":[]}`, `invariants: "no-such" is not an optional invariant`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Schedule
			err := json.Unmarshal([]byte(tc.json), &s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestScheduleScenario(t *testing.T) {
	faults := []fault.Fault{fault.Crash{Process: "relay-1", Point: protocol.RelayAfterConfirm, Action: crashpoint.Pause, Hit: 1, Hold: 5 * time.Second}}
	s := Schedule{Target: "reference", Workload: workload.Steady(), Faults: faults, Settings: map[string]string{"retry-budget": "3"}}
	sc := s.Scenario("replay")
	assert.Equal(t, "replay", sc.Name)
	assert.Equal(t, faults, sc.Schedule(1))
	assert.Equal(t, faults, sc.Schedule(99), "the same faults whatever the seed")
	assert.Equal(t, workload.Steady(), sc.Workload)
	assert.Equal(t, s.Settings, sc.Settings)
	assert.False(t, sc.Exclusive)
	s.Faults = append(s.Faults, fault.BrokerRestart{Down: time.Second})
	assert.True(t, s.Scenario("x").Exclusive, "a broker restart runs alone")
}
