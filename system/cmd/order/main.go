// Command order runs the order service: POST /orders writes an order and its
// outbox row in one transaction. --variant (or FAULTLINE_VARIANT)
// commit-then-publish or publish-then-commit runs a broken service without
// an outbox that publishes to --amqp-url itself; any other process's variant
// leaves it correct.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"faultline/system/config"
	"faultline/system/order"
)

func main() {
	var cfg order.Config
	fs := flag.NewFlagSet("order", flag.ContinueOnError)
	cfg.Flags(fs)
	config.Main(fs, "ORDER", os.Args[1:], os.Stderr)
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "order: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := order.Run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "order: %v\n", err)
		os.Exit(1)
	}
}
