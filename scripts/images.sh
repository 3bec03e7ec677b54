#!/usr/bin/env bash
# make images: the images the docker provider and the container image need,
# built here from Debian's packages with no container registry:
#
#   faultline/bookworm:base              debootstrap --variant=minbase bookworm, imported
#   faultline/postgres:15                PostgreSQL 15, the official image's interface
#   faultline/rabbitmq:3.10-management   RabbitMQ 3.10 + management, the official image's interface
#   faultline/toxiproxy:local            faultline as Toxiproxy 2.5.0's server (API 8474)
#   faultline/faultline:local            the CLI with PostgreSQL, RabbitMQ, Chromium (Dockerfile)
#
# Idempotent: an image that exists is kept (FAULTLINE_IMAGES_REBUILD=1
# builds them all again). Installs docker.io and debootstrap when missing
# and starts dockerd when no daemon answers (it is left running; the script
# says so). FAULTLINE_DEBIAN_MIRROR overrides the mirror (default: the one
# this machine's apt uses, else deb.debian.org). Each step is timed.
# Use the images with the docker provider:
#   FAULTLINE_INFRA=docker FAULTLINE_POSTGRES_IMAGE=faultline/postgres:15 \
#   FAULTLINE_RABBITMQ_IMAGE=faultline/rabbitmq:3.10-management \
#   FAULTLINE_TOXIPROXY_IMAGE=faultline/toxiproxy:local go test ./scenarios
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=faultline/bookworm:base
PG=faultline/postgres:15
RMQ=faultline/rabbitmq:3.10-management
TOXI=faultline/toxiproxy:local
CLI=faultline/faultline:local
only="${1:-all}" # all, provider (the docker provider's three and their base), or one of: base postgres rabbitmq toxiproxy faultline

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
step() { printf 'images: %s\n' "$*"; }
timed() { # timed NAME CMD...: runs CMD, prints how long it took
  local name=$1 t0=$SECONDS; shift
  "$@"
  step "$name: done in $((SECONDS - t0))s"
}
apt_install() {
  step "installing $*"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
have_image() { [ -z "${FAULTLINE_IMAGES_REBUILD:-}" ] && docker image inspect "$1" >/dev/null 2>&1; }

# Docker: the client and a daemon that answers.
if ! command -v docker >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1; then apt_install docker.io; fi
if ! docker info >/dev/null 2>&1; then
  step "no Docker daemon answers: starting dockerd (log /tmp/dockerd.log; it keeps running, stop it with: kill \$(cat /var/run/docker.pid))"
  $sudo sh -c 'nohup dockerd > /tmp/dockerd.log 2>&1 &'
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "images: dockerd did not answer in 60s; see /tmp/dockerd.log" >&2; exit 1; }
fi

mirror() {
  if [ -n "${FAULTLINE_DEBIAN_MIRROR:-}" ]; then echo "$FAULTLINE_DEBIAN_MIRROR"; return; fi
  # The first bookworm mirror apt uses here (deb822 or one-line sources).
  local m
  m=$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
      | grep -oE 'https?://[^ ]+/debian/?' | grep -v -- '-security' | head -n1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}

base() {
  if have_image "$BASE"; then step "$BASE exists"; return; fi
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
  local m
  m=$(mirror)
  dir=$(mktemp -d /tmp/faultline-bookworm.XXXXXX)
  trap 'rootfs_cleanup' EXIT
  step "debootstrap --variant=minbase bookworm from $m"
  $sudo debootstrap --variant=minbase bookworm "$dir" "$m" >/tmp/faultline-debootstrap.log 2>&1 \
    || { tail -20 /tmp/faultline-debootstrap.log >&2; exit 1; }
  # What the official debian image adds: the updates and security suites,
  # no recommends, no apt caches kept.
  $sudo tee "$dir/etc/apt/sources.list" >/dev/null <<SRC
deb $m bookworm main
deb $m bookworm-updates main
deb ${m%/debian*}/debian-security bookworm-security main
SRC
  $sudo tee "$dir/etc/apt/apt.conf.d/90faultline" >/dev/null <<'APT'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
APT
  $sudo rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/debootstrap
  $sudo tar -C "$dir" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["bash"]' - "$BASE" >/dev/null
  rootfs_cleanup
}
dir=""
rootfs_cleanup() { if [ -n "$dir" ]; then $sudo rm -rf "$dir"; dir=""; fi; }

build() { # build IMAGE CONTEXT [docker build args...]
  local img=$1 ctx=$2; shift 2
  if have_image "$img"; then step "$img exists"; return; fi
  step "building $img"
  # The host's network: apt and the Go module proxy as this machine reaches them.
  docker build --network host --build-arg BASE="$BASE" -t "$img" "$@" "$ctx"
}

# A TLS-inspecting egress proxy's CA, as this host trusts it: the root
# Dockerfile's build stage fetches the Go toolchain and modules over HTTPS.
extra_ca=$(cat /usr/local/share/ca-certificates/*.crt 2>/dev/null || true)
cli() { build "$1" . --target "$2" --build-arg EXTRA_CA_CERTS="$extra_ca"; }

case "$only" in
  all)
    timed "$BASE" base
    timed "$PG" build "$PG" images/postgres
    timed "$RMQ" build "$RMQ" images/rabbitmq
    timed "$TOXI" cli "$TOXI" toxiproxy
    timed "$CLI" cli "$CLI" faultline
    ;;
  provider)
    timed "$BASE" base
    timed "$PG" build "$PG" images/postgres
    timed "$RMQ" build "$RMQ" images/rabbitmq
    timed "$TOXI" cli "$TOXI" toxiproxy
    ;;
  base) timed "$BASE" base ;;
  postgres) timed "$PG" build "$PG" images/postgres ;;
  rabbitmq) timed "$RMQ" build "$RMQ" images/rabbitmq ;;
  toxiproxy) timed "$TOXI" cli "$TOXI" toxiproxy ;;
  faultline) timed "$CLI" cli "$CLI" faultline ;;
  *) echo "usage: scripts/images.sh [all|provider|base|postgres|rabbitmq|toxiproxy|faultline]" >&2; exit 2 ;;
esac
docker image ls --format '{{.Repository}}:{{.Tag}}\t{{.Size}}' | grep '^faultline/' || true
