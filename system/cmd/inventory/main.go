// Command inventory runs the inventory consumer: order events from RabbitMQ
// become stock reservations, each eventId taking effect once (inbox row and
// reservation in one transaction, ack after commit). --variant (or
// FAULTLINE_VARIANT) runs an inventory variant with one guard removed (see
// package variant); any other process's variant leaves it correct.
package main

import (
	"context"
	"flag"

	"github.com/faultline-dev/faultline/system/config"
	"github.com/faultline-dev/faultline/system/inventory"
)

func main() {
	cfg := inventory.DefaultConfig()
	fs := flag.NewFlagSet("inventory", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	config.RunMain(fs, inventory.EnvPrefix, func() error { return cfg.Validate() }, func(ctx context.Context) error { return inventory.Run(ctx, cfg) })
}
