package explore

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/workload"
)

// PageFile is the name of an exploration's page in its report folder.
const PageFile = "explore.html"

//go:embed explore.html.tmpl
var pageTemplate string

var page = template.Must(template.New("explore").Funcs(template.FuncMap{
	"join": strings.Join,
	"kinds": func(m map[string]int) string {
		if len(m) == 0 {
			return "-"
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s ×%d", k, m[k])
		}
		return strings.Join(parts, ", ")
	},
	"class": func(status string) string { return strings.ReplaceAll(status, " ", "-") },
	"secs":  func(ms int64) string { return fmt.Sprintf("%.1f", float64(ms)/1000) },
}).Parse(pageTemplate))

type pageData struct {
	Title                                 string
	R                                     *Report
	ShardText, Budget, ShrinkBudget, Took string
	Workload, Settings                    string
	Opened, Offered                       int
	Findings                              []findingView
	Unjudged                              []Record // runs that ended without a verdict
}

type findingView struct {
	Finding
	Slug, SigLabel, RateText          string
	Flaky                             bool
	From                              int
	Replay                            string
	OriginalFaults, MinimalFaults     []string
	OriginalWorkload, MinimalWorkload string
	MinimalJSON                       string
}

// ScheduleFile is the name of the minimal schedule of a signature:
// schedule-SLUG.json (Signature.Slug), one file per distinct failure.
func ScheduleFile(sig Signature) string {
	return "schedule-" + sig.Slug() + ".json"
}

// ReplayCommand is how to replay a finding's minimal schedule.
func ReplayCommand(f Finding) string {
	file := f.File
	if file == "" {
		file = ScheduleFile(f.Sig())
	}
	cmd := "faultline run --schedule " + file
	if v := f.Minimal.Variant; v != "" && v != "correct" {
		cmd += " --variant " + v
	}
	return cmd
}

// WorkloadText is a workload in a few words.
func WorkloadText(w workload.Spec) string {
	s := fmt.Sprintf("%d orders", w.Orders)
	if w.Pace > 0 {
		s += " over " + w.Pace.String()
	}
	if name := w.ProfileName(); name != workload.Paced {
		s = name + ": " + s
	}
	return s
}

// RenderHTML renders the exploration's page: one self-contained file
// (inline CSS, no script, nothing from the network), everything from the
// runs escaped.
func RenderHTML(r *Report) ([]byte, error) {
	opened, offered := r.Coverage.Covered()
	d := pageData{
		Title: "faultline explore: " + r.Target + " [" + r.Variant + "]", R: r,
		ShardText: shardText(r), Budget: ms(r.BudgetMS), ShrinkBudget: ms(r.ShrinkBudgetMS), Took: ms(r.DurationMS),
		Workload: WorkloadText(workload.Spec{Orders: r.Workload.Orders, Pace: time.Duration(r.Workload.Pace)}),
		Settings: settingsText(r.Settings), Opened: opened, Offered: offered, Unjudged: Unjudged(r.Runs),
	}
	for _, f := range r.Findings {
		v := findingView{Finding: f, Replay: ReplayCommand(f), Slug: f.Sig().Slug(), SigLabel: f.Sig().Label(), RateText: f.Rate(),
			Flaky:          f.Of > 0 && f.Failed < f.Of,
			OriginalFaults: describeAll(f.Original), MinimalFaults: describeAll(f.Minimal),
			OriginalWorkload: WorkloadText(f.Original.Workload), MinimalWorkload: WorkloadText(f.Minimal.Workload)}
		if _, err := fmt.Sscanf(f.Original.Origin, "explore run #%d", &v.From); err != nil && len(f.Runs) > 0 {
			v.From = f.Runs[0]
		}
		data, err := json.MarshalIndent(f.Minimal, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("explore page: %w", err)
		}
		v.MinimalJSON = string(data)
		d.Findings = append(d.Findings, v)
	}
	var b bytes.Buffer
	if err := page.Execute(&b, d); err != nil {
		return nil, fmt.Errorf("explore page: %w", err)
	}
	return b.Bytes(), nil
}

func describeAll(s Schedule) []string {
	out := make([]string, len(s.Faults))
	for i, f := range s.Faults {
		out[i] = Describe(f)
	}
	return out
}

func shardText(r *Report) string {
	if len(r.Shards) > 0 {
		parts := make([]string, len(r.Shards))
		for i, s := range r.Shards {
			parts[i] = s.String()
		}
		return "merged " + strings.Join(parts, ", ")
	}
	return r.Shard.String()
}

func settingsText(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, " ")
}

func ms(v int64) string {
	return (time.Duration(v) * time.Millisecond).Round(100 * time.Millisecond).String()
}

// WriteAll writes the report folder's exploration files: each finding's
// minimal schedule and its original (schedule-SLUG.json,
// schedule-SLUG.original.json, SLUG naming its signature), explore.json
// and explore.html.
func WriteAll(dir string, r *Report) error {
	for i := range r.Findings {
		f := &r.Findings[i]
		f.File = ScheduleFile(f.Sig())
		if err := WriteSchedule(filepath.Join(dir, f.File), f.Minimal); err != nil {
			return err
		}
		if err := WriteSchedule(filepath.Join(dir, strings.TrimSuffix(f.File, ".json")+".original.json"), f.Original); err != nil {
			return err
		}
	}
	if err := WriteReport(filepath.Join(dir, ReportFile), r); err != nil {
		return err
	}
	html, err := RenderHTML(r)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, PageFile), html, 0o644); err != nil {
		return fmt.Errorf("write explore page: %w", err)
	}
	return nil
}
