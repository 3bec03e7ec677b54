// Command inventory runs the inventory consumer: order events from RabbitMQ
// become stock reservations, each eventId taking effect once (inbox row and
// reservation in one transaction, ack after commit). --variant (or
// FAULTLINE_VARIANT) runs an inventory variant with one guard removed (see
// package variant); any other process's variant leaves it correct.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"faultline/system/config"
	"faultline/system/inventory"
)

func main() {
	cfg := inventory.DefaultConfig()
	fs := flag.NewFlagSet("inventory", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	config.Main(fs, inventory.EnvPrefix, os.Args[1:], os.Stderr)
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "inventory: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := inventory.Run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "inventory: %v\n", err)
		os.Exit(1)
	}
}
