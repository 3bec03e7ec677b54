package target

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/faultline-dev/faultline/protocol"
	"go.yaml.in/yaml/v3"
)

// decoder walks the YAML tree of a target file, collecting every problem
// rather than stopping at the first.
type decoder struct {
	file     string // path as given, for problems
	dir      string // absolute folder of the file
	problems Errors

	// databases are the declared database names; nil when the list is
	// missing or broken, so that postgres "name" goes unchecked rather
	// than failing everywhere.
	databases map[string]bool
	dbList    []string // declared names in file order
}

func (d *decoder) problem(line int, field, format string, args ...any) {
	d.problems = append(d.problems, Problem{File: d.file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

// val is one value of the file: its node, the line to report it at (its
// key's line in a mapping, its own in a list) and its field path.
type val struct {
	n     *yaml.Node
	line  int
	field string
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "something else"
}

func join(parent, key string) string {
	if strings.ContainsAny(key, ". []") {
		key = "[" + strconv.Quote(key) + "]"
		return parent + key
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// mapping is a YAML mapping with its keys checked.
type mapping struct {
	v    val
	keys []string // in file order
	vals map[string]val
	// suggested are the known keys an unknown key was taken for (a
	// misspelling): they are not reported missing as well.
	suggested map[string]bool
}

// mapping reads v as a mapping. With known keys, any other key is a
// problem; with none, any key goes (env, crashpoints, ...).
func (d *decoder) mapping(v val, known ...string) (*mapping, bool) {
	n := resolve(v.n)
	if n.Kind != yaml.MappingNode {
		d.problem(v.line, v.field, "want a mapping (key: value), got %s", describe(n))
		return nil, false
	}
	if pairs := len(n.Content) / 2; pairs > maxItems {
		d.problem(v.line, v.field, "%d keys: at most %d", pairs, maxItems)
		return nil, false
	}
	m := &mapping{v: v, vals: map[string]val{}, suggested: map[string]bool{}}
	d.addPairs(m, n, known, false)
	return m, true
}

func (d *decoder) addPairs(m *mapping, n *yaml.Node, known []string, merged bool) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, value := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" {
			switch src := resolve(value); src.Kind {
			case yaml.MappingNode:
				merges = append(merges, src)
			case yaml.SequenceNode:
				for _, item := range src.Content {
					if item = resolve(item); item.Kind == yaml.MappingNode {
						merges = append(merges, item)
					}
				}
			}
			continue
		}
		if rk := resolve(k); rk.Kind != yaml.ScalarNode {
			d.problem(k.Line, m.v.field, "a key must be a plain string, got %s", describe(rk))
			continue
		}
		name := resolve(k).Value
		field := join(m.v.field, name)
		if prev, ok := m.vals[name]; ok {
			if !merged {
				d.problem(k.Line, field, "given twice (first at line %d)", prev.line)
			}
			continue
		}
		if known != nil && !slices.Contains(known, name) {
			if merged {
				continue
			}
			if s := suggest(name, known); s != "" {
				m.suggested[s] = true
				d.problem(k.Line, field, "unknown field (did you mean %s?)", s)
			} else {
				d.problem(k.Line, field, "unknown field (known: %s)", strings.Join(known, ", "))
			}
			continue
		}
		m.keys = append(m.keys, name)
		m.vals[name] = val{n: value, line: k.Line, field: field}
	}
	for _, src := range merges {
		d.addPairs(m, src, known, true)
	}
}

func (m *mapping) get(key string) (val, bool) {
	v, ok := m.vals[key]
	return v, ok
}

// require returns the value of key, or reports it missing. why, when
// given, says what the field is for.
func (d *decoder) require(m *mapping, key, why string) (val, bool) {
	if v, ok := m.vals[key]; ok {
		return v, true
	}
	if !m.suggested[key] {
		msg := "required"
		if why != "" {
			msg += ": " + why
		}
		d.problem(m.v.line, join(m.v.field, key), "%s", msg)
	}
	return val{}, false
}

// seq reads v as a list.
func (d *decoder) seq(v val) ([]val, bool) {
	n := resolve(v.n)
	if n.Kind != yaml.SequenceNode {
		d.problem(v.line, v.field, "want a list, got %s", describe(n))
		return nil, false
	}
	if len(n.Content) > maxItems {
		d.problem(v.line, v.field, "%d items: at most %d", len(n.Content), maxItems)
		return nil, false
	}
	items := make([]val, len(n.Content))
	for i, item := range n.Content {
		items[i] = val{n: item, line: item.Line, field: fmt.Sprintf("%s[%d]", v.field, i)}
	}
	return items, true
}

// str reads a scalar as a string; an empty value (key:) is "".
func (d *decoder) str(v val) (string, bool) {
	n := resolve(v.n)
	if n.Kind != yaml.ScalarNode {
		d.problem(v.line, v.field, "want a string, got %s", describe(n))
		return "", false
	}
	if n.Tag == "!!null" {
		return "", true
	}
	return n.Value, true
}

// nonEmpty reads a string that must not be empty.
func (d *decoder) nonEmpty(v val) (string, bool) {
	s, ok := d.str(v)
	if ok && s == "" {
		d.problem(v.line, v.field, "must not be empty")
		return "", false
	}
	return s, ok
}

// matching reads a string that must match re; what describes re.
func (d *decoder) matching(v val, re *regexp.Regexp, what string) (string, bool) {
	s, ok := d.nonEmpty(v)
	if ok && !re.MatchString(s) {
		d.problem(v.line, v.field, "%q is not %s", s, what)
		return "", false
	}
	return s, ok
}

// oneOf reads a string that must be one of choices; what names them.
func (d *decoder) oneOf(v val, what string, choices []string) (string, bool) {
	s, ok := d.nonEmpty(v)
	if ok && !slices.Contains(choices, s) {
		msg := fmt.Sprintf("%q is not %s (%s)", s, article(what), strings.Join(choices, ", "))
		if sg := suggest(s, choices); sg != "" {
			msg = fmt.Sprintf("%q is not %s (did you mean %s? %ss: %s)", s, article(what), sg, what, strings.Join(choices, ", "))
		}
		d.problem(v.line, v.field, "%s", msg)
		return "", false
	}
	return s, ok
}

func article(what string) string {
	if strings.ContainsRune("aeiou", rune(what[0])) {
		return "an " + what
	}
	return "a " + what
}

func (d *decoder) integer(v val) (int, bool) {
	n := resolve(v.n)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		d.problem(v.line, v.field, "want a whole number, got %s", describe(n))
		return 0, false
	}
	var i int
	if err := n.Decode(&i); err != nil {
		d.problem(v.line, v.field, "want a whole number, got %s", describe(n))
		return 0, false
	}
	return i, true
}

func (d *decoder) boolean(v val) (bool, bool) {
	n := resolve(v.n)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		d.problem(v.line, v.field, "want true or false, got %s", describe(n))
		return false, false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		d.problem(v.line, v.field, "want true or false, got %s", describe(n))
		return false, false
	}
	return b, true
}

// duration reads a positive Go duration (500ms, 3s, 10m).
func (d *decoder) duration(v val) (time.Duration, bool) {
	n := resolve(v.n)
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		d.problem(v.line, v.field, "bad duration %s: give a unit (e.g. %ss)", n.Value, n.Value)
		return 0, false
	}
	s, ok := d.nonEmpty(v)
	if !ok {
		return 0, false
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.problem(v.line, v.field, "bad duration %q (want e.g. 500ms, 3s, 10m)", s)
		return 0, false
	}
	if dur <= 0 {
		d.problem(v.line, v.field, "bad duration %q: must be above zero", s)
		return 0, false
	}
	if dur > maxDuration {
		d.problem(v.line, v.field, "bad duration %q: at most %s", s, maxDuration)
		return 0, false
	}
	return dur, true
}

// optDuration reads key of m as a duration, def when absent.
func (d *decoder) optDuration(m *mapping, key string, def time.Duration) time.Duration {
	v, ok := m.get(key)
	if !ok {
		return def
	}
	dur, ok := d.duration(v)
	if !ok {
		return def
	}
	return dur
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// env reads an environment mapping, in file order; each value a template.
func (d *decoder) env(v val, s scope) []EnvVar {
	m, ok := d.mapping(v)
	if !ok {
		return nil
	}
	var vars []EnvVar
	for _, name := range m.keys {
		ev := m.vals[name]
		if !envName.MatchString(name) {
			d.problem(ev.line, ev.field, "%q is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", name)
			continue
		}
		if name == protocol.EnvCrashPoints {
			d.problem(ev.line, ev.field, "set by faultline itself, to arm crash points")
			continue
		}
		t, ok := d.template(ev, s)
		if !ok {
			continue
		}
		vars = append(vars, EnvVar{Name: name, Value: t})
	}
	return vars
}

// args reads a non-empty list of templates (a command line).
func (d *decoder) args(v val, s scope) []Template {
	n := resolve(v.n)
	if n.Kind == yaml.ScalarNode {
		d.problem(v.line, v.field, "want a list of arguments, e.g. [./bin/relay, --db-url={{postgres \"orders\"}}], got %s", describe(n))
		return nil
	}
	items, ok := d.seq(v)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.problem(v.line, v.field, "must not be empty")
		return nil
	}
	args := make([]Template, 0, len(items))
	for _, item := range items {
		if t, ok := d.template(item, s); ok {
			args = append(args, t)
		}
	}
	return args
}

// template reads a templated string and checks it for its scope.
func (d *decoder) template(v val, s scope) (Template, bool) {
	raw, ok := d.str(v)
	if !ok {
		return Template{}, false
	}
	t := Template{Raw: raw, Line: v.line, Field: v.field}
	return t, d.checkTemplate(t, resolve(v.n), s)
}

// checkTemplate parses t, names every placeholder that is not one of its
// scope's, and executes it once with stand-in values, so that postgres
// "nope" is found at load rather than at run time.
func (d *decoder) checkTemplate(t Template, n *yaml.Node, s scope) bool {
	before := len(d.problems)
	literal := n.Style&(yaml.LiteralStyle) != 0
	// lineAt is the file line of a line of the template.
	lineAt := func(tline int) int {
		if !literal || tline < 1 {
			return t.Line
		}
		return n.Line + tline
	}
	trees, err := parseTrees(t.Field, t.Raw)
	if err != nil {
		tline, msg := templateError(t.Field, err)
		d.problem(lineAt(tline), t.Field, "bad template: %s", msg)
		return false
	}
	known := s.placeholders()
	for _, name := range slices.Sorted(maps.Keys(trees)) {
		walk(trees[name].Root, func(node parse.Node) {
			pos := int(node.Position())
			tline := 1 + strings.Count(t.Raw[:min(pos, len(t.Raw))], "\n")
			switch node := node.(type) {
			case *parse.IdentifierNode:
				if !builtin(node.Ident) && !slices.Contains(known, node.Ident) {
					d.problem(lineAt(tline), t.Field, "%s", unknownPlaceholder(node.Ident, s))
				}
			case *parse.FieldNode:
				d.problem(lineAt(tline), t.Field, "%q is not a placeholder: write {{%s}}, without the dot", node.String(), strings.Join(node.Ident, "."))
			case *parse.DotNode:
				d.problem(lineAt(tline), t.Field, "{{.}} is not a placeholder (known: %s)", strings.Join(known, ", "))
			}
		})
	}
	if len(d.problems) > before {
		return false
	}

	var funcs template.FuncMap
	switch s {
	case scopeCreate, scopeStep:
		funcs = WorkloadValues{ID: "id", Random: func(lo, _ int) int { return lo }}.funcs()
	default:
		funcs = d.standIns().funcs()
	}
	tmpl, err := template.New(t.Field).Option("missingkey=error").Funcs(funcs).Parse(t.Raw)
	if err == nil {
		err = tmpl.Execute(io.Discard, nil)
	}
	if err != nil {
		tline, msg := templateError(t.Field, err)
		var unknown *unknownDatabaseError
		if errors.As(err, &unknown) {
			d.problem(lineAt(tline), t.Field, "%s", unknown.Error())
		} else {
			d.problem(lineAt(tline), t.Field, "bad template: %s", msg)
		}
		return false
	}
	return true
}

// render fills a template that checked out with the stand-in values (to
// check the shape of what it renders to).
func (d *decoder) render(t Template) (string, bool) {
	s, err := t.Render(d.standIns())
	return s, err == nil
}

// standIns are the values a template is tried with at load.
func (d *decoder) standIns() Values {
	return Values{
		Postgres: func(database string) (string, error) {
			if d.databases != nil && !d.databases[database] {
				return "", &unknownDatabaseError{database: database, declared: d.dbList}
			}
			return "postgres://faultline@127.0.0.1:5432/" + database, nil
		},
		AMQP:        "amqp://faultline:faultline@127.0.0.1:5672/run",
		ControlAddr: "127.0.0.1:7001",
		HTTPAddr:    "127.0.0.1:7002",
		Instance:    "instance-1",
		EventLog:    "/tmp/faultline/events.jsonl",
		Variant:     "correct",
		BuildDir:    "/tmp/faultline/build",
		TargetDir:   d.dir,
		Value:       "1",
	}
}

type unknownDatabaseError struct {
	database string
	declared []string
}

func (e *unknownDatabaseError) Error() string {
	return fmt.Sprintf("unknown database %q (databases: %s)", e.database, strings.Join(e.declared, ", "))
}

func unknownPlaceholder(name string, s scope) string {
	known := s.placeholders()
	switch {
	case s == scopeCreate && name == "id":
		return "{{id}} is not available in workload.create: the id comes from create's answer (use it in steps)"
	case placeholderElsewhere(name):
		return fmt.Sprintf("placeholder %q is not available in %s (available: %s)", name, s, strings.Join(known, ", "))
	}
	if sg := suggest(name, known); sg != "" {
		return fmt.Sprintf("unknown placeholder %q (did you mean %s?)", name, sg)
	}
	return fmt.Sprintf("unknown placeholder %q (known: %s)", name, strings.Join(known, ", "))
}

// templateError splits a text/template error into the template's line
// and the message without the template's name.
func templateError(name string, err error) (int, string) {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "template: "+name+":")
	if !ok {
		return 0, msg
	}
	num, after, ok := strings.Cut(rest, ":")
	line, convErr := strconv.Atoi(num)
	if !ok || convErr != nil {
		return 0, msg
	}
	// executing errors carry a column too.
	if col, after2, ok := strings.Cut(after, ":"); ok {
		if _, err := strconv.Atoi(col); err == nil {
			after = after2
		}
	}
	after = strings.TrimSpace(after)
	after = strings.TrimPrefix(after, "executing "+strconv.Quote(name)+" at ")
	return line, after
}

// suggest returns the choice closest to word, if one is close enough to
// be a misspelling.
func suggest(word string, choices []string) string {
	best, bestDist := "", 0
	for _, c := range choices {
		dist := editDistance(word, c)
		limit := max(1, min(3, len(c)/3))
		if dist <= limit && (best == "" || dist < bestDist) {
			best, bestDist = c, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
