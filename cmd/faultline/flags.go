package main

import (
	"errors"
	"flag"
	"io"
	"strings"
)

var errHelp = errors.New("help shown")

// parse parses a command's flags; a bad flag is a usage error.
func parse(fs *flag.FlagSet, args []string, out io.Writer) error {
	fs.SetOutput(out)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return errHelp
	}
	if err != nil {
		return usageError{strings.TrimSpace(err.Error())}
	}
	return nil
}

// parseInterspersed parses flags placed before, between or after the
// positional arguments (`faultline run NAME --seed 3`) and returns the
// positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string, out io.Writer) ([]string, error) {
	var positional []string
	for {
		if err := parse(fs, args, out); err != nil {
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
