package variant_test

import (
	"testing"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/infra/infratest"
)

// local is the test binary's PostgreSQL and RabbitMQ, for the order
// variants' tests. (They live here, not in system/order, so that package's
// tests keep their own TestMain.)
var local infra.Infra

func TestMain(m *testing.M) {
	infratest.Main(m, func(in infra.Infra) { local = in })
}
