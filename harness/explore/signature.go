package explore

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/faultline-dev/faultline/harness/history"
	"github.com/faultline-dev/faultline/harness/result"
)

// Signature tells one failure from another of the same kind: one lost bug
// must not hide another lost bug with a different cause. It is the
// violation's kind, the stages its events stopped at (what the checker
// put in Violation.Stages; none when it gave none), the processes and links
// the run's faults touched, and whether the queue was made unroutable.
// Processes and links are named by role ("relay", "consumer.pg"), not by
// instance: the same bug hit through relay-1 or relay-2 is one bug.
type Signature struct {
	Kind       string         `json:"kind"`
	Stages     []result.Stage `json:"stages,omitempty"`  // in pipeline order, each once
	Touched    []string       `json:"touched,omitempty"` // sorted, each once
	Unroutable bool           `json:"unroutable,omitempty"`
}

// Key is the signature as a stable string: equal signatures, equal keys.
func (s Signature) Key() string {
	stages := make([]string, len(s.Stages))
	for i, st := range s.Stages {
		stages[i] = string(st)
	}
	unroutable := ""
	if s.Unroutable {
		unroutable = "unroutable"
	}
	return strings.Join([]string{s.Kind, strings.Join(stages, ","), strings.Join(s.Touched, ","), unroutable}, "|")
}

// Label is the signature in a few words, e.g. "lost at routed-nowhere;
// faults on consumer; queue unroutable".
func (s Signature) Label() string {
	parts := []string{s.Kind}
	if len(s.Stages) > 0 {
		stages := make([]string, len(s.Stages))
		for i, st := range s.Stages {
			stages[i] = string(st)
		}
		parts[0] += " at " + strings.Join(stages, ", ")
	}
	if len(s.Touched) > 0 {
		parts = append(parts, "faults on "+strings.Join(s.Touched, ", "))
	}
	if s.Unroutable {
		parts = append(parts, "queue unroutable")
	}
	return strings.Join(parts, "; ")
}

// maxSlug bounds the readable part of a slug; the hash after it keeps
// slugs of different signatures apart.
const maxSlug = 48

// Slug is the signature as a short file-name part: its kind, stages,
// touched processes and links and "unroutable" as far as maxSlug allows,
// then six hex digits of its key.
func (s Signature) Slug() string {
	parts := []string{s.Kind}
	for _, st := range s.Stages {
		parts = append(parts, string(st))
	}
	parts = append(parts, s.Touched...)
	if s.Unroutable {
		parts = append(parts, "unroutable")
	}
	readable := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(strings.Join(parts, "-")))
	if len(readable) > maxSlug {
		readable = strings.TrimRight(readable[:maxSlug], "-")
	}
	sum := sha256.Sum256([]byte(s.Key()))
	return readable + "-" + hex.EncodeToString(sum[:3])
}

// SignaturesOf are the signatures of a run: one per kind of violation it
// reported, with that kind's stages, and the processes and links its
// faults touched (of those that happened, when it is known which did).
func SignaturesOf(specs []Spec, hit []bool, res result.Scenario) []Signature {
	touched, unroutable := touchedBy(specs, hit)
	var out []Signature
	for _, kind := range res.ViolationKinds() {
		out = append(out, Signature{Kind: kind, Stages: stagesOf(res, kind), Touched: touched, Unroutable: unroutable})
	}
	return out
}

// stagesOf are the stages the run's violations of kind reached, in
// pipeline order (a stage the result package does not list, after them).
func stagesOf(res result.Scenario, kind string) []result.Stage {
	var out []result.Stage
	for _, v := range res.UnexpectedViolations() {
		if v.Kind != kind {
			continue
		}
		for st := range v.Stages {
			if !slices.Contains(out, st) {
				out = append(out, st)
			}
		}
	}
	order := result.Stages()
	rank := func(s result.Stage) int {
		if i := slices.Index(order, s); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortFunc(out, func(a, b result.Stage) int { return cmp.Or(rank(a)-rank(b), strings.Compare(string(a), string(b))) })
	return out
}

// touchedBy names the processes and links the faults touched, by role, and
// whether one made the queue unroutable. hit, when it has one entry per
// fault, leaves out the faults that never happened: they touched nothing.
func touchedBy(specs []Spec, hit []bool) (touched []string, unroutable bool) {
	add := func(names ...string) {
		for _, n := range names {
			if n != "" && !slices.Contains(touched, n) {
				touched = append(touched, n)
			}
		}
	}
	for i, s := range specs {
		if len(hit) == len(specs) && !hit[i] {
			continue
		}
		t := s.touches()
		for _, in := range t.Instances {
			add(roleOf(in))
		}
		for _, l := range t.Links {
			add(linkRole(string(l)))
		}
		add(t.Shared...)
		unroutable = unroutable || t.Unroutable
	}
	slices.Sort(touched)
	return touched, unroutable
}

// roleOf is an instance reference's role: "relay-2" → "relay".
func roleOf(ref history.Ref) string {
	if ref == "" {
		return ""
	}
	return ref.Role()
}

// linkRole is a link reference by role: "relay-2.pg" → "relay.pg".
func linkRole(link string) string {
	i := strings.LastIndexByte(link, '.')
	if i <= 0 {
		return link
	}
	return roleOf(history.Ref(link[:i])) + link[i:]
}

// Sigs are the record's signatures: those it was written with, or, for a
// record written before signatures were, one per kind from its faults
// (with no stages).
func (r Record) Sigs() []Signature {
	if len(r.Signatures) > 0 || len(r.Violations) == 0 {
		return r.Signatures
	}
	touched, unroutable := touchedBy(r.Faults, r.Hit)
	out := make([]Signature, len(r.Violations))
	for i, kind := range r.Violations {
		out[i] = Signature{Kind: kind, Touched: touched, Unroutable: unroutable}
	}
	return out
}

// Sig is the finding's signature (its kind alone for a finding written
// before signatures were).
func (f Finding) Sig() Signature {
	if f.Signature.Kind == "" {
		return Signature{Kind: f.Kind}
	}
	return f.Signature
}

// Rate is how often the finding's schedule failed with its signature when
// run again, e.g. "failed 1 of 5"; "" if it was not run again.
func (f Finding) Rate() string {
	if f.Of == 0 {
		return ""
	}
	return fmt.Sprintf("failed %d of %d", f.Failed, f.Of)
}

// Group is the failing runs of one signature, in the order to shrink them.
type Group struct {
	Signature Signature
	Runs      []Record
}

// Failures groups the failing runs by signature (a run with violations of
// two kinds is in two groups). The groups come by kind, then the fewest
// processes and links touched first (a group that touched more is likelier
// the same bug with a fault too many, see explainedBy), then the most runs,
// then by key; within a group, the runs that held up when rechecked come
// first, then the fewest faults, the earliest among equals.
func Failures(runs []Record) []Group {
	byKey := map[string]*Group{}
	var groups []*Group
	for _, r := range runs {
		for _, sig := range r.Sigs() {
			g, ok := byKey[sig.Key()]
			if !ok {
				g = &Group{Signature: sig}
				byKey[sig.Key()] = g
				groups = append(groups, g)
			}
			g.Runs = append(g.Runs, r)
		}
	}
	out := make([]Group, len(groups))
	for i, g := range groups {
		slices.SortStableFunc(g.Runs, func(a, b Record) int {
			return cmp.Or(heldUpFirst(a)-heldUpFirst(b), len(a.Faults)-len(b.Faults), a.Index-b.Index)
		})
		out[i] = *g
	}
	slices.SortFunc(out, func(a, b Group) int {
		return cmp.Or(strings.Compare(a.Signature.Kind, b.Signature.Kind), breadth(a.Signature)-breadth(b.Signature),
			len(b.Runs)-len(a.Runs), strings.Compare(a.Signature.Key(), b.Signature.Key()))
	})
	return out
}

// breadth is how much of the pipeline a signature's faults touched.
func breadth(s Signature) int {
	n := len(s.Touched)
	if s.Unroutable {
		n++
	}
	return n
}

// explainedBy returns the findings that already explain a signature: a
// run that fails with a fault too many (one the shrink of a finding
// dropped) is that finding again, not a bug of its own. A finding explains
// part of sig when it held up (failed every confirming run), is of sig's
// kind, its stages are among sig's, and its minimal schedule touched
// nothing sig's run did not (unroutable counted as touched). sig is
// explained when such findings together cover all its stages (one with no
// stages, when sig has none). Otherwise nil: sig is shrunk on its own.
func explainedBy(sig Signature, findings []Finding) []int {
	var by []int
	var covered []result.Stage
	for i, f := range findings {
		fs := f.Sig()
		if f.Of == 0 || f.Failed != f.Of || fs.Kind != sig.Kind || !subset(fs.Stages, sig.Stages) {
			continue
		}
		touched, unroutable := touchedBy(mustSpecs(f.Minimal.Faults), nil)
		if !subset(touched, sig.Touched) || unroutable && !sig.Unroutable {
			continue
		}
		by = append(by, i)
		covered = append(covered, fs.Stages...)
	}
	if len(by) == 0 || !subset(sig.Stages, covered) {
		return nil
	}
	return by
}

// subset reports whether every element of a is in b.
func subset[T comparable](a, b []T) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// FailsLike reports whether a run failed the way a signature says: as
// FailsSame for its kind, with its violations of that kind reaching at
// least the signature's stages. The shrinker keeps a candidate only if it
// fails like this. It does not ask for the same processes and links
// touched — dropping the faults that touched them is what shrinking is —
// nor for the unroutable queue (a bug that shows without it did not need
// it); and it asks for the signature's stages, not exactly them, so a
// candidate whose extra fault adds a stage is still the same bug (the
// shrink drops that fault next).
func FailsLike(res result.Scenario, faults int, sig Signature) bool {
	return FailsSame(res, faults, sig.Kind) && subset(sig.Stages, stagesOf(res, sig.Kind))
}
