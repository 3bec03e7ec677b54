package explore

import (
	"slices"
	"sort"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/result"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
)

// Offered is what a target offers to explore: each protocol window with
// the processes that have a crash point there (none: not offered), and its
// links.
type Offered struct {
	Windows []OfferedWindow `json:"windows"`
	Links   []string        `json:"links"`
}

// OfferedWindow is one protocol window.
type OfferedWindow struct {
	Name string   `json:"name"`
	Role string   `json:"role"`
	By   []string `json:"by,omitempty"` // processes of the target file with a crash point there
}

// OfferedOf is what the target offers.
func OfferedOf(t *target.Target, s Surface) Offered {
	by := t.Windows()
	var o Offered
	for _, w := range protocol.Windows() {
		o.Windows = append(o.Windows, OfferedWindow{Name: w.Name, Role: w.Role, By: by[w.Name]})
	}
	// Then the windows opened from outside (a black-box window, the
	// unroutable queue, ...), as each kind offers them.
	for _, k := range fault.Kinds() {
		for _, w := range k.Offered(&s.Surface) {
			o.Windows = append(o.Windows, OfferedWindow{Name: w.Name, Role: w.Role, By: w.By})
		}
	}
	o.Links = []string{}
	for _, l := range s.Links {
		o.Links = append(o.Links, string(l.Ref))
	}
	return o
}

// Record is one explored run as data: its faults, whether each happened,
// and what the checker found.
type Record struct {
	Index  int    `json:"index"`
	Faults []Spec `json:"faults"`
	// Settings the run turned and the optional invariants it was judged
	// by, as in its item.
	Settings   map[string]string `json:"settings,omitempty"`
	Invariants []string          `json:"invariants,omitempty"`
	// Profile is the traffic profile the run sent, as in its item ("":
	// the exploration's own).
	Profile string `json:"profile,omitempty"`
	// Hit says, per fault, whether it happened (the crash point fired, the
	// toxic went on): the evidence that its window was opened.
	Hit         []bool   `json:"hit"`
	FaultErrors []string `json:"fault_errors,omitempty"`
	Verdict     string   `json:"verdict"`
	// Violations are the kinds of violation the run reported (lost,
	// phantom, duplicate-effect, stale-write, stuck-row, ...).
	Violations []string `json:"violations,omitempty"`
	// Signatures tell the run's failures apart: one per kind, with the
	// stages its events stopped at, the processes and links its faults
	// touched and whether the queue was unroutable (Signature).
	Signatures []Signature `json:"signatures,omitempty"`
	Reason     string      `json:"reason,omitempty"`
	DurationMS int64       `json:"duration_ms"`
	Dir        string      `json:"dir,omitempty"`
	// Describe is the faults in one line.
	Describe string `json:"describe"`
	// HeldUp: with StopAtFirst, the run's violation failed again in every
	// run of its recheck.
	HeldUp bool `json:"held_up,omitempty"`
	// Attempts is how many times the run was made when an attempt ended
	// unjudged (Config.Retries); the record is the last attempt's, and
	// Earlier says why each earlier one showed nothing.
	Attempts int      `json:"attempts,omitempty"`
	Earlier  []string `json:"earlier,omitempty"`
}

// Opened reports whether the run opened every one of its faults.
func (r Record) Opened() bool {
	if len(r.Hit) != len(r.Faults) {
		return false
	}
	for _, h := range r.Hit {
		if !h {
			return false
		}
	}
	return true
}

// Unjudged reports a run that ended without a verdict on the pipeline: it
// failed with no violation although every fault happened (faultline could
// not read a log, query the contract, reach the infrastructure), or it was
// not run at all. Such a run is neither a violation nor a pass; one whose
// fault did not happen is a window not opened, not this.
func (r Record) Unjudged() bool {
	if r.Judged() {
		return false
	}
	return r.Verdict == result.NotRun || r.Opened()
}

// Judged reports a run that said something of the pipeline: a pass, a
// documented limit, or a violation. Any other run (indeterminate, not run,
// an error) says nothing either way.
func (r Record) Judged() bool {
	return len(r.Violations) > 0 || r.Verdict == result.Pass || r.Verdict == result.Limit
}

// Unjudged returns the runs that ended without a verdict, in run order.
func Unjudged(runs []Record) []Record {
	var out []Record
	for _, r := range runs {
		if r.Unjudged() {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return a.Index - b.Index })
	return out
}

// RecordOf makes the record of a run of faults.
func RecordOf(index int, specs []Spec, describe string, res result.Scenario) Record {
	r := Record{Index: index, Faults: specs, Hit: make([]bool, len(specs)), Verdict: res.Verdict, Reason: res.Reason,
		DurationMS: res.DurationMS, Dir: res.Dir, Describe: describe, Violations: res.ViolationKinds()}
	var hit []bool // nil: which faults happened is not known
	if len(res.Faults) == len(specs) {
		hit = r.Hit
		for i, f := range res.Faults {
			r.Hit[i] = f.Hit
			if f.Error != "" {
				if r.FaultErrors == nil {
					r.FaultErrors = make([]string, len(specs))
				}
				r.FaultErrors[i] = f.Error
			}
		}
	}
	r.Signatures = SignaturesOf(specs, hit, res)
	return r
}

// Coverage statuses. A window no run opened is unexplored, never safe.
const (
	StatusOpened     = "opened"
	StatusUnexplored = "unexplored"
	StatusNotOffered = "not offered"
)

// Coverage is, per window and per link, how many runs tried it and how
// many opened it.
type Coverage struct {
	Windows []WindowCoverage `json:"windows"`
	Links   []LinkCoverage   `json:"links"`
}

// Counts of the runs that tried one window or link.
type Counts struct {
	Runs      int `json:"runs"`       // runs with a fault there
	Opened    int `json:"opened"`     // of them, runs whose fault there happened
	NotOpened int `json:"not_opened"` // runs whose fault there never happened
	// Violations counts, per kind, the runs that opened it and reported
	// that violation.
	Violations map[string]int `json:"violations,omitempty"`
	Status     string         `json:"status"`
}

// WindowCoverage is one protocol window.
type WindowCoverage struct {
	Window string   `json:"window"`
	Role   string   `json:"role"`
	By     []string `json:"by,omitempty"`
	Counts
}

// LinkCoverage is one link.
type LinkCoverage struct {
	Link string `json:"link"`
	Counts
}

// Covered counts the windows opened and the windows offered.
func (c Coverage) Covered() (opened, offered int) {
	for _, w := range c.Windows {
		if w.Status == StatusNotOffered {
			continue
		}
		offered++
		if w.Status == StatusOpened {
			opened++
		}
	}
	return opened, offered
}

// ComputeCoverage counts, for each window and link offered, the runs that
// had a fault there, the runs that opened it (that fault happened) and the
// runs that did not. A run counts once per window, as opened if any of its
// faults there happened.
func ComputeCoverage(o Offered, records []Record) Coverage {
	win := map[string]*Counts{}
	link := map[string]*Counts{}
	get := func(m map[string]*Counts, k string) *Counts {
		c, ok := m[k]
		if !ok {
			c = &Counts{}
			m[k] = c
		}
		return c
	}
	for _, r := range records {
		wHit, lHit := map[string]bool{}, map[string]bool{}
		for i, s := range r.Faults {
			hit := i < len(r.Hit) && r.Hit[i]
			if w := s.Window(); w != "" {
				wHit[w] = wHit[w] || hit
			}
			for _, l := range s.touches().Links {
				lHit[string(l)] = lHit[string(l)] || hit
			}
		}
		count := func(m map[string]*Counts, seen map[string]bool) {
			for k, hit := range seen {
				c := get(m, k)
				c.Runs++
				if !hit {
					c.NotOpened++
					continue
				}
				c.Opened++
				for _, v := range r.Violations {
					if c.Violations == nil {
						c.Violations = map[string]int{}
					}
					c.Violations[v]++
				}
			}
		}
		count(win, wHit)
		count(link, lHit)
	}
	status := func(c Counts, offered bool) string {
		switch {
		case !offered && c.Runs == 0:
			return StatusNotOffered
		case c.Opened > 0:
			return StatusOpened
		default:
			return StatusUnexplored
		}
	}
	var cov Coverage
	known := map[string]bool{}
	for _, w := range o.Windows {
		known[w.Name] = true
		c := Counts{}
		if p := win[w.Name]; p != nil {
			c = *p
		}
		c.Status = status(c, len(w.By) > 0)
		cov.Windows = append(cov.Windows, WindowCoverage{Window: w.Name, Role: w.Role, By: w.By, Counts: c})
	}
	// Windows a schedule named that the offer does not list (a schedule
	// from a file): shown, after the protocol's.
	var extra []string
	for w := range win {
		if !known[w] {
			extra = append(extra, w)
		}
	}
	sort.Strings(extra)
	for _, w := range extra {
		c := *win[w]
		c.Status = status(c, false)
		cov.Windows = append(cov.Windows, WindowCoverage{Window: w, Counts: c})
	}
	links := slices.Clone(o.Links)
	for l := range link {
		if !slices.Contains(links, l) {
			links = append(links, l)
		}
	}
	cov.Links = []LinkCoverage{}
	for _, l := range links {
		c := Counts{}
		if p := link[l]; p != nil {
			c = *p
		}
		c.Status = status(c, slices.Contains(o.Links, l))
		cov.Links = append(cov.Links, LinkCoverage{Link: l, Counts: c})
	}
	return cov
}
