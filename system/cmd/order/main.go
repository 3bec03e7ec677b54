// Command order runs the order service: POST /orders writes an order and its
// outbox row in one transaction. --variant (or FAULTLINE_VARIANT)
// commit-then-publish or publish-then-commit runs a broken service without
// an outbox that publishes to --amqp-url itself; any other process's variant
// leaves it correct.
package main

import (
	"context"
	"flag"

	"github.com/faultline-dev/faultline/system/config"
	"github.com/faultline-dev/faultline/system/order"
)

func main() {
	var cfg order.Config
	fs := flag.NewFlagSet("order", flag.ContinueOnError)
	cfg.Flags(fs)
	config.RunMain(fs, "ORDER", func() error { return cfg.Validate() }, func(ctx context.Context) error { return order.Run(ctx, cfg) })
}
