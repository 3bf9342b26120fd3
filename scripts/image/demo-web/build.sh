#!/usr/bin/env bash
# The lab's demo web server (main.go here): a static Go binary alone in an image made by
# scripts/image/ociImage.sh, run as nobody. Its tests run in every build (the cache key covers this
# folder), so a change cannot reach the lab untested.
#
#   scripts/image/demo-web/build.sh OUT.tar REF EPOCH
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 3 ] || { echo "usage: $0 OUT.tar REF EPOCH" >&2; exit 2; }
out=$1 ref=$2 epoch=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/demo-web.XXXXXX")
trap 'rm -rf "$work"' EXIT
(cd "$here" && export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod &&
  go vet . && go test -count=1 . && go build -trimpath -ldflags='-s -w' -o "$work/demo-web" .)
"$here/../ociImage.sh" --out "$out" --ref "$ref" --timestamp "$epoch" --add "$work/demo-web:/demo-web" \
  --entrypoint '["/demo-web"]' --user 65534:65534
