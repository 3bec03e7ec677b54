package reports

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"

	"github.com/faultline-dev/faultline/harness/result"
)

// unknownTargetFile stands in a reproduce command for the target file of
// a run that did not record it (results written before it was).
const unknownTargetFile = "FILE"

// repeatSuffix is what `faultline run --repeat` adds to a scenario's name
// (NAME.1 … NAME.n): the scenario to run again is NAME.
var repeatSuffix = regexp.MustCompile(`\.[0-9]+$`)

// reproduceCommand is the command that runs one run again: the same
// scenario on the same pipeline (--variant for a broken one) with the
// same seed and target file, flags as `faultline run` takes them.
func reproduceCommand(run result.Run, s result.Scenario) string {
	args := []string{"faultline", "run", shellQuote(repeatSuffix.ReplaceAllString(s.Name, ""))}
	if v := variantOf(s); v != correct {
		args = append(args, "--variant", shellQuote(v))
	}
	args = append(args, "--seed", fmt.Sprint(s.Seed), "--target", shellQuote(cmp.Or(run.TargetFile, unknownTargetFile)))
	return strings.Join(args, " ")
}

// shellSafe are the characters a shell word may hold unquoted.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,-]+$`)

// shellQuote makes s one word for a POSIX shell: as it is when it holds
// nothing a shell reads, else in single quotes.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
