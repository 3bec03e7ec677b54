package bench

import (
	"testing"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/infra/infratest"
)

// testInfra is the PostgreSQL and RabbitMQ this test binary shares.
var testInfra infra.Infra

func TestMain(m *testing.M) {
	infratest.Main(m, func(in infra.Infra) { testInfra = in })
}
