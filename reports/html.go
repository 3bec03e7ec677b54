package reports

import (
	"bytes"
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/result"
)

//go:embed report.html.tmpl
var pageSource string

// page is built with html/template only: every value from the run is
// escaped by it, the page needs no script and loads nothing.
var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"ms":    fmtMS,
	"join":  strings.Join,
	"split": strings.Split,
	"inc":   func(i int) int { return i + 1 },
	"upper": upperFirst,
}).Parse(pageSource))

type pageData struct {
	Title string
	// Target names the pipeline attacked (targetName); TargetFile is its
	// target file, Version the faultline that ran it.
	Target, TargetFile, Version string
	Glossary                    []glossarySection
	Pass                        bool
	// Verdict is the headline: PASS, FAIL, INDETERMINATE or INTERRUPTED;
	// VerdictClass its CSS class.
	Verdict, VerdictClass string
	Interrupted           bool
	Retried               []result.Scenario
	Seeds                 string
	Started               string
	Duration              string
	Infra                 string
	Schema                string
	Generated             string
	Stats                 stats
	Columns               []countColumn
	Findings              findings
	Windows               []windowRow
	// LeftOut says in one line which windows the table leaves out.
	LeftOut string
	// VariantNote says in one line why the table has no variant line.
	VariantNote string
	Matrix      matrix
	Timing      []timingRow
	Results     []scenarioView
}

type scenarioView struct {
	ID         string
	S          result.Scenario
	Variant    string
	Window     string // the window it opened, as the protocol words it
	IsVariant  bool
	Outcome    outcome
	Open       bool
	Started    string
	Duration   string
	Phases     string // where its time went
	Recovery   string
	Command    string // runs it again
	Counts     []countItem
	Faults     []faultView
	Violations []violationView
	Failed     []string
	Timeline   *tlView
	Traces     []traceRow
	Hidden     int
	Stages     []string
}

type countItem struct {
	Name  string
	Value int
	Class string
}

type faultView struct {
	result.Fault
	When string
}

type violationView struct {
	result.Violation
	Invariant string
	Expected  bool
	Summary   string // kind, how many, where they stopped
	IDs       idList
	Stages    []stageView
}

func (ix *index) scenarioView(s result.Scenario) scenarioView {
	v := scenarioView{ID: anchor(s), S: s, Variant: variantOf(s), Outcome: ix.verdictOf(s), Stages: stages,
		Duration: fmtDuration(s.DurationMS), Phases: phasesText(s), Recovery: fmtRecovery(s.RecoveryMS), Failed: s.Failed()}
	if s.Verdict != result.NotRun {
		v.Command = reproduceCommand(ix.run, s)
	}
	v.IsVariant = v.Variant != correct
	v.Window = windowText(s.Window)
	v.Open = v.Outcome.Class == clsBad
	if !s.Started.IsZero() {
		v.Started = s.Started.UTC().Format("2006-01-02 15:04:05Z")
	}
	c := s.Counts
	for _, it := range []struct {
		name string
		n    int
		bad  bool
	}{
		{"orders", c.Orders, false}, {"events", c.Events, false}, {"published", c.Published, false}, {"confirmed", c.Confirmed, false},
		{"returned", c.Returned, false}, {"nacked", c.Nacked, false}, {"unknown outcomes", c.Unknown, false}, {"retries", c.Retries, false},
		{"failed (alert)", c.Failed, false}, {"delivered", c.Delivered, false}, {"redelivered", c.Redelivered, false},
		{"dead-lettered", c.DeadLettered, false}, {"reservations", c.Reservations, false},
		{"duplicates published", c.DuplicatesPublished, false}, {"duplicates delivered", c.DuplicatesDelivered, false},
		{"duplicates absorbed", c.DuplicatesAbsorbed, false}, {"duplicate effects", c.DuplicateEffects, true},
		{"lost", c.Lost, true}, {"phantom", c.Phantom, true}, {"fenced writes", c.FencedWrites, false},
		{"stale writes", c.StaleWrites, true}, {"stuck rows", c.StuckRows, true}, {"held back", c.HeldBack, false},
		{"crash point hits", c.CrashPointHits, false},
	} {
		item := countItem{Name: it.name, Value: it.n}
		switch {
		case it.n == 0:
			item.Class = "zero"
		case it.bad:
			item.Class = "bad"
		}
		v.Counts = append(v.Counts, item)
	}
	for _, f := range s.Faults {
		fv := faultView{Fault: f}
		if !f.Start.IsZero() && !s.Started.IsZero() {
			fv.When = "+" + fmtDuration(f.Start.Sub(s.Started).Milliseconds())
			if !f.End.IsZero() {
				fv.When += " for " + fmtDuration(f.End.Sub(f.Start).Milliseconds())
			}
		}
		v.Faults = append(v.Faults, fv)
	}
	for _, inv := range s.Invariants {
		for _, vi := range inv.Violations {
			v.Violations = append(v.Violations, violationView{Violation: vi, Invariant: inv.Name, Expected: inv.Outcome() == result.OutcomeHeld || inv.Outcome() == result.OutcomeLimit,
				Summary: violationSummary(s, vi), IDs: splitIDs(vi.EventIDs), Stages: stageViews(vi)})
		}
	}
	v.Timeline = layoutTimeline(s)
	v.Traces, v.Hidden = traceRows(s.Timeline)
	return v
}

func renderHTML(run result.Run) ([]byte, error) {
	ix := newIndex(run)
	m := ix.matrix()
	kept, left := ix.offered(windowsOf(run))
	d := pageData{
		Title:       "faultline: " + targetName(run),
		Target:      targetName(run),
		TargetFile:  run.TargetFile,
		Version:     cmp.Or(run.Version, notRecorded),
		Glossary:    glossary(),
		Pass:        run.Pass,
		Interrupted: run.Interrupted,
		Retried:     run.Retried,
		Infra:       run.Infra,
		Schema:      run.Schema,
		Generated:   time.Now().UTC().Format("2006-01-02 15:04:05Z"),
		Stats:       ix.stats(m),
		Columns:     countColumns,
		Windows:     ix.windowRows(kept),
		LeftOut:     left.Text(),
		VariantNote: ix.variantNote(),
		Matrix:      m,
		Timing:      timingRows(run),
		Duration:    fmtDuration(run.DurationMS),
		Seeds:       seedsText(run),
	}
	d.Verdict, d.VerdictClass = headline(run)
	d.Findings = ix.findingsOf(d.Stats)
	if !run.Started.IsZero() {
		d.Started = run.Started.UTC().Format("2006-01-02 15:04:05Z")
		d.Title += ", " + run.Started.UTC().Format("2006-01-02 15:04")
	}
	for _, s := range sortedResults(run) {
		d.Results = append(d.Results, ix.scenarioView(s))
	}
	var b bytes.Buffer
	if err := page.Execute(&b, d); err != nil {
		return nil, fmt.Errorf("render index.html: %w", err)
	}
	return b.Bytes(), nil
}

func seedsText(run result.Run) string {
	if len(run.Seeds) < 2 {
		return fmt.Sprint(run.Seed)
	}
	var s []string
	for _, x := range run.Seeds {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ", ")
}

// notRecorded stands for what a run written before it was recorded lacks.
const notRecorded = "not recorded"

// targetName names the run's target in a heading: the name its target
// file gives it, else the file's path.
func targetName(run result.Run) string {
	return cmp.Or(run.Target, run.TargetFile, "target "+notRecorded)
}
