#!/usr/bin/env bash
# Installs what faultline needs from the distribution's packages, only when
# missing: PostgreSQL 15 server binaries, RabbitMQ, and Chromium (the report
# test looks at the report page in a real headless browser). Idempotent;
# fine as root (CI) or with sudo. Neither service is started or enabled
# here: the harness runs private instances of its own.
# FAULTLINE_DEPS_EXAMPLES=0 leaves out Node.js and the example pipeline's
# packages (the GitHub Action: a team's toolchain is its own).
set -euo pipefail
examples="${FAULTLINE_DEPS_EXAMPLES:-1}"

need=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
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

[ "$examples" != 0 ] || exit 0
# The Node.js example pipeline's packages, exactly as its lockfile pins them.
cd "$(dirname "$0")/../examples/node-outbox"
npm ci --no-audit --no-fund --loglevel=error
echo "deps: examples/node-outbox: node packages installed from package-lock.json"
