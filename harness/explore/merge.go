package explore

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// ReportFile is the name of an exploration's data in its report folder.
const ReportFile = "explore.json"

// LoadReport reads an explore.json.
func LoadReport(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read exploration: %w", err)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("exploration %s: %w", path, err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("exploration %s: schema %q, want %q", path, r.Schema, Schema)
	}
	return &r, nil
}

// WriteReport writes an explore.json, whole or not at all.
func WriteReport(path string, r *Report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("exploration: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write exploration: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write exploration: %w", err)
	}
	return nil
}

// shardsOf are the shards a report holds.
func shardsOf(r *Report) []Shard {
	if len(r.Shards) > 0 {
		return r.Shards
	}
	return []Shard{r.Shard}
}

// Merge merges the reports of the shards of one exploration (the same
// target, variant, seed and plan) into one: their runs together, the
// coverage counted over all of them, and per signature the smallest
// minimal schedule any shard found. A shard given twice, or
// reports of different explorations, are errors; missing shards are noted.
func Merge(reports []*Report) (*Report, error) {
	if len(reports) == 0 {
		return nil, fmt.Errorf("merge: no exploration")
	}
	first := reports[0]
	count := shardsOf(first)[0].Count
	out := &Report{Schema: Schema, Target: first.Target, Variant: first.Variant, Seed: first.Seed, Hits: first.Hits,
		PlanTotal: first.PlanTotal, Workload: first.Workload, Settings: first.Settings, BudgetMS: first.BudgetMS,
		ShrinkBudgetMS: first.ShrinkBudgetMS, Started: first.Started, Offered: first.Offered, Runs: []Record{}, Findings: []Finding{},
		Exhausted: true}
	held := map[int]bool{}
	seen := map[int]bool{}
	for i, r := range reports {
		var diff []string
		for _, c := range []struct {
			what string
			a, b any
		}{
			{"target", r.Target, first.Target}, {"variant", r.Variant, first.Variant}, {"seed", r.Seed, first.Seed},
			{"hits", r.Hits, first.Hits}, {"plan length", r.PlanTotal, first.PlanTotal}, {"workload", r.Workload, first.Workload},
			{"settings", r.Settings, first.Settings}, {"shard count", shardsOf(r)[0].Count, count},
		} {
			if !reflect.DeepEqual(c.a, c.b) {
				diff = append(diff, fmt.Sprintf("%s %v, not %v", c.what, c.a, c.b))
			}
		}
		if len(diff) > 0 {
			return nil, fmt.Errorf("merge: exploration %d is not a shard of the same exploration as the first: %s", i+1, strings.Join(diff, "; "))
		}
		for _, s := range shardsOf(r) {
			if s.All() && len(reports) > 1 {
				return nil, fmt.Errorf("merge: exploration %d is not sharded (it explored the whole plan)", i+1)
			}
			if held[s.Index] {
				return nil, fmt.Errorf("merge: shard %s given twice", s)
			}
			held[s.Index] = true
			out.Shards = append(out.Shards, s)
		}
		for _, run := range r.Runs {
			if seen[run.Index] {
				return nil, fmt.Errorf("merge: run #%d is in two explorations", run.Index)
			}
			seen[run.Index] = true
			out.Runs = append(out.Runs, run)
		}
		out.Planned += r.Planned
		out.Exhausted = out.Exhausted && r.Exhausted
		out.DurationMS = max(out.DurationMS, r.DurationMS)
		if r.Started.Before(out.Started) {
			out.Started = r.Started
		}
		out.Notes = append(out.Notes, r.Notes...)
		for _, f := range r.Findings {
			out.Findings = mergeFinding(out.Findings, f)
		}
	}
	sort.Slice(out.Shards, func(i, j int) bool { return out.Shards[i].Index < out.Shards[j].Index })
	if count > 1 {
		var missing []string
		for i := 1; i <= count; i++ {
			if !held[i] {
				missing = append(missing, Shard{Index: i, Count: count}.String())
			}
		}
		if len(missing) > 0 {
			out.Exhausted = false
			out.Notes = append(out.Notes, fmt.Sprintf("shards %s missing: their runs are not counted", strings.Join(missing, ", ")))
		}
	} else {
		out.Shard = first.Shard
		out.Shards = nil
	}
	sort.Slice(out.Runs, func(i, j int) bool { return out.Runs[i].Index < out.Runs[j].Index })
	sort.Slice(out.Findings, func(i, j int) bool { return out.Findings[i].Sig().Key() < out.Findings[j].Sig().Key() })
	out.Coverage = ComputeCoverage(out.Offered, out.Runs)
	return out, nil
}

// mergeFinding adds f to the findings: per signature, the runs of both,
// the signatures folded into either, and the smaller minimal schedule
// (fewer faults, then fewer orders, then the earlier original run).
func mergeFinding(fs []Finding, f Finding) []Finding {
	for i, g := range fs {
		if g.Sig().Key() != f.Sig().Key() {
			continue
		}
		runs := append(slices.Clone(g.Runs), f.Runs...)
		slices.Sort(runs)
		also := append(slices.Clone(g.Also), f.Also...)
		slices.Sort(also)
		if smallerFinding(f, g) {
			fs[i] = f
		}
		fs[i].Runs = slices.Compact(runs)
		fs[i].Also = slices.Compact(also)
		return fs
	}
	return append(fs, f)
}

func smallerFinding(a, b Finding) bool {
	if x, y := len(a.Minimal.Faults), len(b.Minimal.Faults); x != y {
		return x < y
	}
	if x, y := a.Minimal.Workload.Orders, b.Minimal.Workload.Orders; x != y {
		return x < y
	}
	return len(a.Runs) > 0 && len(b.Runs) > 0 && a.Runs[0] < b.Runs[0]
}
