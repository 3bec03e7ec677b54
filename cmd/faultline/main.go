// Command faultline runs the failure-window scenarios against a pipeline
// described by its target file (found as docs/cli.md says: --target,
// $FAULTLINE_TARGET, ./faultline.yaml, the nearest one up to the
// repository's root, the reference pipeline in faultline's own tree):
// `list` what there is, `run` scenarios, `gate`
// the whole catalogue on the correct pipeline and on every broken variant,
// `init` a target file for a new pipeline, `check-target` one. It is one
// binary: it starts itself again as the Toxiproxy server (package
// proxies/toxiserver) and needs no Go toolchain at run time.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/redact"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/version"
)

// Exit statuses, the same for every command (docs/cli.md).
const (
	// exitOK: everything held (or help, version, a listing).
	exitOK = 0
	// exitViolation: a violation was found, a variant was not caught, or
	// check-target found the pipeline not as its file says.
	exitViolation = 1
	// exitUsage: bad usage (an unknown command or flag, a bad value) or a
	// bad target file (none found, or one that fails to parse or
	// validate). Nothing ran.
	exitUsage = 2
	// exitNoVerdict: no verdict on the pipeline: runs stayed indeterminate
	// through their retries, or an infrastructure error (a service that
	// would not start, a build that failed, a report not written).
	exitNoVerdict = 3
	// exitInterrupted: SIGINT or SIGTERM cut the work short.
	exitInterrupted = supervisor.ExitInterrupted
)

// usageError is a bad command line or a bad target file: exit 2. Its
// message is one line; the hint to the command's help follows it unless
// noHint (a target file's problems say themselves what to fix).
type usageError struct {
	msg    string
	noHint bool
}

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{msg: fmt.Sprintf(format, args...)} }

// targetErrorf is a bad target file, or none found: exit 2, no hint.
func targetErrorf(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...), noHint: true}
}

// errViolation: the run found a violation (or the gate a missed variant).
var errViolation = errors.New("violation")

// errIndeterminate: runs ended without a verdict on the pipeline, through
// their retries (exit 3).
var errIndeterminate = errors.New("indeterminate")

// errInterrupted: SIGINT or SIGTERM cut the work short (exit 130).
var errInterrupted = errors.New("interrupted")

// errBadTarget: check-target found the file malformed and listed its
// problems itself (exit 2).
var errBadTarget = errors.New("bad target file")

// command is one of faultline's commands, as the usage and its help name it.
type command struct {
	name     string
	synopsis string // after "faultline NAME"
	summary  string
}

// commands are faultline's commands, in the order the usage lists them.
func commands() []command {
	return []command{
		{"list", "[--target PATH] [--format text|json]", "windows the target offers, the scenarios and how each runs on it, its variants"},
		{"run", "[flags] SCENARIO... | --all", "run scenarios (--all for every one of the default profile)"},
		{"gate", "[flags]", "every scenario on the correct pipeline, and the catching scenarios on every variant"},
		{"init", "[--protocol] [--name NAME] [--force] [PATH]", "write a commented target file for a new pipeline (default ./faultline.yaml; black-box form unless --protocol)"},
		{"check-target", "[--infra KIND] [--target PATH | PATH]", "check a target file, then start its pipeline once and check every part of it"},
		{"explore", "[flags]", "every fault the target offers, alone then combined, until --budget; coverage per window, failures shrunk to schedule files"},
		{"merge", "[--out DIR] DIR...", "merge the explore.json of explore --shard i/n runs into one report"},
		{"bench", "[flags]", "throughput of the reference's relay, consumer and pipeline against their baselines (bench.json)"},
		{"version", "", "print faultline's version (also: faultline --version)"},
		{"help", "[COMMAND]", "print this help, or a command's"},
	}
}

// commandOf is the command named name.
func commandOf(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usage is the global help.
func usage() string {
	var b strings.Builder
	b.WriteString("faultline: attack the reliability boundaries of an outbox → RabbitMQ → inbox pipeline\n\nusage:\n")
	w := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %s\t%s\n", strings.TrimSpace("faultline "+c.name+" "+c.synopsis), c.summary)
	}
	_ = w.Flush()
	b.WriteString(`
target file (list, run, gate, explore, check-target): --target PATH, else $FAULTLINE_TARGET,
else ./faultline.yaml, else the nearest faultline.yaml in a folder above, up to the repository's
root (the first folder holding .git); inside faultline's own source tree, the reference pipeline
(system/faultline.yaml). bench takes only the reference's file.

run 'faultline help COMMAND' (or faultline COMMAND --help) for a command's flags.
exit status: 0 all held, 1 a violation (or a variant not caught), 2 bad usage or a bad target file,
3 no verdict (runs indeterminate through their retries, an infrastructure error), 130 interrupted.
`)
	return b.String()
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return exitUsage
	}
	name := args[0]
	var err error
	switch name {
	case "list":
		err = cmdList(args[1:], stdout)
	case "run":
		err = cmdRun(ctx, args[1:], stdout, stderr)
	case "gate":
		err = cmdGate(ctx, args[1:], stdout, stderr)
	case "bench":
		err = cmdBench(ctx, args[1:], stdout, stderr)
	case "init":
		err = cmdInit(args[1:], stdout)
	case "check-target":
		err = cmdCheckTarget(ctx, args[1:], stdout)
	case "explore":
		err = cmdExplore(ctx, args[1:], stdout, stderr)
	case "merge":
		err = cmdMerge(args[1:], stdout)
	case "version", "--version", "-version":
		err = cmdVersion(args[1:], stdout)
		name = "version"
	case "help", "-h", "-help", "--help":
		switch {
		case len(args) == 1:
			fmt.Fprint(stdout, usage())
			return exitOK
		case len(args) > 2:
			err = usagef("help takes one command, got %d", len(args)-1)
		case args[1] == "help":
			fmt.Fprint(stdout, usage())
			return exitOK
		default:
			// A command's help is its --help, which every command answers
			// before it does anything else.
			if _, ok := commandOf(args[1]); !ok {
				err = usageError{msg: fmt.Sprintf("unknown command %q", args[1])}
				name = ""
				break
			}
			return run(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
	default:
		err = usageError{msg: fmt.Sprintf("unknown command %q", name)}
		name = ""
	}
	return exitStatus(err, name, stderr)
}

// exitStatus reports err on stderr (once) and maps it to the exit status
// of the contract.
func exitStatus(err error, name string, stderr io.Writer) int {
	// An error can quote a URL, the external provider's real ones among
	// them (FAULTLINE_PG_URL ...): its passwords never reach the terminal.
	red := redact.New(infra.EnvSecrets(nil)...)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.Is(err, errInterrupted):
		if err != errInterrupted {
			fmt.Fprintf(stderr, "faultline: %s\n", red.String(err.Error()))
		} else {
			fmt.Fprintln(stderr, "faultline: interrupted")
		}
		return exitInterrupted
	case errors.Is(err, errViolation):
		return exitViolation
	case errors.Is(err, errBadTarget):
		return exitUsage
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "faultline: %s\n", red.String(ue.msg))
		switch {
		case ue.noHint:
		case name == "":
			fmt.Fprintln(stderr, "run 'faultline help' for the commands")
		default:
			fmt.Fprintf(stderr, "run 'faultline help %s' for its usage\n", name)
		}
		return exitUsage
	case errors.Is(err, errIndeterminate):
		if err != errIndeterminate {
			fmt.Fprintf(stderr, "faultline: %s\n", red.String(err.Error()))
		}
		return exitNoVerdict
	default:
		fmt.Fprintf(stderr, "faultline: %s\n", red.String(err.Error()))
		return exitNoVerdict
	}
}

// cmdVersion prints faultline's version.
func cmdVersion(args []string, stdout io.Writer) error {
	fs := newFlagSet("version")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("version takes no arguments, got %q", fs.Arg(0))
	}
	fmt.Fprintf(stdout, "faultline %s\n", version.String())
	return nil
}
