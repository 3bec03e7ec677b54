package target

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
)

// Template is one templated string of the file, with where it came from.
// Placeholders are written in Go text/template syntax: {{amqp}},
// {{postgres "orders"}}, {{random 1 500}}.
type Template struct {
	Raw   string
	Line  int
	Field string // e.g. processes[1].command[3]
}

// IsZero reports whether the template is empty (the file left it out).
func (t Template) IsZero() bool { return t.Raw == "" }

// Values are what faultline hands a process instance.
type Values struct {
	// Postgres returns the URL of a database of the run.
	Postgres func(database string) (string, error)

	AMQP string // broker URL of the run's vhost
	// AMQPURLs are the broker URLs of the run's vhost on every node of a
	// clustered broker, comma-separated, the instance's own node first
	// (AMQP); on one node, AMQP alone.
	AMQPURLs    string
	ControlAddr string // host:port of the instance's /crashpoints endpoints
	HTTPAddr    string // host:port the instance serves its API on
	Instance    string // instance name, e.g. relay-2
	EventLog    string // path of the instance's event log
	Variant     string // the variant under test
	BuildDir    string // folder the build writes into
	TargetDir   string // folder of the target file
	Value       string // a setting's value (settings only)
	// Slot and Publication are the run's names for a logical replication
	// slot and a publication, unique to the run: a relay that tails the
	// write-ahead log streams from that slot (the run's databases take it
	// with them when they are dropped).
	Slot, Publication string
}

// WorkloadValues fill workload templates.
type WorkloadValues struct {
	N      int    // the fact's number, from 0
	ID     string // the fact's id, from the create answer
	Random func(lo, hi int) int
}

// Render fills the template with a process instance's values.
func (t Template) Render(v Values) (string, error) {
	return t.execute(v.funcs())
}

// RenderWorkload fills a workload template.
func (t Template) RenderWorkload(v WorkloadValues) (string, error) {
	return t.execute(v.funcs())
}

// Uses reports whether the template calls the placeholder name (e.g.
// "control_addr").
func (t Template) Uses(name string) bool {
	trees, err := parseTrees(t.name(), t.Raw)
	if err != nil {
		return false
	}
	used := false
	for _, tree := range trees {
		walk(tree.Root, func(n parse.Node) {
			if id, ok := n.(*parse.IdentifierNode); ok && id.Ident == name {
				used = true
			}
		})
	}
	return used
}

func (t Template) name() string {
	if t.Field == "" {
		return "template"
	}
	return t.Field
}

func (t Template) execute(funcs template.FuncMap) (string, error) {
	tmpl, err := template.New(t.name()).Option("missingkey=error").Funcs(funcs).Parse(t.Raw)
	if err != nil {
		return "", fmt.Errorf("%s (line %d): %w", t.name(), t.Line, err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, nil); err != nil {
		return "", fmt.Errorf("%s (line %d): %w", t.name(), t.Line, err)
	}
	return b.String(), nil
}

func (v Values) funcs() template.FuncMap {
	return template.FuncMap{
		"postgres": func(database string) (string, error) {
			if v.Postgres == nil {
				return "", fmt.Errorf("no URL for database %q: no Postgres in the values", database)
			}
			return v.Postgres(database)
		},
		"amqp":         constant(v.AMQP),
		"amqp_urls":    constant(cmp.Or(v.AMQPURLs, v.AMQP)),
		"control_addr": constant(v.ControlAddr),
		"http_addr":    constant(v.HTTPAddr),
		"instance":     constant(v.Instance),
		"event_log":    constant(v.EventLog),
		"variant":      constant(v.Variant),
		"build_dir":    constant(v.BuildDir),
		"target_dir":   constant(v.TargetDir),
		"value":        constant(v.Value),
		"slot":         constant(v.Slot),
		"publication":  constant(v.Publication),
	}
}

func (v WorkloadValues) funcs() template.FuncMap {
	return template.FuncMap{
		"n":  func() int { return v.N },
		"id": constant(v.ID),
		"random": func(lo, hi int) (int, error) {
			if lo > hi {
				return 0, fmt.Errorf("random %d %d: the low end is above the high end", lo, hi)
			}
			if v.Random == nil {
				return 0, errors.New("no Random in the workload values")
			}
			return v.Random(lo, hi), nil
		},
	}
}

func constant(s string) func() string { return func() string { return s } }

// scope is where a template sits, which decides its placeholders.
type scope int

const (
	scopeProcess scope = iota // process command, env, control, ready, http; variants' env
	scopeSetting              // settings: the process placeholders and value
	scopeBuild                // build
	scopeSchema               // schema commands
	scopeCreate               // workload.create
	scopeStep                 // workload.steps
)

// placeholders returns the names a template in the scope may call, sorted.
func (s scope) placeholders() []string {
	switch s {
	case scopeProcess:
		return []string{"amqp", "amqp_urls", "build_dir", "control_addr", "event_log", "http_addr", "instance", "postgres", "publication", "slot", "target_dir", "variant"}
	case scopeSetting:
		return []string{"amqp", "amqp_urls", "build_dir", "control_addr", "event_log", "http_addr", "instance", "postgres", "publication", "slot", "target_dir", "value", "variant"}
	case scopeBuild:
		return []string{"build_dir", "target_dir"}
	case scopeSchema:
		return []string{"amqp", "build_dir", "postgres", "publication", "slot", "target_dir", "variant"}
	case scopeCreate:
		return []string{"n", "random"}
	case scopeStep:
		return []string{"id", "n", "random"}
	}
	return nil
}

func (s scope) String() string {
	switch s {
	case scopeProcess:
		return "a process"
	case scopeSetting:
		return "a setting"
	case scopeBuild:
		return "build"
	case scopeSchema:
		return "schema commands"
	case scopeCreate:
		return "workload.create"
	case scopeStep:
		return "workload steps"
	}
	return "this template"
}

// placeholderElsewhere reports whether name is a placeholder of some scope.
func placeholderElsewhere(name string) bool {
	for _, s := range []scope{scopeSetting, scopeSchema, scopeStep} {
		for _, p := range s.placeholders() {
			if p == name {
				return true
			}
		}
	}
	return false
}

// builtin reports whether name is one of text/template's own functions,
// which every template may call.
func builtin(name string) bool {
	switch name {
	case "and", "call", "html", "index", "slice", "js", "len", "not", "or",
		"print", "printf", "println", "urlquery", "eq", "ge", "gt", "le", "lt", "ne":
		return true
	}
	return false
}

// parseTrees parses a template without knowing its functions, so that the
// caller can name every unknown one.
func parseTrees(name, raw string) (map[string]*parse.Tree, error) {
	tree := parse.New(name)
	tree.Mode = parse.SkipFuncCheck
	trees := map[string]*parse.Tree{}
	if _, err := tree.Parse(raw, "", "", trees); err != nil {
		return nil, err
	}
	return trees, nil
}

// walk calls visit on n and every node under it.
func walk(n parse.Node, visit func(parse.Node)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		visit(n)
		for _, c := range n.Nodes {
			walk(c, visit)
		}
	case *parse.PipeNode:
		if n == nil {
			return
		}
		visit(n)
		for _, c := range n.Decl {
			walk(c, visit)
		}
		for _, c := range n.Cmds {
			walk(c, visit)
		}
	case *parse.ActionNode:
		visit(n)
		walk(n.Pipe, visit)
	case *parse.CommandNode:
		visit(n)
		for _, c := range n.Args {
			walk(c, visit)
		}
	case *parse.ChainNode:
		visit(n)
		walk(n.Node, visit)
	case *parse.IfNode:
		visit(n)
		walkBranch(&n.BranchNode, visit)
	case *parse.RangeNode:
		visit(n)
		walkBranch(&n.BranchNode, visit)
	case *parse.WithNode:
		visit(n)
		walkBranch(&n.BranchNode, visit)
	case *parse.TemplateNode:
		visit(n)
		walk(n.Pipe, visit)
	case nil:
	default:
		visit(n)
	}
}

func walkBranch(b *parse.BranchNode, visit func(parse.Node)) {
	walk(b.Pipe, visit)
	walk(b.List, visit)
	walk(b.ElseList, visit)
}
