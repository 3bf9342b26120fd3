#!/usr/bin/env bash
# Generates the Python SDK of portable-lb's components (packages/component-provider) into OUT_DIR,
# as `pulumi package add` does into a Python project's sdks/portable-lb: the schema from the real
# plugin through `pulumi package get-schema`, the code from Pulumi's Python generator. Needs the
# bootstrap's tools and `npm run build`. Usage: scripts/with-tools bash scripts/python-sdk.sh OUT_DIR
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/with-tools bash scripts/python-sdk.sh OUT_DIR" >&2; exit 2; }
out=$1
plugin=$(cd "$(dirname "${BASH_SOURCE[0]}")/../packages/component-provider" && pwd)/pulumi-resource-portable-lb
command -v pulumi-python-sdkgen >/dev/null ||
  { echo "python-sdk: pulumi-python-sdkgen is not on PATH; run scripts/bootstrap.sh, then this through scripts/with-tools" >&2; exit 1; }
schema=$(mktemp)
trap 'rm -f "$schema"' EXIT
pulumi package get-schema "$plugin" >"$schema"
rm -rf "$out"
pulumi-python-sdkgen "$schema" "$out"
echo "$out"
