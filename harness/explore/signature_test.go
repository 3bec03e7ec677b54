package explore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/proxies"
)

func TestSignatureKeyLabelSlug(t *testing.T) {
	tests := []struct {
		sig   Signature
		key   string
		label string
		slug  string // the readable part, before the hash
	}{
		{Signature{Kind: "lost"}, "lost|||", "lost", "lost"},
		{Signature{Kind: "lost", Stages: []result.Stage{result.StageRoutedNowhere}, Unroutable: true},
			"lost|routed-nowhere||unroutable", "lost at routed-nowhere; queue unroutable", "lost-routed-nowhere-unroutable"},
		{Signature{Kind: "lost", Stages: []result.Stage{result.StageConsumedNoEffect}, Touched: []string{"consumer", "consumer.pg"}},
			"lost|consumed-without-effect|consumer,consumer.pg|", "lost at consumed-without-effect; faults on consumer, consumer.pg",
			"lost-consumed-without-effect-consumer-consumer-pg"[:maxSlug]},
		{Signature{Kind: "stale-write", Touched: []string{"relay"}}, "stale-write||relay|", "stale-write; faults on relay", "stale-write-relay"},
	}
	slugs := map[string]bool{}
	for _, tt := range tests {
		assert.Equal(t, tt.key, tt.sig.Key())
		assert.Equal(t, tt.label, tt.sig.Label())
		slug := tt.sig.Slug()
		assert.Regexp(t, `^`+strings.TrimRight(tt.slug, "-")+`-[0-9a-f]{6}$`, slug, tt.key)
		assert.False(t, slugs[slug], "slugs tell signatures apart")
		slugs[slug] = true
		assert.Equal(t, slug, tt.sig.Slug(), "stable")
	}
	// Signatures that differ only past the readable part differ by hash.
	long := []string{"consumer", "consumer.amqp", "consumer.pg", "relay"}
	a := Signature{Kind: "lost", Stages: []result.Stage{result.StageConsumedNoEffect}, Touched: long}
	b := a
	b.Touched = append(long[:3:3], "producer")
	assert.NotEqual(t, a.Slug(), b.Slug())
	assert.LessOrEqual(t, len(a.Slug()), maxSlug+7)
}

func TestSignaturesOf(t *testing.T) {
	specs := []Spec{
		mustSpec(fault.Crash{Process: "consumer", Point: protocol.ConsumerAfterReceive, Action: crashpoint.Kill, Hit: 1}),
		mustSpec(fault.OnCommit{Process: "relay-2", Table: history.TableOutbox, Action: fault.ActNone, Cut: []history.Link{"relay-2.pg"},
			ToxicLink: "relay-2.amqp", Toxic: proxies.Timeout{}}),
		mustSpec(fault.Unbind{}),
		mustSpec(fault.BrokerRestart{}),
	}
	res := result.Scenario{Invariants: []result.Invariant{
		{Name: "no-lost", Violations: []result.Violation{
			{Kind: "lost", Stages: map[result.Stage][]string{result.StageConsumedNoEffect: {"E2"}}},
			{Kind: "lost", Stages: map[result.Stage][]string{result.StageRoutedNowhere: {"E1"}, result.StageSkipped: {"E3"}}},
		}},
		{Name: "no-phantom", Violations: []result.Violation{{Kind: "phantom"}}},
		{Name: "expected", Expected: true, Violations: []result.Violation{{Kind: "duplicate-effect"}}},
	}}
	for _, tt := range []struct {
		name       string
		hit        []bool
		touched    []string
		unroutable bool
	}{
		{"every fault happened", []bool{true, true, true, true}, []string{"broker", "consumer", "relay", "relay.amqp", "relay.pg"}, true},
		{"not known which happened", nil, []string{"broker", "consumer", "relay", "relay.amqp", "relay.pg"}, true},
		{"only the crash happened", []bool{true, false, false, false}, []string{"consumer"}, false},
	} {
		got := SignaturesOf(specs, tt.hit, res)
		assert.Equal(t, []Signature{
			{Kind: "lost", Stages: []result.Stage{result.StageSkipped, result.StageRoutedNowhere, result.StageConsumedNoEffect}, Touched: tt.touched, Unroutable: tt.unroutable},
			{Kind: "phantom", Touched: tt.touched, Unroutable: tt.unroutable},
		}, got, tt.name)
	}
}

// The shrinker keeps a candidate that fails with the signature's kind and
// at least its stages, whatever it touched; not one that fails otherwise.
func TestFailsLike(t *testing.T) {
	run := func(hit bool, vs ...result.Violation) result.Scenario {
		return result.Scenario{Verdict: result.Fail, Faults: []result.Fault{{Hit: hit}}, Invariants: []result.Invariant{{Name: "no-lost", Violations: vs}}}
	}
	at := func(stages ...result.Stage) result.Violation {
		v := result.Violation{Kind: "lost", Stages: map[result.Stage][]string{}}
		for _, s := range stages {
			v.Stages[s] = []string{"E"}
		}
		return v
	}
	routed := Signature{Kind: "lost", Stages: []result.Stage{result.StageRoutedNowhere}, Touched: []string{"relay"}, Unroutable: true}
	tests := []struct {
		name string
		sig  Signature
		res  result.Scenario
		want bool
	}{
		{"same kind and stage", routed, run(true, at(result.StageRoutedNowhere)), true},
		{"a stage more", routed, run(true, at(result.StageRoutedNowhere, result.StageConsumedNoEffect)), true},
		{"another stage", routed, run(true, at(result.StageConsumedNoEffect)), false},
		{"no stage given", routed, run(true, at()), false},
		{"a fault that never happened", routed, run(false, at(result.StageRoutedNowhere)), false},
		{"another kind", routed, run(true, result.Violation{Kind: "phantom"}), false},
		{"no stages asked: the kind is enough", Signature{Kind: "lost"}, run(true, at()), true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, FailsLike(tt.res, 1, tt.sig), tt.name)
	}
}

func TestExplainedBy(t *testing.T) {
	held := func(sig Signature, faults ...fault.Fault) Finding {
		return Finding{Kind: sig.Kind, Signature: sig, Minimal: Schedule{Faults: faults}, Failed: Confirm, Of: Confirm}
	}
	unbind := fault.Unbind{Duration: 3 * time.Second}
	kill := fault.Crash{Process: "consumer", Point: protocol.ConsumerAfterReceive, Action: crashpoint.Kill, Hit: 1}
	rn, cwe := result.StageRoutedNowhere, result.StageConsumedNoEffect
	routed := held(Signature{Kind: "lost", Stages: []result.Stage{rn}, Unroutable: true}, unbind)
	consumed := held(Signature{Kind: "lost", Stages: []result.Stage{cwe}, Touched: []string{"consumer"}}, kill)
	flaky := consumed
	flaky.Failed = 1
	bare := held(Signature{Kind: "lost", Unroutable: true}, unbind)
	tests := []struct {
		name     string
		sig      Signature
		findings []Finding
		want     []int
	}{
		{"both bugs in one run", Signature{Kind: "lost", Stages: []result.Stage{rn, cwe}, Touched: []string{"consumer"}, Unroutable: true},
			[]Finding{routed, consumed}, []int{0, 1}},
		{"a fault more", Signature{Kind: "lost", Stages: []result.Stage{cwe}, Touched: []string{"consumer", "relay.pg"}}, []Finding{routed, consumed}, []int{1}},
		{"a stage no finding has", Signature{Kind: "lost", Stages: []result.Stage{rn, result.StageSkipped}, Touched: []string{"relay"}, Unroutable: true},
			[]Finding{routed, consumed}, nil},
		{"not the faults of the finding", Signature{Kind: "lost", Stages: []result.Stage{cwe}, Touched: []string{"relay"}}, []Finding{routed, consumed}, nil},
		{"not unroutable", Signature{Kind: "lost", Stages: []result.Stage{rn}, Touched: []string{"consumer"}}, []Finding{routed}, nil},
		{"another kind", Signature{Kind: "phantom", Touched: []string{"consumer"}}, []Finding{consumed}, nil},
		{"a finding that did not hold up explains nothing", Signature{Kind: "lost", Stages: []result.Stage{cwe}, Touched: []string{"consumer", "relay"}}, []Finding{flaky}, nil},
		{"no stages: the touched set alone", Signature{Kind: "lost", Touched: []string{"consumer"}, Unroutable: true}, []Finding{bare}, []int{0}},
		{"no stages, and the finding has some", Signature{Kind: "lost", Touched: []string{"consumer"}, Unroutable: true}, []Finding{routed}, nil},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, explainedBy(tt.sig, tt.findings), tt.name)
	}
}

// bugRunner is a pipeline with independent bugs, each decided from the
// schedule alone: the queue made unroutable loses events routed nowhere
// (E-u); a consumer killed after receiving loses them consumed without
// effect (E-c); a relay killed after marking loses one skipped (E-r), but
// only in explore's runs and the first run of each side-by-side batch.
// With stages false the checker gives no stages.
type bugRunner struct{ stages bool }

func (b bugRunner) Run(_ context.Context, sc runner.Scenario, opts runner.Options) result.Scenario {
	res := result.Scenario{Name: sc.Name, Variant: opts.Variant, Seed: opts.Seed, Verdict: result.Pass}
	lost := func(id string, st result.Stage) result.Violation {
		v := result.Violation{Kind: "lost", EventIDs: []string{id}, Message: id + " lost"}
		if b.stages {
			v.Stages = map[result.Stage][]string{st: {id}}
		}
		return v
	}
	var vs []result.Violation
	for _, f := range sc.Schedule(opts.Seed) {
		res.Faults = append(res.Faults, result.Fault{Kind: "x", Hit: true})
		switch f := f.(type) {
		case fault.Unbind:
			vs = append(vs, lost("E-u", result.StageRoutedNowhere))
		case fault.Crash:
			switch {
			case f.Point == protocol.ConsumerAfterReceive:
				vs = append(vs, lost("E-c", result.StageConsumedNoEffect))
			case f.Point == protocol.RelayAfterMark && (strings.HasPrefix(sc.Name, "explore-") || strings.HasSuffix(sc.Name, ".1")):
				vs = append(vs, lost("E-r", result.StageSkipped))
			}
		}
	}
	inv := result.Invariant{Name: "no-lost", OK: len(vs) == 0, Violations: vs}
	if !inv.OK {
		res.Verdict = result.Fail
	}
	res.Invariants = []result.Invariant{inv}
	return res
}

// Two bugs of one kind, both seen alone and together, and a third that
// fails only sometimes: each is its own finding, shrunk and written to
// its own file; the run that showed both is folded into both; the flaky
// one is kept with its rate. With stages and without (the touched
// processes and the unroutable queue tell them apart).
func TestExploreKeepsEveryDistinctFailure(t *testing.T) {
	unbind := fault.Unbind{Trigger: fault.Trigger{AfterOrders: 20}, Duration: 3 * time.Second}
	kill := fault.Crash{Process: "consumer", Point: protocol.ConsumerAfterReceive, Action: crashpoint.Kill, Hit: 2, RestartAfter: 200 * time.Millisecond}
	mark := fault.Crash{Process: "relay-1", Point: protocol.RelayAfterMark, Action: crashpoint.Kill, Hit: 1}
	items := []Item{
		{Index: 0, Faults: []fault.Fault{kill, unbind}, Size: 2},
		{Index: 1, Faults: []fault.Fault{unbind}, Size: 1},
		{Index: 2, Faults: []fault.Fault{kill}, Size: 1},
		{Index: 3, Faults: []fault.Fault{mark}, Size: 1},
	}
	for _, tc := range []struct {
		stages                   bool
		routed, consumed, marked string // labels
	}{
		{true, "lost at routed-nowhere; queue unroutable", "lost at consumed-without-effect; faults on consumer", "lost at skipped; faults on relay"},
		{false, "lost; queue unroutable", "lost; faults on consumer", "lost; faults on relay"},
	} {
		cfg := exploreConfig(t, items)
		cfg.Variant = "two-bugs"
		rep := Explore(context.Background(), bugRunner{stages: tc.stages}, items, cfg)
		require.Len(t, rep.Findings, 3, "stages %t", tc.stages)
		byLabel := map[string]Finding{}
		for _, f := range rep.Findings {
			assert.Equal(t, "lost", f.Kind)
			assert.Equal(t, f.Sig().Label(), f.Label)
			byLabel[f.Label] = f
		}
		require.Contains(t, byLabel, tc.routed)
		require.Contains(t, byLabel, tc.consumed)
		require.Contains(t, byLabel, tc.marked)

		routed, consumed, marked := byLabel[tc.routed], byLabel[tc.consumed], byLabel[tc.marked]
		for _, f := range []Finding{routed, consumed} {
			assert.Equal(t, Confirm, f.Failed, f.Label)
			assert.Equal(t, Confirm, f.Of, f.Label)
			assert.NotEmpty(t, f.Steps, "%s: shrunk", f.Label)
			assert.True(t, f.Complete, f.Label)
			assert.Less(t, f.Minimal.Workload.Orders, 20, "%s: shrunk from 120 orders", f.Label)
			assert.Len(t, f.Minimal.Faults, 1, f.Label)
			assert.Len(t, f.Also, 1, "%s: the run with both bugs is folded in", f.Label)
		}
		assert.Equal(t, []int{0, 1}, routed.Runs)
		assert.IsType(t, fault.Unbind{}, routed.Minimal.Faults[0])
		assert.Equal(t, []int{0, 2}, consumed.Runs)
		assert.Equal(t, int64(1), consumed.Minimal.Faults[0].(fault.Crash).Hit)
		if tc.stages {
			assert.Equal(t, []string{"lost at routed-nowhere, consumed-without-effect; faults on consumer; queue unroutable"}, routed.Also)
		}

		assert.Equal(t, "failed 1 of 5", marked.Rate(), "the flaky one is kept with its rate")
		assert.Equal(t, []int{3}, marked.Runs)
		assert.Empty(t, marked.Steps)
		assert.Equal(t, marked.Original, marked.Minimal)
		assert.Contains(t, marked.Confirmed, "flaky")

		dir := t.TempDir()
		require.NoError(t, WriteAll(dir, rep))
		files := map[string]bool{}
		for _, f := range rep.Findings {
			assert.False(t, files[f.File], "%s: a file of its own", f.Label)
			files[f.File] = true
			assert.Equal(t, ScheduleFile(f.Sig()), f.File)
			s, err := LoadSchedule(filepath.Join(dir, f.File))
			require.NoError(t, err)
			assert.Equal(t, f.Minimal, s)
			assert.FileExists(t, filepath.Join(dir, strings.TrimSuffix(f.File, ".json")+".original.json"))
		}
		back, err := LoadReport(filepath.Join(dir, ReportFile))
		require.NoError(t, err)
		assert.Equal(t, rep.Findings[0].Signature, back.Findings[0].Signature)
		assert.Equal(t, rep.Runs[0].Signatures, back.Runs[0].Signatures, "the records keep their signatures")
	}
}

// Shards that found the same two failures merge into two findings, not one
// per kind.
func TestMergeKeepsEverySignature(t *testing.T) {
	a := Finding{Kind: "lost", Signature: Signature{Kind: "lost", Unroutable: true}, Runs: []int{1}, Minimal: Schedule{Faults: []fault.Fault{fault.Unbind{}}}}
	b := Finding{Kind: "lost", Signature: Signature{Kind: "lost", Touched: []string{"consumer"}}, Runs: []int{2}, Minimal: Schedule{Faults: []fault.Fault{fault.Unbind{}}}}
	c := a
	c.Runs, c.Also = []int{5}, []string{"lost; faults on consumer; queue unroutable"}
	fs := mergeFinding(mergeFinding(mergeFinding(nil, a), b), c)
	require.Len(t, fs, 2)
	assert.Equal(t, []int{1, 5}, fs[0].Runs)
	assert.Equal(t, c.Also, fs[0].Also)
	assert.Equal(t, []int{2}, fs[1].Runs)
	// A finding written before signatures were merges by its kind.
	old := Finding{Kind: "stale-write", Runs: []int{3}}
	fs = mergeFinding(mergeFinding(fs, old), old)
	require.Len(t, fs, 3)
	assert.Equal(t, Signature{Kind: "stale-write"}, fs[2].Sig())
}
