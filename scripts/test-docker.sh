#!/usr/bin/env bash
# make test-docker: the docker provider's tests on this machine, with the
# images `make images` builds from Debian's packages (no registry needed):
# the provider's own tests (harness/infra TestDocker: the contract, a broker
# restart keeping a quorum queue's message, a Toxiproxy link by alias;
# TestDockerCluster and TestDockerStandby: the production profile's cluster
# and standby) and the reference's gate on it. Ryuk (testcontainers' reaper) is off: its
# image cannot be pulled without a registry; faultline removes its
# containers itself, and this script checks that none is left.
#
# Not part of `make test` / CI (.ci/run): see docs/ci.md "The docker
# provider" for the decision and the times it rests on.
set -euo pipefail
cd "$(dirname "$0")/.."

started_dockerd=""
if ! docker info >/dev/null 2>&1; then started_dockerd=1; fi
bash scripts/images.sh provider
stop_dockerd() {
  if [ -n "$started_dockerd" ] && [ -f /var/run/docker.pid ]; then
    echo "test-docker: stopping the dockerd this script started"
    kill "$(cat /var/run/docker.pid)" 2>/dev/null || true
  fi
}
trap stop_dockerd EXIT

export FAULTLINE_INFRA=docker \
  FAULTLINE_POSTGRES_IMAGE=faultline/postgres:15 \
  FAULTLINE_RABBITMQ_IMAGE=faultline/rabbitmq:3.10-management \
  FAULTLINE_TOXIPROXY_IMAGE=faultline/toxiproxy:local \
  TESTCONTAINERS_RYUK_DISABLED=true
# In a container (this machine kind), the published ports are reached on
# the loopback, not through the Docker bridge's gateway.
if [ -f /.dockerenv ]; then export TESTCONTAINERS_HOST_OVERRIDE=localhost; fi

before=$(docker ps -aq | sort)
t0=$SECONDS
go test -count=1 -run 'TestDocker' ./harness/infra
echo "test-docker: TestDocker* in $((SECONDS - t0))s"
t1=$SECONDS
go run ./cmd/faultline gate --infra docker
echo "test-docker: the reference's gate on the docker provider in $((SECONDS - t1))s"
# Only containers that appeared count: another user of the same daemon
# may have removed its own meanwhile.
after=$(docker ps -aq | sort)
left=$(comm -13 <(echo "$before") <(echo "$after"))
if [ -n "$left" ]; then
  echo "test-docker: containers left behind:" >&2
  echo "$left" >&2
  exit 1
fi
