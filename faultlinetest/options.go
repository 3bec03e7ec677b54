package faultlinetest

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/scenarios"
)

// Option sets one of the gate's knobs; each is the `faultline gate` flag
// of the same name.
type Option func(*config)

// Seed is the seed of the fault schedules (faultline gate --seed): the
// same seed draws the same faults. Default: $FAULTLINE_SEED, else one drawn
// and logged, so a failing run can be repeated with Seed or
// FAULTLINE_SEED.
func Seed(seed int64) Option {
	return func(c *config) { c.seed, c.seedSet = seed, true }
}

// Retries is how many times a run that ended indeterminate (a fault that
// never happened, an infrastructure error) is run again, each time with
// the next seed (faultline gate --retries); 0 to 10, default 2. A run
// still indeterminate after them fails its subtest with "no verdict".
func Retries(n int) Option {
	return func(c *config) { c.retries = n }
}

// Parallel is how many scenario runs go on at once (faultline gate
// --parallel), at least 1, default 8. It is independent of go test's
// -parallel: Gate runs its subtests itself. Runs that restart the broker
// still run alone on the shared broker.
func Parallel(n int) Option {
	return func(c *config) { c.parallel = n }
}

// Infra is where PostgreSQL and RabbitMQ come from (faultline gate
// --infra): local, docker, external or auto. Default: $FAULTLINE_INFRA,
// else auto.
func Infra(kind string) Option {
	return func(c *config) { c.infra = kind }
}

// Profile is the catalogue to run (faultline gate --profile): "default"
// (one broker node, one database server) or "production" (those, and the
// scenarios of a clustered broker and a failing-over database, on
// infrastructure of their own). Default: "default".
func Profile(name string) Option {
	return func(c *config) { c.profile = name }
}

// ReportDir is the folder the report is written to (index.html,
// summary.md, results.json, junit.xml; runs/ with the logs of the
// correct pipeline's failing runs; faultline.log, what the harness
// logged), created if missing and its files replaced; relative to the
// test's package folder, as go test runs there.
//
// Default: t.ArtifactDir(), which go test removes after the test unless
// it is run with -artifacts (go test -artifacts -outputdir DIR keeps it
// under DIR). Name a folder to keep the report in a known place (a CI
// artifact).
func ReportDir(dir string) Option {
	return func(c *config) { c.reportDir = dir }
}

// maxRetries bounds Retries, as the CLI does: each retry is a whole run
// again.
const maxRetries = 10

// config is the gate's knobs, options applied and checked.
type config struct {
	seed      int64
	seedSet   bool
	retries   int
	parallel  int
	infra     string
	profile   string
	reportDir string
	picked    []runner.Scenario // the profile's scenarios
}

// newConfig applies opts over the defaults and checks them; every bad
// value is named in the error, one line each.
func newConfig(opts []Option) (config, error) {
	c := config{retries: 2, parallel: 8, profile: scenarios.ProfileDefault}
	for _, o := range opts {
		o(&c)
	}
	var errs []error
	if c.retries < 0 || c.retries > maxRetries {
		errs = append(errs, fmt.Errorf("Retries must be between 0 and %d, got %d", maxRetries, c.retries))
	}
	if c.parallel < 1 {
		errs = append(errs, fmt.Errorf("Parallel must be at least 1, got %d", c.parallel))
	}
	if c.infra != "" && !slices.Contains(infra.Kinds(), c.infra) {
		errs = append(errs, fmt.Errorf("Infra %q: want one of %s", c.infra, strings.Join(infra.Kinds(), ", ")))
	}
	picked, err := scenarios.Profile(c.profile)
	if err != nil {
		errs = append(errs, fmt.Errorf("Profile: %w", err))
	}
	c.picked = picked
	if !c.seedSet {
		seed, err := seedFromEnv(os.Getenv("FAULTLINE_SEED"))
		if err != nil {
			errs = append(errs, err)
		}
		c.seed = seed
	}
	return c, errors.Join(errs...)
}

// seedFromEnv is the seed FAULTLINE_SEED names (v), or, when it is empty,
// one drawn from the clock as the CLI draws it.
func seedFromEnv(v string) (int64, error) {
	if v == "" {
		return time.Now().UnixNano() % 1_000_000, nil
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("FAULTLINE_SEED=%q: want an integer", v)
	}
	return s, nil
}
