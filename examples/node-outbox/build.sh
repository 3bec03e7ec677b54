#!/bin/sh
# faultline's build step for this pipeline (faultline.yaml, build:): a copy
# of the programs in the run's own folder ($1, faultline's {{build_dir}}),
# with the packages the lockfile pins installed beside them. Each faultline
# start gets its own copy, so two started side by side (two gates, two
# tests, a run beside a gate) never reinstall node_modules under each
# other's processes: `npm ci` empties node_modules before it installs, and a
# process started or restarted meanwhile finds no packages.
set -eu
[ $# -eq 1 ] && [ -n "$1" ] || { echo "usage: build.sh BUILD_DIR" >&2; exit 2; }
app="$1/app"
mkdir -p "$app"
# everything but the installed packages and the tests
tar -cf - --exclude=./node_modules --exclude=./test --exclude=./applylater_test.go . | tar -xf - -C "$app"
cd "$app"
exec npm ci --prefer-offline --no-audit --no-fund
