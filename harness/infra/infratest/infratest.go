// Package infratest gives a test binary the one PostgreSQL and RabbitMQ its
// tests share: each test then makes its own databases and vhost on it.
package infratest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/harness/infra"
)

// Main starts the infrastructure FAULTLINE_INFRA names (default auto: the
// local provider where PostgreSQL and RabbitMQ are installed), hands it to
// use, runs the tests, stops it and exits with the tests' status. A provider
// that cannot start fails the binary: nothing is skipped.
func Main(m *testing.M, use func(infra.Infra)) {
	os.Exit(run(m, use))
}

func run(m *testing.M, use func(infra.Infra)) int {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // above the local provider's own bound per service
	in, err := infra.Open(ctx, "", infra.Options{Log: os.Stderr})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start the test infrastructure: %v\n", err)
		return 1
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := in.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "stop the test infrastructure: %v\n", err)
		}
	}()
	use(in)
	return m.Run()
}
