package scenarios

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/infra"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/target"
)

// compileTargets are the target files a catalogue scenario is compiled
// against: the reference, the examples and the test fixtures.
var compileTargets = []string{
	filepath.Join("..", "system", "faultline.yaml"),
	filepath.Join("..", "examples", "node-outbox", "faultline.yaml"),
	filepath.Join("..", "examples", "watermill-outbox", "faultline.yaml"),
	filepath.Join("..", "examples", "cdc-outbox", "faultline.yaml"),
	filepath.Join("testdata", "blind-reference", "faultline.yaml"),
	filepath.Join("testdata", "no-retry-budget", "faultline.yaml"),
	filepath.Join("testdata", "renamed", "faultline.yaml"),
	filepath.Join("testdata", "supervised", "faultline.yaml"),
}

// Every catalogue scenario compiles on every target, for several seeds,
// with no infrastructure: to a plan whose faults are the seed's schedule
// (each opened from outside where the target maps no crash point) in an
// order the runner accepts and whose traffic is the seed's, or to "not
// run" with its reason: the one the target gives to faultline list
// (Scenario.On), or what the target or a one-node broker without a
// standby lacks. The catalogue's scenario is left as it was.
func TestCompileCatalogue(t *testing.T) {
	everything := capable()
	for _, path := range compileTargets {
		tgt, err := target.Load(path)
		require.NoError(t, err, path)
		t.Run(tgt.Name, func(t *testing.T) {
			compiled := 0
			for _, sc := range Every() {
				evidence, settings := len(sc.Evidence), pairs(sc.Settings)
				for seed := int64(1); seed <= 3; seed++ {
					plan, err := runner.Compile(sc, tgt, everything, seed)
					drawn := sc
					drawn.Workload, drawn.Also = sc.TrafficFor(seed), nil
					on, _, onErr := drawn.On(tgt)
					if onErr != nil {
						require.Error(t, err, sc.Name)
						assert.True(t, runner.IsNotRun(err), "%s: %v", sc.Name, err)
						assert.Equal(t, "not run on target "+tgt.Name+": "+onErr.Error(), err.Error())
						continue
					}
					if runner.IsNotRun(err) {
						assert.True(t, strings.HasPrefix(err.Error(), "not run on target "+tgt.Name+": ") || strings.HasPrefix(err.Error(), "not run: "), err.Error())
						continue
					}
					require.NoError(t, err, "%s seed %d", sc.Name, seed)
					compiled++
					assert.Len(t, plan.Faults, len(on.Schedule(seed))-len(plan.NotOffered), sc.Name)
					assert.NoError(t, fault.CheckOrder(plan.Faults), sc.Name)
					assert.Equal(t, on.Workload, plan.Scenario.Workload, sc.Name)
					assert.Nil(t, plan.Scenario.Also, sc.Name)
				}
				assert.Len(t, sc.Evidence, evidence, "%s: the catalogue's evidence is not changed", sc.Name)
				assert.Equal(t, settings, pairs(sc.Settings), "%s: the catalogue's settings are not changed", sc.Name)
			}
			assert.Positive(t, compiled, "no scenario compiled on %s", tgt.Name)
		})
	}
}

// A fault the infrastructure cannot inject makes the scenario not run,
// with the provider named; given the capability, it compiles.
func TestCompileCapabilities(t *testing.T) {
	tgt, err := target.Load(filepath.Join("..", "system", "faultline.yaml"))
	require.NoError(t, err)
	noRestart := capable()
	noRestart.BrokerRestart = false
	apart := capable()
	apart.Apart = errors.New("no standby here")
	clustered := capable()
	clustered.Infra = threeNodes{}
	cases := []struct {
		scenario string
		caps     runner.Capabilities
		why      string
	}{
		{"broker-restart", capable(), ""},
		{"broker-restart", noRestart, "not run: needs a broker restart, which the test provider cannot do"},
		{"database-failover-async", apart, "not run: needs a database with a standby, which the test provider does not give: no standby here"},
		{"database-failover-async", capable(), "not run on target reference: needs a database with a standby, and the run's has none"},
		{"cluster-consumer-node-lost", capable(), "not run on target reference: needs a clustered broker, and the run's broker is a single node"},
		{"cluster-consumer-node-lost", clustered, ""},
		{"cluster-relay-node-lost", clustered, ""},
	}
	for _, tc := range cases {
		t.Run(tc.scenario, func(t *testing.T) {
			sc, err := Lookup(tc.scenario)
			require.NoError(t, err)
			_, err = runner.Compile(sc, tgt, tc.caps, 3)
			if tc.why == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, runner.IsNotRun(err))
			assert.Equal(t, tc.why, err.Error())
		})
	}
}

// threeNodes is a clustered broker of three nodes, as far as Compile asks
// (it only asks how many nodes there are).
type threeNodes struct{ infra.Cluster }

func (threeNodes) Nodes() []infra.BrokerNode { return make([]infra.BrokerNode, 3) }

// capable is an infrastructure that can do everything.
func capable() runner.Capabilities {
	return runner.Capabilities{Provider: "test", BrokerRestart: true, DatabaseRestart: true}
}

func kinds(faults []fault.Fault) []string {
	var out []string
	for _, f := range faults {
		out = append(out, f.Describe().Kind)
	}
	return out
}

func pairs(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
