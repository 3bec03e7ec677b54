package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// errHelp: a command's help was asked for and shown (exit 0).
var errHelp = errors.New("help shown")

// newFlagSet is the flag set of the command name, whose help (--help, -h,
// faultline help NAME) is its synopsis, its summary and its flags.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		c, _ := commandOf(name)
		fmt.Fprintf(fs.Output(), "usage: %s\n\n%s\n", strings.TrimSpace("faultline "+name+" "+c.synopsis), c.summary)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parse parses a command's flags. Help goes to stdout (errHelp, exit 0);
// a bad flag is a usage error of one line, said once (the flag package
// itself prints nothing).
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return errHelp
	}
	if err != nil {
		return usagef("%s: %s", fs.Name(), strings.TrimSpace(err.Error()))
	}
	return nil
}

// parseInterspersed parses flags placed before, between or after the
// positional arguments (`faultline run NAME --seed 3`) and returns the
// positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string, stdout io.Writer) ([]string, error) {
	var positional []string
	for {
		if err := parse(fs, args, stdout); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}
