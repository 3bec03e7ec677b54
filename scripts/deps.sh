#!/usr/bin/env bash
# Installs what faultline needs from the distribution's packages, only when
# missing: PostgreSQL 13 or later (found as the local provider finds it:
# $FAULTLINE_PG_BIN, pg_config --bindir, postgres on PATH, the highest
# /usr/lib/postgresql/*/bin), RabbitMQ, and Chromium (the report test looks
# at the report page in a real headless browser); with the examples, also
# GoReleaser (make test checks .goreleaser.yaml) from the Go module proxy. Idempotent;
# fine as root (CI) or with sudo. Neither service is started or enabled
# here: the harness runs private instances of its own.
# FAULTLINE_DEPS_EXAMPLES=0 leaves out Node.js and the example pipeline's
# packages (the GitHub Action: a team's toolchain is its own).
set -euo pipefail
examples="${FAULTLINE_DEPS_EXAMPLES:-1}"

# pg_find: "VERSION MAJOR DIR (HOW)" of the PostgreSQL the local provider
# would run (harness/infra/pgbin.go), or nothing.
pg_find() {
  local dir="" how="" p d
  if [ -n "${FAULTLINE_PG_BIN:-}" ]; then
    dir=$FAULTLINE_PG_BIN how=FAULTLINE_PG_BIN
  elif command -v pg_config >/dev/null 2>&1 && d=$(pg_config --bindir 2>/dev/null) && [ -x "$d/postgres" ] && [ -x "$d/initdb" ]; then
    dir=$d how="pg_config --bindir"
  elif p=$(command -v postgres 2>/dev/null) && d=$(dirname "$(readlink -f "$p")") && [ -x "$d/initdb" ]; then
    dir=$d how="postgres on PATH"
  else
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -V | tail -n1)
    if [ -n "$d" ] && [ -x "$d/postgres" ] && [ -x "$d/initdb" ]; then dir=$d how="the highest under /usr/lib/postgresql"; fi
  fi
  [ -n "$dir" ] && [ -x "$dir/postgres" ] && [ -x "$dir/initdb" ] || return 0
  local v
  v=$("$dir/postgres" --version 2>/dev/null | sed -nE 's/.*\(PostgreSQL\) ([0-9][0-9A-Za-z.]*).*/\1/p')
  [ -n "$v" ] || return 0
  echo "$v ${v%%[!0-9]*} $dir ($how)"
}
pg_ok() { # pg_ok "VERSION MAJOR DIR (HOW)": 13 or later
  [ -n "$1" ] && [ "$(echo "$1" | cut -d' ' -f2)" -ge 13 ]
}

need=()
pg=$(pg_find)
if ! pg_ok "$pg"; then
  if [ -n "${FAULTLINE_PG_BIN:-}" ]; then
    echo "deps: FAULTLINE_PG_BIN=$FAULTLINE_PG_BIN: ${pg:+PostgreSQL ${pg%% *} is too old; }want the bin folder of PostgreSQL 13 or later (postgres and initdb)" >&2
    exit 1
  fi
  [ -z "$pg" ] || echo "deps: PostgreSQL ${pg%% *} in ${pg#* * } is older than 13: installing the distribution's"
  need+=(postgresql)
fi
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || need+=(rabbitmq-server)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ "$examples" = 0 ] || command -v npm >/dev/null 2>&1 || need+=(nodejs npm)

if [ ${#need[@]} -eq 0 ]; then
  echo "deps: postgresql, rabbitmq-server, chromium$([ "$examples" = 0 ] || echo " and node") already installed"
else
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "deps: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  # policy-rc.d keeps the packages' own services from starting where that is honoured.
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  echo "deps: installed ${need[*]}"
fi
pg=$(pg_find)
if ! pg_ok "$pg"; then
  echo "deps: no PostgreSQL 13 or later found${pg:+ (found ${pg%% *} in ${pg#* * })}; set FAULTLINE_PG_BIN to the bin folder of one" >&2
  exit 1
fi
echo "deps: PostgreSQL ${pg%% *} in ${pg#* * }"

[ "$examples" != 0 ] || exit 0

# GoReleaser for make test's `goreleaser check`, pinned; the Go module proxy
# builds it (about 4 minutes and 120 MB the first time), only when missing.
goreleaser_version=v2.17.0
gobin="$(go env GOPATH)/bin"
have=$("$gobin/goreleaser" --version 2>/dev/null || true)
if grep -q "GitVersion: *${goreleaser_version}\$" <<<"$have"; then
  echo "deps: goreleaser ${goreleaser_version} already installed"
else
  echo "deps: installing goreleaser ${goreleaser_version} into $gobin"
  GOBIN="$gobin" GOWORK=off go install "github.com/goreleaser/goreleaser/v2@${goreleaser_version}"
fi

# The Node.js example pipeline's packages, exactly as its lockfile pins them.
cd "$(dirname "$0")/../examples/node-outbox"
npm ci --no-audit --no-fund --loglevel=error
echo "deps: examples/node-outbox: node packages installed from package-lock.json"
