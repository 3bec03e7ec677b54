package explore

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/workload"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/check"
	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/proxies"
)

func tpl(s string) target.Template { return target.Template{Raw: s} }

// testTarget is a pipeline with its own names for everything: a relay
// called dispatcher (two instances), a consumer called sink, a producer
// called api that talks only to PostgreSQL.
func testTarget() *target.Target {
	return &target.Target{Name: "other", Lease: 4 * time.Second, Processes: []target.Process{
		{Name: "api", Role: protocol.Producer, Instances: 1, Command: []target.Template{tpl("./api"), tpl(`--db={{postgres "shop"}}`)}},
		{Name: "dispatcher", Role: protocol.Relay, Instances: 2,
			Command:     []target.Template{tpl("./dispatcher"), tpl(`--db={{ postgres "shop" }}`)},
			Env:         []target.EnvVar{{Name: "BROKER", Value: tpl("{{amqp}}")}},
			CrashPoints: map[string]string{protocol.RelayAfterClaim: "dispatch:claimed", protocol.RelayAfterConfirm: "dispatch:acked"}},
		{Name: "sink", Role: protocol.Consumer, Instances: 1,
			Command:     []target.Template{tpl("./sink"), tpl(`{{postgres "stock"}}`), tpl("{{amqp}}")},
			CrashPoints: map[string]string{protocol.ConsumerAfterCommit: "sink:committed"}},
	}}
}

func TestSurfaceComesFromTheTarget(t *testing.T) {
	s, err := SurfaceOf(testTarget())
	require.NoError(t, err)
	var refs []history.Ref
	for _, in := range s.Instances {
		refs = append(refs, in.Ref)
	}
	assert.Equal(t, []history.Ref{"producer", "relay-1", "relay-2", "consumer"}, refs)
	assert.Equal(t, []string{protocol.RelayAfterClaim, protocol.RelayAfterConfirm}, s.Instances[1].Points)
	assert.Empty(t, s.Instances[0].Points)
	var links []history.Link
	for _, l := range s.Links {
		links = append(links, l.Ref)
	}
	assert.Equal(t, []history.Link{"producer.pg", "relay-1.pg", "relay-1.amqp", "relay-2.pg", "relay-2.amqp", "consumer.pg", "consumer.amqp"}, links)

	items, err := s.Enumerate(Options{Seed: 1, Combos: 100})
	require.NoError(t, err)
	for _, it := range items {
		for _, f := range it.Faults {
			spec, err := SpecOf(f)
			require.NoError(t, err)
			data := fmt.Sprint(spec)
			for _, own := range []string{"dispatch:", "sink:", "dispatcher", "api", "inventory", "order"} {
				assert.NotContains(t, data, own, "faults name roles and windows, never a process's own names")
			}
			if w := spec.Window(); w != "" && spec.Kind == fault.KindCrash {
				_, err := s.Roles.Point(spec.Instance(), w)
				assert.NoError(t, err, "every window is one the instance offers")
			}
			if l := linkOf(f); l != "" {
				_, err := s.Roles.Link(l)
				assert.NoError(t, err)
			}
		}
	}
}

// The single faults are every crash point × hit 1..k × kill / pause past
// the lease × instance, and every link × latency, timeout, down, alone and
// at each window of its instance; the shallowest first.
func TestEnumerateSingles(t *testing.T) {
	tg := testTarget()
	items, err := Enumerate(tg, Options{Seed: 5, Hits: 2, Combos: -1})
	require.NoError(t, err)
	// crash: relay 2 points × 2 instances + consumer 1 point = 5 (instance, point) × 2 hits × 2 actions
	crashes := 5 * 2 * 2
	// links: producer.pg (no window) ×1, relay-N.{pg,amqp} × (1 + 2 windows) × 2 instances, consumer.{pg,amqp} × (1 + 1)
	links := 3 * (1 + 2*3*2 + 2*2)
	seen := map[string]bool{}
	depth := 0
	ours := 0 // crashes and link faults; other kinds are their own tests'
	for i, it := range items {
		assert.Equal(t, i, it.Index)
		require.Len(t, it.Faults, 1)
		assert.GreaterOrEqual(t, it.Depth, depth, "shallowest first")
		depth = it.Depth
		key := Describe(it.Faults[0])
		assert.False(t, seen[key], "once each: %s", key)
		seen[key] = true
		switch it.Faults[0].(type) {
		case fault.Crash, fault.Toxic, fault.LinkDown:
			ours++
		}
		switch f := it.Faults[0].(type) {
		case fault.Crash:
			assert.Contains(t, []int64{1, 2}, f.Hit)
			switch f.Action {
			case crashpoint.Pause:
				assert.Equal(t, 10*time.Second, f.Hold, "pause past the lease: lease × 2.5")
			case crashpoint.Kill:
				assert.Positive(t, f.RestartAfter)
			default:
				t.Errorf("action %s", f.Action)
			}
		case fault.Toxic:
			switch x := f.Toxic.(type) {
			case proxies.Latency:
				assert.Greater(t, x.Latency, tg.Lease, "latency past the lease")
			case proxies.Timeout:
			default:
				t.Errorf("toxic %T", x)
			}
		case fault.LinkDown:
		case fault.Unbind, fault.OnCommit, fault.CommitOrder:
			t.Errorf("%T on a target without a topology or watched tables", f)
		}
	}
	assert.Equal(t, crashes+links, ours)
	assert.Equal(t, 0, items[0].Depth)
}

func TestEnumerateIsDeterministic(t *testing.T) {
	tg := testTarget()
	a, err := Enumerate(tg, Options{Seed: 11, Combos: 300})
	require.NoError(t, err)
	b, err := Enumerate(tg, Options{Seed: 11, Combos: 300})
	require.NoError(t, err)
	assert.Equal(t, describeItems(a), describeItems(b))
	c, err := Enumerate(tg, Options{Seed: 12, Combos: 300})
	require.NoError(t, err)
	assert.Len(t, c, len(a))
	assert.NotEqual(t, describeItems(a), describeItems(c), "another seed, another order")
	assert.ElementsMatch(t, describeItems(a)[:countSingles(a)], describeItems(c)[:countSingles(c)], "the same single faults")
}

// Traffic profiles are drawn per item by the seed, after the faults: the
// plan's faults are the same with and without them.
func TestEnumerateDrawsProfiles(t *testing.T) {
	tg := testTarget()
	plain, err := Enumerate(tg, Options{Seed: 11, Combos: 60})
	require.NoError(t, err)
	profiles := []string{workload.Paced, workload.RelayBacklog, workload.ConsumerBacklog}
	drawn, err := Enumerate(tg, Options{Seed: 11, Combos: 60, Profiles: profiles})
	require.NoError(t, err)
	assert.Equal(t, describeItems(plain), describeItems(drawn))
	count := map[string]int{}
	for i, it := range drawn {
		assert.Empty(t, plain[i].Profile)
		assert.Contains(t, profiles, it.Profile)
		count[it.Profile]++
	}
	assert.Len(t, count, 3, "every profile drawn: %v", count)
	again, err := Enumerate(tg, Options{Seed: 11, Combos: 60, Profiles: profiles})
	require.NoError(t, err)
	assert.Equal(t, drawn, again)
	one, err := Enumerate(tg, Options{Seed: 11, Combos: 60, Profiles: []string{workload.Burst}})
	require.NoError(t, err)
	assert.Empty(t, one[0].Profile, "one profile is the exploration's own traffic")
	_, err = Enumerate(tg, Options{Seed: 11, Profiles: []string{workload.Paced, "tsunami"}})
	assert.ErrorContains(t, err, `no traffic profile "tsunami"`)
}

// Combinations of two and three follow the singles, two pairs to a
// triple, and never arm one crash point twice or put two faults on one link.
func TestCombinations(t *testing.T) {
	items, err := Enumerate(testTarget(), Options{Seed: 2, Combos: 300})
	require.NoError(t, err)
	singles := countSingles(items)
	combos := items[singles:]
	require.Len(t, combos, 300)
	seen := map[string]bool{}
	for i, it := range combos {
		want := 2
		if i%3 == 2 {
			want = 3
		}
		require.Len(t, it.Faults, want)
		d := it.Describe()
		assert.False(t, seen[d], "no combination twice")
		seen[d] = true
		keys := map[string]bool{}
		for _, f := range it.Faults {
			spec, err := SpecOf(f)
			require.NoError(t, err)
			var ks []string
			if w := spec.Window(); w != "" {
				ks = append(ks, "point:"+string(spec.Instance())+"@"+w)
			}
			if l := linkOf(f); l != "" {
				ks = append(ks, "link:"+string(l))
			}
			for _, k := range ks {
				assert.False(t, keys[k], "%s collides in %s", k, d)
				keys[k] = true
			}
		}
	}
}

func TestShardsPartitionThePlan(t *testing.T) {
	for _, seed := range []int64{1, 7, 12345} {
		for _, n := range []int{2, 3} {
			t.Run(fmt.Sprintf("seed %d, %d shards", seed, n), func(t *testing.T) {
				all, err := Enumerate(testTarget(), Options{Seed: seed, Combos: 200})
				require.NoError(t, err)
				var union []string
				seen := map[int]int{}
				for i := 1; i <= n; i++ {
					// Each shard enumerates on its own, as a CI job would.
					plan, err := Enumerate(testTarget(), Options{Seed: seed, Combos: 200})
					require.NoError(t, err)
					part := Shard{Index: i, Count: n}.Of(plan)
					assert.InDelta(t, len(all)/n, len(part), 1)
					prev := -1
					for _, it := range part {
						seen[it.Index]++
						assert.Greater(t, it.Index, prev, "plan order")
						prev = it.Index
						union = append(union, fmt.Sprintf("%d %s", it.Index, it.Describe()))
					}
				}
				for idx, c := range seen {
					assert.Equal(t, 1, c, "run #%d in exactly one shard", idx)
				}
				slices.SortFunc(union, func(a, b string) int { return indexOf(a) - indexOf(b) })
				var want []string
				for _, it := range all {
					want = append(want, fmt.Sprintf("%d %s", it.Index, it.Describe()))
				}
				assert.Equal(t, want, union)
			})
		}
	}
}

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Shard
		err  string
	}{
		{"1/2", Shard{1, 2}, ""},
		{"2/2", Shard{2, 2}, ""},
		{" 3 / 5 ", Shard{3, 5}, ""},
		{"1/1", Shard{1, 1}, ""},
		{"0/2", Shard{}, "1 ≤ i ≤ n"},
		{"3/2", Shard{}, "1 ≤ i ≤ n"},
		{"1/0", Shard{}, "1 ≤ i ≤ n"},
		{"x", Shard{}, "want i/n"},
		{"1/x", Shard{}, "want i/n"},
		{"", Shard{}, "want i/n"},
	} {
		got, err := ParseShard(tc.in)
		if tc.err != "" {
			require.Error(t, err, tc.in)
			assert.Contains(t, err.Error(), tc.err)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got)
	}
	assert.True(t, Shard{}.All())
	assert.Equal(t, "all", Shard{}.String())
}

// The reference's own target file, read as any other: its windows and
// links, not names written here.
func TestEnumerateReference(t *testing.T) {
	tg, err := target.Load("../../system/faultline.yaml")
	require.NoError(t, err)
	items, err := Enumerate(tg, Options{Seed: 1, Combos: -1})
	require.NoError(t, err)
	points := 0
	for _, p := range tg.Processes {
		points += len(p.CrashPoints) * max(p.Instances, 1)
	}
	crashes := 0
	for _, it := range items {
		if _, ok := it.Faults[0].(fault.Crash); ok {
			crashes++
		}
	}
	assert.Equal(t, points*DefaultHits*2, crashes)
	assert.Equal(t, Hold(tg.Lease), 5*time.Second)
}

// outsideTarget is testTarget with what opens windows from outside: a
// topology (the bindings can go), watched tables (black-box windows), the
// outage its relays ride out, and a setting that opens the renewal window.
func outsideTarget() *target.Target {
	tg := testTarget()
	tg.Processes[0].Command = append(tg.Processes[0].Command, tpl("{{amqp}}"))
	tg.Processes[1].CrashPoints = map[string]string{protocol.RelayBeforeRetry: "dispatch:retry", protocol.RelayBeforeRenew: "dispatch:renew"}
	tg.Topology = target.Topology{Exchange: "x", Queue: "q", RoutingKeys: []string{"k"}}
	tg.Observe = target.Observe{Facts: target.Table{Name: "carts"}, Outbox: target.Table{Name: "box"}, Effects: target.Table{Name: "stock"}}
	tg.Relay = target.Relay{Model: history.ModelClaim}
	tg.RidesOut = time.Second
	tg.Settings = map[string]target.Setting{"renew": {Name: "renew", Role: protocol.Relay, Explore: &target.SettingExplore{Value: "300ms", Opens: []string{protocol.RelayBeforeRenew}}}}
	return tg
}

// A relay's black-box window opens at the write its model shows from
// outside: an offset relay's at its mark (a commit to its position table),
// none for a log relay.
func TestEnumerateTimesRelaysByTheirModel(t *testing.T) {
	for _, tc := range []struct {
		relay      target.Relay
		want, lack string
	}{
		{target.Relay{Model: history.ModelClaim}, "blackbox.relay.outbox.processing", "blackbox.relay.position"},
		{target.Relay{Model: history.ModelOffset, Position: &target.Table{Name: "offsets"}}, "blackbox.relay.position", "blackbox.relay.outbox.processing"},
		{target.Relay{Model: history.ModelLog}, "", "blackbox.relay."},
	} {
		t.Run(tc.relay.Model, func(t *testing.T) {
			tg := outsideTarget()
			tg.Relay = tc.relay
			items, err := Enumerate(tg, Options{Seed: 3, Hits: 1, Combos: 50})
			require.NoError(t, err)
			var windows []string
			for _, it := range items {
				specs, err := Specs(it.Faults)
				require.NoError(t, err)
				for _, sp := range specs {
					windows = append(windows, sp.Window())
				}
			}
			if tc.want != "" {
				assert.Contains(t, windows, tc.want)
			}
			for _, w := range windows {
				assert.False(t, strings.HasPrefix(w, tc.lack), "%s offered on a %s relay", w, tc.relay.Model)
			}
		})
	}
}

// A window that opens only around something else comes with it: a retry
// with the bindings gone, a renewal with slow confirms and the setting
// that turns renewal on; the bindings go on their own, once for an outage
// the relays ride out (no row may end Failed) and once for longer; each
// black-box window at the commit of each instance's writes, with what
// holds it open from outside.
func TestEnumerateOpensWindowsFromOutside(t *testing.T) {
	tg := outsideTarget()
	items, err := Enumerate(tg, Options{Seed: 3, Hits: 2, Combos: 200})
	require.NoError(t, err)
	var retries, renewals, unbinds, ridden, blackBox, commitOrders int
	windows := map[string]bool{}
	for _, it := range items {
		specs, err := Specs(it.Faults)
		require.NoError(t, err, it.Describe())
		back, err := Faults(specs)
		require.NoError(t, err)
		assert.Equal(t, it.Faults, back, "every explored fault is one a schedule file can hold")
		nUnbind := 0
		for i, sp := range specs {
			windows[sp.Window()] = true
			if _, ok := it.Faults[i].(fault.Unbind); ok {
				nUnbind++
			}
		}
		assert.LessOrEqual(t, nUnbind, 1, "the bindings go once a run: %s", it.Describe())
		if it.Size != 1 {
			assert.Empty(t, it.Invariants, "only an outage alone is one the relays ride out")
			continue
		}
		switch first := it.Faults[0].(type) {
		case fault.Crash:
			switch first.Point {
			case protocol.RelayBeforeRetry:
				retries++
				require.Len(t, it.Faults, 2, it.Describe())
				unbind, ok := it.Faults[1].(fault.Unbind)
				require.True(t, ok, it.Describe())
				assert.Equal(t, first.Trigger, unbind.Trigger, "armed together")
				assert.Greater(t, unbind.Duration, Hold(tg.Lease), "the bindings stay away past the thaw")
			case protocol.RelayBeforeRenew:
				renewals++
				require.Len(t, it.Faults, 2, it.Describe())
				slow, ok := it.Faults[1].(fault.Toxic)
				require.True(t, ok, it.Describe())
				assert.Equal(t, first.Process.Broker(), slow.Link, "its own confirms slowed")
				assert.Equal(t, map[string]string{"renew": "300ms"}, it.Settings)
			default:
				assert.Empty(t, it.Settings, it.Describe())
			}
		case fault.Unbind:
			unbinds++
			require.Len(t, it.Faults, 1)
			if slices.Contains(it.Invariants, check.NoneGaveUp) {
				ridden++
				assert.Equal(t, tg.RidesOut, first.Duration)
			} else {
				assert.Greater(t, first.Duration, tg.RidesOut)
			}
		case fault.OnCommit:
			blackBox++
			if strings.HasPrefix(string(first.Process), "relay") || first.Process == "producer" {
				require.Len(t, specs, 2, "held open from outside: %s", it.Describe())
				assert.Equal(t, first.Process.Broker(), linkOf(it.Faults[1]))
			}
		case fault.CommitOrder:
			commitOrders++
			require.Len(t, it.Faults, 1, "needs nothing around it: %s", it.Describe())
			assert.Greater(t, first.Every, 0)
		default:
			if at := syncOf(first); at != nil && at.Point == protocol.RelayBeforeRenew {
				assert.Equal(t, map[string]string{"renew": "300ms"}, it.Settings, "a link fault at the window opens it the same way")
			} else {
				assert.Empty(t, it.Settings, it.Describe())
			}
		}
	}
	// 2 relays × 2 hits × kill/pause
	assert.Equal(t, 2*2*2, retries)
	assert.Equal(t, 2*2*2, renewals)
	assert.Equal(t, 2, unbinds)
	assert.Equal(t, 1, ridden)
	// 4 instances × 2 hits × kill, pause, cut
	assert.Equal(t, 4*2*3, blackBox)
	assert.Equal(t, 1, commitOrders, "the outbox's commits out of order, once")
	for _, w := range []string{"blackbox.producer.facts", "blackbox.relay.outbox.processing", "blackbox.consumer.effects", WindowUnroutable, WindowCommitOrder} {
		assert.True(t, windows[w], w)
	}
	s, err := SurfaceOf(tg)
	require.NoError(t, err)
	var offered []string
	for _, w := range OfferedOf(tg, s).Windows {
		if len(w.By) > 0 {
			offered = append(offered, w.Name)
		}
	}
	// The protocol's windows first, in its order, then those opened from
	// outside (in the order of the kinds that open them).
	require.Len(t, offered, 8)
	assert.Equal(t, []string{protocol.RelayBeforeRenew, protocol.RelayBeforeRetry, protocol.ConsumerAfterCommit}, offered[:3])
	assert.ElementsMatch(t, []string{"blackbox.producer.facts", "blackbox.relay.outbox.processing", "blackbox.consumer.effects",
		WindowUnroutable, WindowCommitOrder}, offered[3:])

	// Without a topology, observe or rides_out, none of it.
	plain, err := Enumerate(testTarget(), Options{Seed: 3, Hits: 2, Combos: -1})
	require.NoError(t, err)
	for _, it := range plain {
		for _, f := range it.Faults {
			switch f.(type) {
			case fault.Unbind, fault.OnCommit, fault.CommitOrder:
				t.Errorf("%s offered by a target without a topology or watched tables", it.Describe())
			}
		}
	}
}

// linkOf is the link of a link fault ("" for another).
func linkOf(f fault.Fault) history.Link {
	switch f := f.(type) {
	case fault.Toxic:
		return f.Link
	case fault.LinkDown:
		return f.Link
	}
	return ""
}

// syncOf is the window a link fault waits at (nil for another).
func syncOf(f fault.Fault) *fault.Sync {
	switch f := f.(type) {
	case fault.Toxic:
		return f.At
	case fault.LinkDown:
		return f.At
	}
	return nil
}

func describeItems(items []Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Describe()
	}
	return out
}

func countSingles(items []Item) int {
	n := 0
	for _, it := range items {
		if it.Size == 1 {
			n++
		}
	}
	return n
}

func indexOf(s string) int {
	var n int
	fmt.Sscanf(strings.Fields(s)[0], "%d", &n)
	return n
}
