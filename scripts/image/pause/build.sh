#!/usr/bin/env bash
# The pause image the lab's kubelets use as their pod sandbox image: Kubernetes' own pause (built
# static by the bootstrap from k8s.io/kubernetes' build/pause at the node version, ~700 KB), alone in
# an image made by scripts/image/ociImage.sh.
#
#   scripts/image/pause/build.sh PAUSE_BINARY OUT.tar REF EPOCH
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 4 ] || { echo "usage: $0 PAUSE_BINARY OUT.tar REF EPOCH" >&2; exit 2; }
pause=$1 out=$2 ref=$3 epoch=$4
"$pause" -v >/dev/null
"$here/../ociImage.sh" --out "$out" --ref "$ref" --timestamp "$epoch" --add "$pause:/pause" \
  --entrypoint '["/pause"]' --user 65535:65535
