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
