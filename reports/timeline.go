package reports

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/faultline-dev/faultline/harness/result"
)

// The timeline picture of one scenario, laid out here in numbers so the
// template only places shapes: one lane per process with its marks, fault
// spans shaded over the lanes they hit, the traced eventIds drawn as paths
// from lane to lane, the run's phases on top, the rate chart below with the
// before / during / after rates, and the recovery time as a bracket.

const (
	tlWidth       = 1200.0
	tlLeft        = 118.0 // lane labels
	tlMinLabelGap = 170.0 // px between two mark labels on one lane
	tlRight       = 14.0
	tlPhaseY      = 2.0
	tlPhaseH      = 15.0
	tlLanesY      = 22.0
	tlLaneH       = 30.0
	tlRateH       = 58.0
	maxDrawn      = 6  // traces drawn as paths
	maxTraceRow   = 40 // traces listed in the table
)

type tlView struct {
	W, H       float64
	Left       float64
	PlotW      float64
	LanesY     float64
	LanesH     float64
	AxisY      float64
	ZeroX      float64
	Lanes      []laneView
	Spans      []spanView
	Phases     []phaseView
	Ticks      []tickView
	Rate       *rateView
	Traces     []tracePath
	Recovery   *recoveryView
	RateBefore string
	RateDuring string
	RateAfter  string
	Hidden     int // traces not drawn
}

type laneView struct {
	Label string
	Y     float64 // top
	MidY  float64
	Odd   bool
	Marks []markView
}

type markView struct {
	X, Y   float64
	Class  string // kill, pause, delay, resume, restart, start, disconnect, connect, other
	Title  string
	Label  string // drawn next to fault marks
	LabelX float64
}

type spanView struct {
	X, Y, W, H     float64
	Class          string
	Title          string
	Label          string
	LabelX, LabelY float64
}

type phaseView struct {
	X, W   float64
	TextX  float64
	Label  string
	Title  string
	Fits   bool
	Stripe bool
}

type tickView struct {
	X     float64
	Label string
}

type rateView struct {
	Y, H      float64
	Bars      []barView
	Committed string // polyline points
	Published string
	Levels    []levelView
	Max       int
	MaxY      float64
}

type barView struct {
	X, Y, W, H float64
	Title      string
}

type levelView struct {
	X1, X2, Y float64
	Label     string
	Class     string
}

type tracePath struct {
	Class  string
	Points string
	Dots   []dotView
}

type dotView struct {
	X, Y  float64
	Title string
}

type recoveryView struct {
	X1, X2, Y float64
	Top, Bot  float64
	Label     string
	LabelX    float64
}

// markClass names a mark's symbol from its kind and label.
func markClass(kind, label string) string {
	s := strings.ToLower(kind + " " + label)
	switch {
	case strings.Contains(s, "kill"):
		return "kill"
	case strings.Contains(s, "pause"), strings.Contains(s, "sigstop"):
		return "pause"
	case strings.Contains(s, "delay"):
		return "delay"
	case strings.Contains(s, "resume"), strings.Contains(s, "sigcont"):
		return "resume"
	case strings.Contains(s, "restart"):
		return "restart"
	case strings.Contains(s, "crash"):
		return "kill"
	case strings.Contains(s, "disconnect"):
		return "disconnect"
	case strings.Contains(s, "connect"):
		return "connect"
	case strings.Contains(s, "start"):
		return "start"
	}
	return "other"
}

// spanClass names a fault span's shading.
func spanClass(kind string) string {
	switch k := strings.ToLower(kind); k {
	case "crash", "kill", "pause", "toxic", "link-down", "broker-restart", "unbind", "replay", "poison":
		return "f-" + k
	}
	return "f-other"
}

// laneFor finds the lane of a process or of one of its links
// ("relay-1.amqp" belongs to relay-1, not to relay-10).
func laneFor(lanes []result.Lane, target string) int {
	for i, l := range lanes {
		if l.Process == target {
			return i
		}
	}
	best, bestLen := -1, 0
	for i, l := range lanes {
		p := l.Process
		if len(p) > bestLen && strings.HasPrefix(target, p) && len(target) > len(p) {
			c := target[len(p)]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				best, bestLen = i, len(p)
			}
		}
	}
	return best
}

func r1(x float64) float64 { return math.Round(x*10) / 10 }

// niceStep picks an axis step giving at most about ten ticks.
func niceStep(span int64) int64 {
	for _, s := range []int64{100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000} {
		if span/s <= 10 {
			return s
		}
	}
	return 1_800_000
}

func fmtRate(r float64) string {
	if r >= 100 || r == math.Trunc(r) {
		return fmt.Sprintf("%.0f/s", r)
	}
	return fmt.Sprintf("%.1f/s", r)
}

// layoutTimeline lays out a scenario's timeline; nil when none was recorded.
func layoutTimeline(s result.Scenario) *tlView {
	tl := s.Timeline
	if tl == nil {
		return nil
	}
	spans := tl.Faults
	if len(spans) == 0 {
		// Fall back on the faults' own times.
		for _, f := range s.Faults {
			if f.Start.IsZero() || tl.StartedAt.IsZero() {
				continue
			}
			sp := result.Span{Kind: f.Kind, Target: f.Target, Label: f.Detail, StartMS: f.Start.Sub(tl.StartedAt).Milliseconds()}
			sp.EndMS = sp.StartMS
			if !f.End.IsZero() {
				sp.EndMS = f.End.Sub(tl.StartedAt).Milliseconds()
			}
			spans = append(spans, sp)
		}
	}

	// The time axis covers everything drawn.
	t0, t1 := int64(0), max(tl.EndMS, 1)
	see := func(t int64) {
		t0, t1 = min(t0, t), max(t1, t)
	}
	for _, l := range tl.Lanes {
		for _, m := range l.Marks {
			see(m.AtMS)
		}
	}
	for _, sp := range spans {
		see(sp.StartMS)
		see(sp.EndMS)
	}
	for _, b := range tl.Rate {
		see(b.AtMS)
		see(b.AtMS + tl.BucketMS)
	}
	for _, tr := range tl.Traces {
		for _, st := range tr.Steps {
			see(st.AtMS)
		}
	}
	lastFault := int64(math.MinInt64)
	for _, sp := range spans {
		lastFault = max(lastFault, sp.EndMS, sp.StartMS)
	}
	if lastFault != math.MinInt64 && s.RecoveryMS > 0 {
		see(lastFault + s.RecoveryMS)
	}
	if t1 == t0 {
		t1 = t0 + 1
	}

	v := &tlView{W: tlWidth, Left: tlLeft, PlotW: tlWidth - tlLeft - tlRight, LanesY: tlLanesY}
	x := func(t int64) float64 {
		return r1(tlLeft + float64(t-t0)/float64(t1-t0)*v.PlotW)
	}
	v.ZeroX = x(0)
	v.RateBefore, v.RateDuring, v.RateAfter = fmtRate(tl.RateBefore), fmtRate(tl.RateDuring), fmtRate(tl.RateAfter)

	// Lanes and their marks.
	for i, l := range tl.Lanes {
		y := tlLanesY + float64(i)*tlLaneH
		lv := laneView{Label: l.Process, Y: y, MidY: y + tlLaneH/2, Odd: i%2 == 1}
		lastLabelX := -1e9
		for _, m := range l.Marks {
			mv := markView{X: x(m.AtMS), Y: lv.MidY, Class: markClass(m.Kind, m.Label)}
			mv.Title = fmt.Sprintf("%s %s: %s at %s", l.Process, m.Kind, m.Label, fmtAt(m.AtMS))
			switch mv.Class {
			case "kill", "pause", "delay", "resume", "restart":
				mv.Label = m.Label
				if mv.Label == "" || mv.Class == "restart" {
					// a restart's label is the process's whole start line: the tooltip has it
					mv.Label = m.Kind
				}
				if mv.X-lastLabelX < tlMinLabelGap {
					mv.Label = "" // too close to the previous label: the tooltip still has it
				} else {
					lastLabelX = mv.X
				}
				mv.LabelX = mv.X + 8
			}
			lv.Marks = append(lv.Marks, mv)
		}
		v.Lanes = append(v.Lanes, lv)
	}
	v.LanesH = float64(len(tl.Lanes)) * tlLaneH
	if v.LanesH == 0 {
		v.LanesH = tlLaneH
	}
	lanesBottom := tlLanesY + v.LanesH

	// Fault spans, over the lane they hit or over every lane.
	for _, sp := range spans {
		sv := spanView{X: x(sp.StartMS), Class: spanClass(sp.Kind), Y: tlLanesY, H: v.LanesH}
		sv.W = max(x(sp.EndMS)-sv.X, 2)
		if i := laneFor(tl.Lanes, sp.Target); i >= 0 {
			sv.Y, sv.H = tlLanesY+float64(i)*tlLaneH+1, tlLaneH-2
		}
		label := sp.Label
		if label == "" {
			label = sp.Kind
		}
		sv.Title = fmt.Sprintf("%s on %s: %s, %s to %s (%s)", sp.Kind, sp.Target, label, fmtAt(sp.StartMS), fmtAt(sp.EndMS), fmtDuration(sp.EndMS-sp.StartMS))
		if sv.W >= 46 {
			sv.Label = sp.Kind
			sv.LabelX, sv.LabelY = sv.X+3, sv.Y+sv.H-3
		}
		v.Spans = append(v.Spans, sv)
	}

	// Phases on top, relative to the workload's start.
	if !tl.StartedAt.IsZero() {
		for i, p := range s.Phases {
			a, b := p.Start.Sub(tl.StartedAt).Milliseconds(), p.End.Sub(tl.StartedAt).Milliseconds()
			a, b = max(a, t0), min(b, t1)
			if b <= a {
				continue
			}
			pv := phaseView{X: x(a), Label: p.Name, Stripe: i%2 == 1}
			pv.W = max(x(b)-pv.X, 1)
			pv.TextX = pv.X + 4
			pv.Fits = pv.W >= float64(len(p.Name))*6+8
			pv.Title = fmt.Sprintf("%s: %s to %s", p.Name, fmtAt(a), fmtAt(b))
			v.Phases = append(v.Phases, pv)
		}
	}

	// Traced eventIds: a path from lane to lane through their steps.
	for i, tr := range tl.Traces {
		if i >= maxDrawn {
			v.Hidden = len(tl.Traces) - maxDrawn
			break
		}
		tp := tracePath{Class: fmt.Sprintf("t%d", i)}
		var pts []string
		steps := append([]result.Step(nil), tr.Steps...)
		sort.SliceStable(steps, func(a, b int) bool { return steps[a].AtMS < steps[b].AtMS })
		for _, st := range steps {
			li := laneFor(tl.Lanes, st.Process)
			if li < 0 {
				continue
			}
			// Offset each trace a little so parallel paths stay apart.
			y := r1(tlLanesY + float64(li)*tlLaneH + tlLaneH/2 - 6 + float64(i%4)*4)
			d := dotView{X: x(st.AtMS), Y: y, Title: stepTitle(tr.EventID, st)}
			tp.Dots = append(tp.Dots, d)
			pts = append(pts, fmt.Sprintf("%g,%g", d.X, d.Y))
		}
		tp.Points = strings.Join(pts, " ")
		v.Traces = append(v.Traces, tp)
	}

	// Axis.
	v.AxisY = lanesBottom
	step := niceStep(t1 - t0)
	for t := (t0 / step) * step; t <= t1; t += step {
		if t < t0 {
			continue
		}
		label := fmt.Sprintf("%g s", float64(t)/1000)
		if step < 1000 {
			label = fmt.Sprintf("%d ms", t)
		}
		v.Ticks = append(v.Ticks, tickView{X: x(t), Label: label})
	}
	y := lanesBottom + 18

	// Recovery: from the last fault to convergence.
	if lastFault != math.MinInt64 && s.RecoveryMS > 0 {
		rv := &recoveryView{X1: x(lastFault), X2: x(lastFault + s.RecoveryMS), Y: y + 6, Label: "recovery " + fmtMS(s.RecoveryMS)}
		rv.LabelX, rv.Top, rv.Bot = rv.X1+4, rv.Y-4, rv.Y+4
		v.Recovery = rv
		y += 16
	}

	// Rate chart: events reserved per bucket as bars, committed and
	// published as lines, the before / during / after rates as levels.
	if len(tl.Rate) > 0 {
		rt := &rateView{Y: y + 4, H: tlRateH}
		mx := 1
		for _, b := range tl.Rate {
			mx = max(mx, b.Committed, b.Published, b.Reserved)
		}
		rt.Max, rt.MaxY = mx, rt.Y+8
		bucket := tl.BucketMS
		if bucket <= 0 && len(tl.Rate) > 1 {
			bucket = tl.Rate[1].AtMS - tl.Rate[0].AtMS
		}
		bucket = max(bucket, 1)
		base := rt.Y + rt.H
		hy := func(n float64) float64 { return r1(base - n/float64(mx)*(rt.H-4)) }
		var com, pub []string
		for _, b := range tl.Rate {
			bx := x(b.AtMS)
			bw := max(x(b.AtMS+bucket)-bx-1, 1)
			h := r1(base - hy(float64(b.Reserved)))
			rt.Bars = append(rt.Bars, barView{X: bx, Y: r1(base - h), W: r1(bw), H: h,
				Title: fmt.Sprintf("%s: %d committed, %d published, %d reserved", fmtAt(b.AtMS), b.Committed, b.Published, b.Reserved)})
			mid := r1(bx + bw/2)
			com = append(com, fmt.Sprintf("%g,%g", mid, hy(float64(b.Committed))))
			pub = append(pub, fmt.Sprintf("%g,%g", mid, hy(float64(b.Published))))
		}
		rt.Committed, rt.Published = strings.Join(com, " "), strings.Join(pub, " ")
		perBucket := func(r float64) float64 { return hy(r * float64(bucket) / 1000) }
		if len(spans) > 0 {
			fs, fe := spans[0].StartMS, spans[0].EndMS
			for _, sp := range spans {
				fs, fe = min(fs, sp.StartMS), max(fe, sp.EndMS)
			}
			rt.Levels = []levelView{
				{X1: x(t0), X2: x(fs), Y: perBucket(tl.RateBefore), Label: "before " + v.RateBefore, Class: "before"},
				{X1: x(fs), X2: x(fe), Y: perBucket(tl.RateDuring), Label: "during " + v.RateDuring, Class: "during"},
				{X1: x(fe), X2: x(t1), Y: perBucket(tl.RateAfter), Label: "after " + v.RateAfter, Class: "after"},
			}
		} else {
			rt.Levels = []levelView{{X1: x(t0), X2: x(t1), Y: perBucket(tl.RateAfter), Label: "rate " + v.RateAfter, Class: "after"}}
		}
		v.Rate = rt
		y = base + 4
	}
	v.H = r1(y + 14)
	return v
}

func stepTitle(id string, st result.Step) string {
	t := fmt.Sprintf("%s %s by %s at %s", id, st.Event, st.Process, fmtAt(st.AtMS))
	if st.ClaimID != "" {
		t += " claim " + st.ClaimID
	}
	if st.Detail != "" {
		t += " (" + st.Detail + ")"
	}
	return t
}

// The lifecycle columns of the traces table.
var stages = []string{"committed", "claimed", "published", "confirmed", "marked / fenced", "delivered", "reserved", "acked", "other"}

func stageOf(event string) int {
	switch event {
	case "committed":
		return 0
	case "claimed", "reclaimed":
		return 1
	case "published":
		return 2
	case "confirmed":
		return 3
	case "marked", "fenced":
		return 4
	case "delivered":
		return 5
	case "reserved":
		return 6
	case "acked":
		return 7
	}
	return 8
}

type stepCell struct {
	Text  string
	Title string
	Class string
}

type traceRow struct {
	EventID string
	Why     string
	Class   string // matches its path's colour when drawn
	Cells   [][]stepCell
}

// traceRows lays out the traces table: one row per eventId, one column per
// lifecycle step, a step seen twice shown twice.
func traceRows(tl *result.Timeline) (rows []traceRow, hidden int) {
	if tl == nil {
		return nil, 0
	}
	for i, tr := range tl.Traces {
		if i >= maxTraceRow {
			return rows, len(tl.Traces) - maxTraceRow
		}
		row := traceRow{EventID: tr.EventID, Why: tr.Why, Cells: make([][]stepCell, len(stages))}
		if i < maxDrawn {
			row.Class = fmt.Sprintf("t%d", i)
		}
		for _, st := range tr.Steps {
			c := stepCell{Text: fmtAt(st.AtMS) + " " + st.Process, Title: stepTitle(tr.EventID, st)}
			k := stageOf(st.Event)
			if k == len(stages)-1 || st.Event == "fenced" {
				c.Text = st.Event + " " + c.Text
			}
			switch st.Event {
			case "fenced", "nacked", "returned", "dead-lettered":
				c.Class = "warn"
			case "duplicate":
				c.Class = "dup"
			}
			row.Cells[k] = append(row.Cells[k], c)
		}
		rows = append(rows, row)
	}
	return rows, 0
}
