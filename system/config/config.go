// Package config gives the pipeline programs flags with environment
// fallbacks: every flag --name can also be set as PREFIX_NAME (upper case,
// dashes as underscores). A flag on the command line wins over the
// environment; a bad value in either is a clear error naming where it came from.
package config

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Parse defines nothing itself: call it after defining fs's flags. It applies
// environment fallbacks for flags not given on the command line, then parses
// args. --help prints usage (with each flag's environment variable) and
// returns flag.ErrHelp.
func Parse(fs *flag.FlagSet, prefix string, args []string) error {
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "usage: %s [flags]\n\nEvery flag can also be set in the environment as %s_<FLAG> (upper case, - as _).\n\n", fs.Name(), prefix)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags only; see --help)", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		env := EnvName(prefix, f.Name)
		v, ok := os.LookupEnv(env)
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("environment %s=%q: %w", env, v, err))
		}
	})
	return errors.Join(errs...)
}

// EnvName is the environment variable for a flag.
func EnvName(prefix, flagName string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Main runs a program's parse step and exits with status 2 and a clear
// message on a bad flag or value, 0 on --help.
func Main(fs *flag.FlagSet, prefix string, args []string, stderr io.Writer) {
	fs.SetOutput(stderr)
	if err := Parse(fs, prefix, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		os.Exit(2)
	}
}

// RunMain is a pipeline program's main: parse the flags (exit 2 on a bad
// flag or value), validate (exit 2), then run until SIGINT or SIGTERM
// (exit 1 if run fails).
func RunMain(fs *flag.FlagSet, prefix string, validate func() error, run func(context.Context) error) {
	Main(fs, prefix, os.Args[1:], os.Stderr)
	if err := validate(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", fs.Name(), err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", fs.Name(), err)
		stop()
		os.Exit(1)
	}
}
