#!/usr/bin/env bash
# The README's test command (`npm test`): sets up every tool on a fresh machine (cold ~25 min, then
# seconds), builds, type-checks, lints, and runs every test. Extra arguments go to Jest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh
. scripts/toolenv.sh
npm run --silent build
npm run --silent typecheck
npm run --silent lint
# Bounded: a test that leaks a handle keeps Jest alive forever; fail clearly instead of hanging CI.
timeout --kill-after=30s 30m npm run --silent jest -- --ci "$@" || {
  rc=$?
  [ "$rc" -eq 124 ] && echo "test: Jest did not finish within 30 minutes (a leaked handle or a hung test); see above" >&2
  exit "$rc"
}
