package infra

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// probeOf returns a probe whose answers are fixed, and counts its calls.
func probeOf(local, docker error, calls *[]string) Probe {
	return Probe{
		LocalBinaries: func() error { *calls = append(*calls, "local"); return local },
		DockerAnswers: func() error { *calls = append(*calls, "docker"); return docker },
	}
}

func TestSelect(t *testing.T) {
	noLocal := errors.New("PostgreSQL 15 and RabbitMQ are not installed: no /usr/lib/postgresql/15/bin/initdb")
	noDocker := errors.New("Cannot connect to the Docker daemon at unix:///var/run/docker.sock")
	cases := []struct {
		name          string
		infra         string
		local, docker error
		want          string   // kind, or "" for an error
		wantErr       []string // substrings of the error
		probes        []string // which probes ran, in order
	}{
		{name: "unset, local installed", want: KindLocal, probes: []string{"local"}},
		{name: "auto, local installed", infra: "auto", docker: noDocker, want: KindLocal, probes: []string{"local"}},
		{name: "auto, docker only", infra: "auto", local: noLocal, want: KindDocker, probes: []string{"local", "docker"}},
		{name: "unset, docker only", local: noLocal, want: KindDocker, probes: []string{"local", "docker"}},
		{name: "both, local first", want: KindLocal, probes: []string{"local"}},
		{name: "explicit local is not probed", infra: "local", local: noLocal, want: KindLocal},
		{name: "explicit docker is not probed", infra: "docker", docker: noDocker, want: KindDocker},
		{name: "explicit external", infra: "external", local: noLocal, docker: noDocker, want: KindExternal},
		{name: "case and spaces", infra: " Docker ", want: KindDocker},
		{
			name: "auto with neither", infra: "auto", local: noLocal, docker: noDocker,
			probes: []string{"local", "docker"},
			wantErr: []string{
				"no infrastructure to run on (FAULTLINE_INFRA=auto tries local, then docker)",
				"local:  " + noLocal.Error(),
				"make deps", "apt-get install postgresql rabbitmq-server",
				"docker: no Docker daemon answers: " + noDocker.Error(),
				"install Docker and start its daemon", "FAULTLINE_INFRA=docker",
				"FAULTLINE_INFRA=external with FAULTLINE_PG_URL, FAULTLINE_AMQP_URL and FAULTLINE_AMQP_MANAGEMENT_URL",
				"FAULTLINE_INFRA takes auto, local, docker, external",
			},
		},
		{
			name: "unset with neither", local: noLocal, docker: noDocker,
			probes:  []string{"local", "docker"},
			wantErr: []string{"no infrastructure to run on", "make deps", "install Docker"},
		},
		{
			name: "unknown value", infra: "kubernetes",
			wantErr: []string{`FAULTLINE_INFRA="kubernetes" (or --infra) is not a provider: want one of auto, local, docker, external`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var calls []string
			kind, err := Select(envOf(map[string]string{EnvInfra: c.infra}), probeOf(c.local, c.docker, &calls))
			if c.wantErr != nil {
				require.Error(t, err)
				assert.Empty(t, kind)
				for _, s := range c.wantErr {
					assert.Contains(t, err.Error(), s)
				}
			} else {
				require.NoError(t, err)
				assert.Equal(t, c.want, kind)
			}
			assert.Equal(t, c.probes, calls, "probes run")
		})
	}
}

func TestStartUnknownKind(t *testing.T) {
	in, err := Start(t.Context(), "kubernetes", Options{})
	assert.Nil(t, in)
	assert.ErrorContains(t, err, `unknown provider "kubernetes": want one of local, docker, external`)
}

func TestOpenRequestedOverridesTheEnvironment(t *testing.T) {
	env := envOf(map[string]string{EnvInfra: "local"})
	in, err := Open(t.Context(), "nonsense", Options{Env: env})
	assert.Nil(t, in)
	assert.ErrorContains(t, err, `FAULTLINE_INFRA="nonsense" (or --infra) is not a provider`)

	// external from the flag, with its URLs missing: it fails on them
	// without touching the network.
	in, err = Open(t.Context(), "external", Options{Env: env})
	assert.Nil(t, in)
	assert.ErrorContains(t, err, "FAULTLINE_PG_URL is not set")
}

func TestStartReturnsAnUntypedNilOnError(t *testing.T) {
	in, err := Start(context.Background(), KindExternal, Options{Env: envOf(nil)})
	require.Error(t, err)
	assert.True(t, in == nil, "a failed Start must return a nil interface, not a nil *External in one")
}

func TestDockerOptionsFromEnv(t *testing.T) {
	o, err := DockerOptionsFromEnv(envOf(nil))
	require.NoError(t, err)
	o.applyDefaults()
	assert.Equal(t, DockerOptions{
		PostgresImage: "postgres:15", RabbitMQImage: "rabbitmq:3.10-management",
		ToxiproxyImage: "ghcr.io/shopify/toxiproxy:2.5.0", ToxiproxyPorts: 100,
	}, o)

	o, err = DockerOptionsFromEnv(envOf(map[string]string{
		EnvPostgresImage: "postgres:16", EnvRabbitMQImage: "mirror/rabbitmq:3.13-management",
		EnvToxiproxyImage: "mirror/toxiproxy:2.5.0", EnvToxiproxyPorts: "40",
	}))
	require.NoError(t, err)
	assert.Equal(t, DockerOptions{
		PostgresImage: "postgres:16", RabbitMQImage: "mirror/rabbitmq:3.13-management",
		ToxiproxyImage: "mirror/toxiproxy:2.5.0", ToxiproxyPorts: 40,
	}, o)

	for _, bad := range []string{"0", "-3", "many", "1001"} {
		_, err := DockerOptionsFromEnv(envOf(map[string]string{EnvToxiproxyPorts: bad}))
		assert.ErrorContains(t, err, "FAULTLINE_TOXIPROXY_PORTS=", bad)
	}
}

func TestLocalBinariesMatchesWhatStartLocalRuns(t *testing.T) {
	err := localBinaries(t.Context())
	if err != nil {
		assert.Regexp(t, `PostgreSQL|RabbitMQ is not installed: no `, err.Error())
		t.Logf("local binaries: %v", err)
		return
	}
	_, err = findEpmd()
	assert.NoError(t, err)
}
