package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/supervisor"
	"github.com/faultline-dev/faultline/harness/target"
)

// cmdInit writes a commented target file for a new pipeline: the
// black-box form (what faultline sees from outside), or with --protocol the
// full one (crash points, event log, control endpoints).
func cmdInit(args []string, stdout io.Writer) error {
	fs := newFlagSet("init")
	name := fs.String("name", "", "the pipeline's name (default: the folder's name)")
	force := fs.Bool("force", false, "overwrite an existing file")
	protocol := fs.Bool("protocol", false, "write the full form, for a pipeline that speaks faultline's protocol: crash points, event log, control endpoints, settings and variants (default: the black-box form, those sections as comments)")
	paths, err := parseInterspersed(fs, args, stdout)
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
	data := target.Init(*name)
	if *protocol {
		data = target.InitProtocol(*name)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("init: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	next := "faultline check-target"
	if path != targetFileName {
		next += " " + path
	}
	fmt.Fprintf(stdout, "wrote %s: fill in your processes' commands, then run: %s\n", path, next)
	return nil
}

// cmdCheckTarget checks a target file (PATH, or the one found as for
// every command): first the file itself (every mistake, with its line;
// exit 2 if any), then the pipeline it describes, started once on fresh
// infrastructure (exit 1 for each part not as the file says, 3 if it could
// not be started).
func cmdCheckTarget(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("check-target")
	infraKind := fs.String("infra", "", "where PostgreSQL and RabbitMQ come from: local, docker, external or auto (default: $FAULTLINE_INFRA, else auto)")
	flagPath := fs.String("target", "", "the target file to check (the same as PATH; default: $FAULTLINE_TARGET, else ./faultline.yaml, else the nearest faultline.yaml up to the repository's root)")
	paths, err := parseInterspersed(fs, args, stdout)
	if err != nil {
		return err
	}
	if *infraKind != "" && !slices.Contains(infra.Kinds(), *infraKind) {
		return usagef("--infra %q: want one of %s", *infraKind, strings.Join(infra.Kinds(), ", "))
	}
	if *flagPath != "" {
		if len(paths) > 0 {
			return usagef("check-target takes its target file once: --target %s and %s", *flagPath, strings.Join(paths, " "))
		}
		paths = []string{*flagPath}
	}
	var path string
	switch len(paths) {
	case 0:
		dir, err := cwd()
		if err != nil {
			return err
		}
		if path, err = findTarget(dir, os.Getenv("FAULTLINE_TARGET")); err != nil {
			return err
		}
	case 1:
		path = paths[0]
	default:
		return usagef("check-target takes one target file, got %d", len(paths))
	}
	t, err := target.Load(path)
	var problems *target.Errors
	if errors.As(err, &problems) {
		for _, p := range *problems {
			fmt.Fprintln(stdout, p.Error())
		}
		fmt.Fprintf(stdout, "%s: %d problem(s) in the file; nothing started\n", path, len(*problems))
		return errBadTarget
	}
	if err != nil {
		return targetErrorf("%v", err)
	}
	fmt.Fprintf(stdout, "%s: the file is well formed; starting target %s once on fresh infrastructure\n", t.Path, t.Name)
	cleanup := supervisor.NewCleanup()
	stop := cleanup.OnSignal(nil)
	defer stop()
	defer func() { _ = cleanup.Run(context.WithoutCancel(ctx)) }()
	sh, err := runner.StartShared(ctx, runner.SharedOptions{Log: io.Discard, Infra: *infraKind, Target: t}, cleanup)
	if err != nil {
		// The infrastructure, or the file's build step: nothing of the
		// pipeline could be checked.
		return fmt.Errorf("%s: nothing checked: %w", t.Path, err)
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
