package target

import (
	"fmt"
	"strings"
)

// Problem is one mistake in a target file.
type Problem struct {
	File    string // the path as given to Load or Parse
	Line    int    // 1-based; 0 when the problem has no line of its own
	Field   string // the field's path, e.g. processes[1].ready; empty for the file as a whole
	Message string
}

// Error formats the problem as file:line: field: message.
func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Errors are every problem found in a target file, in line order. Load and
// Parse return them as *Errors.
type Errors []Problem

// Error returns one problem per line.
func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, p := range e {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}
