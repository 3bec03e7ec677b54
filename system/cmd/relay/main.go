// Command relay runs one outbox relay. Run several at once on one outbox.
// --variant (or FAULTLINE_VARIANT) switches one guard off for a relay
// variant (see package variant); any other process's variant leaves it correct.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"faultline/system/config"
	"faultline/system/relay"
)

func main() {
	var cfg relay.Config
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	cfg.Flags(fs)
	config.Main(fs, "RELAY", os.Args[1:], os.Stderr)
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "relay: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := relay.Run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "relay: %v\n", err)
		os.Exit(1)
	}
}
