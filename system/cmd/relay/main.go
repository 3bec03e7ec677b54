// Command relay runs one outbox relay. Run several at once on one outbox.
// --variant (or FAULTLINE_VARIANT) switches one guard off for a relay
// variant (see package variant); any other process's variant leaves it correct.
package main

import (
	"context"
	"flag"

	"github.com/faultline-dev/faultline/system/config"
	"github.com/faultline-dev/faultline/system/relay"
)

func main() {
	var cfg relay.Config
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	cfg.Flags(fs)
	config.RunMain(fs, "RELAY", func() error { return cfg.Validate() }, func(ctx context.Context) error { return relay.Run(ctx, cfg) })
}
