package faultlinetest_test

import (
	"testing"

	"github.com/faultline-dev/faultline/faultlinetest"
)

// reliability is, in a team's repository, func TestReliability in a
// _test.go file beside its faultline.yaml; it is named otherwise here so
// that this package's own tests do not run the gate.
func reliability(t *testing.T) {
	faultlinetest.Gate(t, "faultline.yaml",
		faultlinetest.ReportDir("testdata/faultline-report"))
}

// The canonical use: the whole gate, one subtest per scenario and per
// broken variant. Run it all with go test -run TestReliability, one
// scenario with go test -run 'TestReliability/^unroutable-then-routable$'.
//
// The example is compiled, not run (it has no output to check): running
// it starts PostgreSQL, RabbitMQ, Toxiproxy and the pipeline's processes.
func Example() {
	_ = reliability
}
