// Command faultline runs the failure-window scenarios against a pipeline
// described by its target file (default: the reference pipeline, from the
// root of the source tree): `list` what there is, `run` scenarios, `gate`
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

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/redact"
	"github.com/faultline-dev/faultline/harness/supervisor"
)

// exit codes
const (
	exitOK        = 0
	exitViolation = 1
	// exitUsage: bad usage, or no verdict (indeterminate runs, an
	// infrastructure error): either way nothing was shown.
	exitUsage       = 2
	exitInterrupted = supervisor.ExitInterrupted
)

// usageError is a bad command line: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// errViolation: the run found a violation (or the gate a missed variant).
var errViolation = errors.New("violation")

// errIndeterminate: runs ended without a verdict on the pipeline, through
// their retries (exit 2).
var errIndeterminate = errors.New("indeterminate")

// errInterrupted: SIGINT or SIGTERM cut the work short (exit 130).
var errInterrupted = errors.New("interrupted")

const usage = `faultline: attack the reliability boundaries of an outbox → RabbitMQ → inbox pipeline

usage:
  faultline list [--target PATH]       windows the target offers, scenarios and its variants
  faultline run [flags] SCENARIO...    run scenarios (--all for every one)
  faultline gate [flags]               every scenario on the correct pipeline, and the catching scenarios on every variant
  faultline init [PATH]                write a commented target file for a new pipeline (default faultline.yaml)
  faultline check-target PATH          check a target file, then start its pipeline once and check every part of it
  faultline bench [flags]              throughput of the reference's relay, consumer and pipeline against their baselines (bench.json)
  faultline explore [flags]            every fault the target offers, alone then combined, until --budget; coverage per window, failures shrunk to schedule files
  faultline merge [--out DIR] DIR...   merge the explore.json of explore --shard i/n runs into one report

--target PATH (run, gate, list, explore, bench): the pipeline's target file, relative to the current
folder; default $FAULTLINE_TARGET (not for bench), else the reference pipeline, system/faultline.yaml
in the current folder (the root of faultline's source tree).

run 'faultline COMMAND --help' for a command's flags.
exit status: 0 all held, 1 a violation (or a variant not caught), 2 no verdict (a run stayed
indeterminate through its retries, an infrastructure error) or bad usage, 130 interrupted (SIGINT, SIGTERM).
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "list":
		err = cmdList(args[1:], stdout)
	case "run":
		err = cmdRun(ctx, args[1:], stdout, stderr)
	case "gate":
		err = cmdGate(ctx, args[1:], stdout, stderr)
	case "bench":
		err = cmdBench(ctx, args[1:], stdout, stderr)
	case "init":
		err = cmdInit(args[1:], stdout, stderr)
	case "check-target":
		err = cmdCheckTarget(ctx, args[1:], stdout, stderr)
	case "explore":
		err = cmdExplore(ctx, args[1:], stdout, stderr)
	case "merge":
		err = cmdMerge(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		err = usagef("unknown command %q (want list, run, gate, init, check-target, bench, explore or merge)", args[0])
	}
	// An error can quote a URL, the external provider's real ones among
	// them (FAULTLINE_PG_URL ...): its passwords never reach the terminal.
	red := redact.New(infra.EnvSecrets(nil)...)
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errInterrupted):
		fmt.Fprintln(stderr, "faultline: interrupted")
		return exitInterrupted
	case errors.Is(err, errViolation):
		return exitViolation
	case errors.Is(err, errIndeterminate):
		if err != errIndeterminate {
			fmt.Fprintf(stderr, "faultline: %s\n", red.String(err.Error()))
		}
		return exitUsage
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "faultline: %s\n", red.String(ue.msg))
		return exitUsage
	case errors.Is(err, errHelp):
		return exitOK
	default:
		fmt.Fprintf(stderr, "faultline: %s\n", red.String(err.Error()))
		return exitUsage
	}
}
