// Package faultlinetest runs faultline's reliability gate from a Go test,
// in a team's own repository:
//
//	func TestReliability(t *testing.T) {
//		faultlinetest.Gate(t, "faultline.yaml")
//	}
//
// Gate does what `faultline gate` does: every scenario of the catalogue on
// the correct pipeline, and on each broken variant the target file lists
// the scenarios that must catch it, on real PostgreSQL, RabbitMQ and
// Toxiproxy. Each is a subtest of t:
//
//	TestReliability/<scenario>        a scenario on the correct pipeline
//	TestReliability/variant/<name>    a broken variant, run through its catching scenarios
//
// so that -run picks a subset, and only that subset starts anything:
//
//	go test -run 'TestReliability/^unroutable-then-routable$' .
//	go test -run 'TestReliability/variant/^no-lease$' .
//
// (A -run element is an unanchored regular expression: without ^ and $,
// unroutable-then-routable also picks blackbox-unroutable-then-routable.)
//
// The infrastructure starts when the first subtest that runs needs it,
// once for all of them, and stops in t.Cleanup; nothing starts when -run
// picks no subtest, and nothing in -short (Gate skips t). A subtest fails
// on a violation (with the violation's summary), on a variant its
// scenarios did not catch, and with "no verdict" on a run that stayed
// indeterminate through its retries: an indeterminate run is never a pass.
// A scenario the target does not offer what it needs is skipped, with the
// reason. The report (index.html, summary.md, results.json, junit.xml) of
// the subtests that ran is written when they are over; see ReportDir.
//
// # Stability
//
// Stable, changed only with a new major version: this package, the
// protocol module (github.com/faultline-dev/faultline/protocol), and the
// faultline CLI with its exit statuses (0 all held, 1 a violation or a
// variant not caught, 2 bad usage or a bad target file, 3 no verdict, 130
// interrupted). Everything under harness/, scenarios/ and reports/ may
// change in any release: those packages are exported for faultline's CLI
// and this package, and a team's code should import none of them. The
// catalogue itself belongs to scenarios/: its scenarios, hence the
// subtests' names, may change with it.
package faultlinetest
