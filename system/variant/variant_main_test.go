package variant_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"faultline/harness/infra"
)

// local is the test binary's PostgreSQL and RabbitMQ, for the order
// variants' tests. (They live here, not in system/order, so that package's
// tests keep their own TestMain.)
var local *infra.Local

func TestMain(m *testing.M) {
	if os.Getenv("FAULTLINE_SKIP_INFRA") != "" {
		os.Exit(m.Run())
	}
	ctx := context.Background()
	var err error
	local, err = infra.StartLocal(ctx, infra.LocalOptions{Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "variant tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = local.Stop(ctx)
	os.Exit(code)
}
