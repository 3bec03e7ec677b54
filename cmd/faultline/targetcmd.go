package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
)

// cmdInit writes a commented target file for a new pipeline.
func cmdInit(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	name := fs.String("name", "", "the pipeline's name (default: the folder's name)")
	force := fs.Bool("force", false, "overwrite an existing file")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: faultline init [--name NAME] [--force] [PATH]   (PATH default: faultline.yaml)")
		fs.PrintDefaults()
	}
	paths, err := parseInterspersed(fs, args, stderr)
	if err != nil {
		return err
	}
	path := "faultline.yaml"
	switch len(paths) {
	case 0:
	case 1:
		path = paths[0]
	default:
		return usagef("init takes one path, got %d", len(paths))
	}
	if *name == "" {
		abs, err := filepath.Abs(filepath.Dir(path))
		if err != nil {
			return fmt.Errorf("init: %w", err)
		}
		*name = filepath.Base(abs)
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if *force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		return usagef("init: %s exists (use --force to overwrite it)", path)
	}
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if _, err := f.Write(target.Init(*name)); err != nil {
		f.Close()
		return fmt.Errorf("init: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s: fill in your processes' commands, then run: faultline check-target %s\n", path, path)
	return nil
}

// cmdCheckTarget checks a target file: first the file itself (every
// mistake, with its line), then the pipeline it describes, started once on
// fresh infrastructure.
func cmdCheckTarget(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check-target", flag.ContinueOnError)
	infraKind := fs.String("infra", "", "where PostgreSQL and RabbitMQ come from: local, docker, external or auto")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: faultline check-target [--infra KIND] PATH")
		fs.PrintDefaults()
	}
	paths, err := parseInterspersed(fs, args, stderr)
	if err != nil {
		return err
	}
	if len(paths) != 1 {
		return usagef("check-target takes the target file's path")
	}
	t, err := target.Load(paths[0])
	var problems *target.Errors
	if errors.As(err, &problems) {
		for _, p := range *problems {
			fmt.Fprintln(stdout, p.Error())
		}
		fmt.Fprintf(stdout, "%s: %d problem(s) in the file; nothing started\n", paths[0], len(*problems))
		return errViolation
	}
	if err != nil {
		return usageError{err.Error()}
	}
	fmt.Fprintf(stdout, "%s: the file is well formed; starting target %s once on fresh infrastructure\n", t.Path, t.Name)
	cleanup := supervisor.NewCleanup()
	stop := cleanup.OnSignal(nil)
	defer stop()
	defer func() { _ = cleanup.Run(context.WithoutCancel(ctx)) }()
	sh, err := runner.StartShared(ctx, runner.SharedOptions{Log: io.Discard, Infra: *infraKind, Target: t}, cleanup)
	if err != nil {
		fmt.Fprintf(stdout, "%s: %v\n", t.Path, err)
		return errViolation
	}
	held, found := sh.CheckTarget(ctx)
	for _, h := range held {
		fmt.Fprintf(stdout, "  ok    %s\n", h)
	}
	for _, p := range found {
		if p.Line > 0 {
			fmt.Fprintf(stdout, "%s:%d: %s: %s\n", t.Path, p.Line, p.Field, p.Message)
		} else {
			fmt.Fprintf(stdout, "%s: %s: %s\n", t.Path, p.Field, p.Message)
		}
	}
	if len(found) > 0 {
		fmt.Fprintf(stdout, "%s: %d problem(s)\n", t.Path, len(found))
		return errViolation
	}
	fmt.Fprintf(stdout, "%s: target %s checked: every part of the file holds\n", t.Path, t.Name)
	return nil
}
