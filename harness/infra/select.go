package infra

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/harness/ports"
	"github.com/faultline-dev/faultline/proxies"
)

// The providers, as FAULTLINE_INFRA and --infra name them.
const (
	KindAuto     = "auto"
	KindLocal    = "local"
	KindDocker   = "docker"
	KindExternal = "external"
)

// EnvInfra chooses the provider: local, docker, external or auto (the
// default).
const EnvInfra = "FAULTLINE_INFRA"

// Kinds are the values EnvInfra takes.
func Kinds() []string { return []string{KindAuto, KindLocal, KindDocker, KindExternal} }

// Probe tells Select what this host offers. Each function returns nil when
// the provider can run, or why not.
type Probe struct {
	// LocalBinaries: the PostgreSQL (13 or later) and RabbitMQ binaries
	// the local provider runs are installed.
	LocalBinaries func() error
	// DockerAnswers: a Docker daemon answers.
	DockerAnswers func() error
}

// Select returns the provider to use: FAULTLINE_INFRA from env if it names
// one (without probing: starting it says what is missing), else, for auto
// or empty, local when the binaries are installed, else docker when a
// daemon answers. With neither it returns an error that names both ways
// and how to get each.
func Select(env func(string) string, probe Probe) (string, error) {
	raw := env(EnvInfra)
	kind := strings.ToLower(strings.TrimSpace(raw))
	switch kind {
	case KindLocal, KindDocker, KindExternal:
		return kind, nil
	case "", KindAuto:
	default:
		return "", fmt.Errorf("%s=%q (or --infra) is not a provider: want one of %s", EnvInfra, raw, strings.Join(Kinds(), ", "))
	}
	localErr := probe.LocalBinaries()
	if localErr == nil {
		return KindLocal, nil
	}
	dockerErr := probe.DockerAnswers()
	if dockerErr == nil {
		return KindDocker, nil
	}
	return "", fmt.Errorf(`no infrastructure to run on (%s=auto tries local, then docker):
  local:  %v
          install PostgreSQL 13 or later and RabbitMQ: make deps (Debian: apt-get install postgresql rabbitmq-server; another PostgreSQL: %s=its bin folder)
  docker: no Docker daemon answers: %v
          install Docker and start its daemon (Debian: apt-get install docker.io && systemctl start docker; or Docker Desktop), then %s=docker
  or run on services you have: %s=external with %s, %s and %s
%s takes %s`,
		EnvInfra, localErr, EnvPGBin, dockerErr, EnvInfra,
		EnvInfra, EnvPGURL, EnvAMQPURL, EnvManagementURL,
		EnvInfra, strings.Join(Kinds(), ", "))
}

// HostProbe probes this host; ctx bounds the Docker probe (at most 10 s).
func HostProbe(ctx context.Context) Probe {
	return Probe{
		LocalBinaries: func() error { return localBinaries(ctx) },
		DockerAnswers: func() error {
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return DockerAnswers(dctx)
		},
	}
}

// localBinaries checks for what StartLocal runs: a PostgreSQL 13 or later
// (findPostgres) and RabbitMQ.
func localBinaries(ctx context.Context) error {
	var problems []string
	if _, err := findPostgres(ctx, hostPGSearch()); err != nil {
		problems = append(problems, err.Error())
	}
	var missing []string
	if !isExecutable(rabbitServer) {
		missing = append(missing, rabbitServer)
	}
	if _, err := findEpmd(); err != nil {
		missing = append(missing, "epmd (Erlang)")
	}
	if len(missing) > 0 {
		problems = append(problems, "RabbitMQ is not installed: no "+strings.Join(missing, ", "))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// Options configure Start and Open.
type Options struct {
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Env is read for FAULTLINE_INFRA and the provider's settings (URLs,
	// images); nil: os.Getenv.
	Env func(string) string
	// Ports hands out the ports of the services the local provider starts;
	// nil: an allocator of its own. Share one with whatever else binds
	// loopback ports in this process (the target's processes).
	Ports *ports.Allocator
}

// Start starts the provider kind (local, docker or external) with its
// settings from opts.Env. On error it returns a nil Infra.
func Start(ctx context.Context, kind string, opts Options) (Infra, error) {
	env := opts.Env
	if env == nil {
		env = os.Getenv
	}
	switch kind {
	case KindLocal:
		l, err := StartLocal(ctx, LocalOptions{Log: opts.Log, Ports: opts.Ports})
		if err != nil {
			return nil, err
		}
		return l, nil
	case KindDocker:
		dopts, err := DockerOptionsFromEnv(env)
		if err != nil {
			return nil, err
		}
		dopts.Log = opts.Log
		d, err := StartDocker(ctx, dopts)
		if err != nil {
			return nil, err
		}
		return d, nil
	case KindExternal:
		eopts := ExternalOptionsFromEnv(env)
		eopts.Log = opts.Log
		e, err := StartExternal(ctx, eopts)
		if err != nil {
			return nil, err
		}
		return e, nil
	default:
		return nil, fmt.Errorf("start infrastructure: unknown provider %q: want one of %s", kind, strings.Join(Kinds()[1:], ", "))
	}
}

// Open selects the provider — requested if not empty (the --infra flag),
// else FAULTLINE_INFRA, else auto — and starts it.
func Open(ctx context.Context, requested string, opts Options) (Infra, error) {
	env := opts.Env
	if env == nil {
		env = os.Getenv
	}
	if requested != "" {
		base := env
		env = func(k string) string {
			if k == EnvInfra {
				return requested
			}
			return base(k)
		}
		opts.Env = env
	}
	kind, err := Select(env, HostProbe(ctx))
	if err != nil {
		return nil, err
	}
	if opts.Log != nil {
		how := "chosen"
		if k := strings.ToLower(strings.TrimSpace(env(EnvInfra))); k == "" || k == KindAuto {
			how = "auto"
		}
		fmt.Fprintf(opts.Log, "infra: %s (%s)\n", kind, how)
	}
	return Start(ctx, kind, opts)
}

// ToxiproxyProvider is implemented by providers that run their own
// Toxiproxy server (docker: in the containers' network, so that links
// reach the services by their aliases). Where Infra does not implement
// it, the runner starts a Toxiproxy server on this host.
type ToxiproxyProvider interface {
	Toxiproxy() proxies.Links
}

// LinkUpstreams implements Infra: the Toxiproxy server runs on this host
// and reaches the services on loopback.
func (l *Local) LinkUpstreams() (postgres, amqp string) {
	return l.PostgresAddr(), l.AMQPAddr()
}

// errStopped is returned by providers used after Stop.
var errStopped = errors.New("infrastructure is stopped")
