// Package gotest is how a team runs faultline's gate from its own Go
// tests (see README.md): one test, its scenarios and variants as
// subtests.
package gotest

import (
	"testing"

	"github.com/faultline-dev/faultline/faultlinetest"
)

// TestReliability is the gate on the reference pipeline: every scenario on
// the correct pipeline, every broken variant through the scenarios that
// must catch it. A team points it at its own faultline.yaml. The report
// goes to testdata/faultline-report, kept after the test for a look or a
// CI artifact (ignored by git).
func TestReliability(t *testing.T) {
	faultlinetest.Gate(t, "../../system/faultline.yaml",
		faultlinetest.ReportDir("testdata/faultline-report"))
}
