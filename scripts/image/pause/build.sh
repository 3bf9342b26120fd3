#!/usr/bin/env bash
# The pause image the lab's kubelets use as their pod sandbox image: pause.c built static with gcc
# (~700 KB), alone in an image made by scripts/image/ociImage.sh.
#
#   scripts/image/pause/build.sh OUT.tar REF EPOCH
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 3 ] || { echo "usage: $0 OUT.tar REF EPOCH" >&2; exit 2; }
out=$1 ref=$2 epoch=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# -ffile-prefix-map and no build id keep the binary the same bytes wherever it is built.
gcc -static -Os -s -Wall -Werror -ffile-prefix-map="$here"=. -Wl,--build-id=none \
  -o "$work/pause" "$here/pause.c"
"$work/pause" -v >/dev/null
"$here/../ociImage.sh" --out "$out" --ref "$ref" --timestamp "$epoch" --add "$work/pause:/pause" \
  --entrypoint '["/pause"]' --user 65535:65535
